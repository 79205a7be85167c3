package backup

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Report is what a backup or restore Job says when it ends, in its
// container's termination message (at most MaxReportBytes, which a
// kubelet keeps): the streams it wrote or restored, or why it failed.
type Report struct {
	// Streams are the streams done, in order.
	Streams []StreamReport
	// More is how many streams were done beyond those listed (the
	// message had no room for them).
	More int
	// Reason and Message say why it failed; empty when it did not.
	Reason  string
	Message string
}

// StreamReport is one stream of a Report.
type StreamReport struct {
	Name                               string
	Messages, Bytes, FirstSeq, LastSeq uint64
	Consumers                          int
	DataBytes                          int64
}

// MaxReportBytes is the size of a termination message a kubelet keeps.
const MaxReportBytes = 4096

const reportHeader = "nats-operator report v1"

// Encode writes the report as lines a kubelet keeps as a termination
// message: a header, a line per stream, then "more N" for the streams
// left out to stay under MaxReportBytes, and "error <reason> <message>".
func (r Report) Encode() string {
	var b strings.Builder
	b.WriteString(reportHeader + "\n")
	tail := ""
	if r.Reason != "" {
		msg := strings.Join(strings.Fields(r.Message), " ")
		if len(msg) > 1024 {
			msg = msg[:1024] + "..."
		}
		tail = fmt.Sprintf("error %s %s\n", r.Reason, msg)
	}
	more := r.More
	for i, s := range r.Streams {
		line := fmt.Sprintf("stream %s %d %d %d %d %d %d\n", s.Name, s.Messages, s.Bytes, s.FirstSeq, s.LastSeq, s.Consumers, s.DataBytes)
		// Room for this line, a "more" line and the error.
		if b.Len()+len(line)+len("more 99999\n")+len(tail) > MaxReportBytes {
			more += len(r.Streams) - i
			break
		}
		b.WriteString(line)
	}
	if more > 0 {
		fmt.Fprintf(&b, "more %d\n", more)
	}
	b.WriteString(tail)
	return b.String()
}

// ParseReport reads a termination message Encode wrote.
func ParseReport(s string) (Report, error) {
	var r Report
	sc := bufio.NewScanner(strings.NewReader(s))
	if !sc.Scan() || sc.Text() != reportHeader {
		return r, errors.New("not a nats-operator report")
	}
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "stream":
			f := strings.Fields(rest)
			if len(f) != 7 {
				return r, fmt.Errorf("report line %q", sc.Text())
			}
			var n [6]uint64
			for i := range n {
				v, err := strconv.ParseUint(f[i+1], 10, 64)
				if err != nil {
					return r, fmt.Errorf("report line %q: %w", sc.Text(), err)
				}
				n[i] = v
			}
			r.Streams = append(r.Streams, StreamReport{Name: f[0], Messages: n[0], Bytes: n[1], FirstSeq: n[2], LastSeq: n[3], Consumers: int(n[4]), DataBytes: int64(n[5])})
		case "more":
			v, err := strconv.Atoi(rest)
			if err != nil {
				return r, fmt.Errorf("report line %q: %w", sc.Text(), err)
			}
			r.More = v
		case "error":
			r.Reason, r.Message, _ = strings.Cut(rest, " ")
		default:
			return r, fmt.Errorf("report line %q", sc.Text())
		}
	}
	return r, nil
}
