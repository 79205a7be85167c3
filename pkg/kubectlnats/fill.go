package kubectlnats

import (
	"strings"
	"unicode/utf8"
)

// Screen widths: plan's screen (and the actions', which print plan's
// verdict) fits in planWidth columns, status's in statusWidth.
const (
	planWidth   = 100
	statusWidth = 80
)

// fill is head followed by text, broken at spaces into lines of at most
// width columns; the lines after the first are indented as deep as head is
// long (a hanging indent). A word longer than a whole line (a long path) is
// cut. There is no newline at the end.
func fill(head, text string, width int) string {
	indent := strings.Repeat(" ", utf8.RuneCountInString(head))
	room := max(width-len(indent), 10)
	var sb strings.Builder
	sb.WriteString(head)
	n := 0 // columns used on the current line after the indent
	for _, w := range strings.Fields(text) {
		for utf8.RuneCountInString(w) > room {
			// A word too long for any line: finish the current line, then
			// cut the word into whole lines.
			if n > 0 {
				sb.WriteString("\n" + indent)
				n = 0
			}
			cut := byteIndexOfRune(w, room)
			sb.WriteString(w[:cut] + "\n" + indent)
			w = w[cut:]
		}
		l := utf8.RuneCountInString(w)
		switch {
		case n > 0 && n+1+l > room:
			sb.WriteString("\n" + indent)
			n = 0
		case n > 0:
			sb.WriteByte(' ')
			n++
		}
		sb.WriteString(w)
		n += l
	}
	return strings.TrimRight(sb.String(), " ")
}

// byteIndexOfRune is the byte offset of s's i-th rune.
func byteIndexOfRune(s string, i int) int {
	for off := range s {
		if i == 0 {
			return off
		}
		i--
	}
	return len(s)
}

// cut shortens a line longer than width columns to width, its end
// replaced by "...".
func cut(line string, width int) string {
	if utf8.RuneCountInString(line) <= width {
		return line
	}
	return line[:byteIndexOfRune(line, width-3)] + "..."
}
