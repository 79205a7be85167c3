package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// instruction is one instruction of a Dockerfile, continuation lines
// joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, COPY, ...
	args string
}

func parseDockerfile(t *testing.T, text string) [][]instruction {
	t.Helper()
	var stages [][]instruction
	var cur *instruction
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur == nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur == nil {
			cmd, rest, _ := strings.Cut(trimmed, " ")
			cur = &instruction{line: i + 1, cmd: strings.ToUpper(cmd)}
			trimmed = rest
		} else if strings.HasPrefix(trimmed, "#") {
			continue
		}
		more := strings.HasSuffix(trimmed, `\`)
		cur.args = strings.TrimSpace(cur.args + " " + strings.TrimSpace(strings.TrimSuffix(trimmed, `\`)))
		if more {
			continue
		}
		if cur.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			if cur.cmd != "ARG" {
				t.Fatalf("Dockerfile:%d: %s before the first FROM", cur.line, cur.cmd)
			}
		} else {
			stages[len(stages)-1] = append(stages[len(stages)-1], *cur)
		}
		cur = nil
	}
	if len(stages) == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	return stages
}

// stageName is the AS name of a stage.
func stageName(s []instruction) string {
	f := strings.Fields(s[0].args)
	if len(f) == 3 && strings.EqualFold(f[1], "as") {
		return f[2]
	}
	return ""
}

// The Dockerfile's last stage describes the image Build makes: from
// scratch, the same files at the same paths (the binary from a stage that
// builds it static; the others from the files of this package, which
// Build embeds), the same labels, user and entrypoint, and nothing else.
func TestDockerfileDescribesTheSameImage(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDockerfile(t, string(raw)); err != nil {
		t.Fatal(err)
	}
}

// The check fails, naming the difference, for a Dockerfile that differs
// from Build in each way it may.
func TestTheDockerfileCheckSeesEachDifference(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(raw)
	for _, tt := range []struct{ name, old, new, want string }{
		{"another user", "USER 65532:65532", "USER 65534", "USER"},
		{"another entrypoint", `ENTRYPOINT ["/nats-operator"]`, `ENTRYPOINT ["/nats-operator", "backup"]`, "ENTRYPOINT"},
		{"a shell-form entrypoint", `ENTRYPOINT ["/nats-operator"]`, `ENTRYPOINT /nats-operator`, "ENTRYPOINT"},
		{"the binary elsewhere", "/out/nats-operator /nats-operator", "/out/nats-operator /usr/bin/nats-operator", "copies"},
		{"a file left out", "internal/image/rootfs/etc/group internal/image/rootfs/etc/passwd /etc/", "internal/image/rootfs/etc/passwd /etc/", "copies"},
		{"a file from elsewhere", "internal/image/rootfs/etc/group internal/image/rootfs/etc/passwd /etc/", "internal/image/rootfs/etc/group hack/passwd /etc/", "copies"},
		{"a base image", "FROM scratch", "FROM gcr.io/distroless/static:nonroot", "scratch"},
		{"an instruction Build does not do", "USER 65532:65532", "ENV HOME=/tmp\nUSER 65532:65532", "ENV"},
		{"a binary that may be dynamic", "RUN CGO_ENABLED=0 go build", "RUN go build", "CGO_ENABLED=0"},
		{"a label left out", "      org.opencontainers.image.revision=${REVISION}\n", "\n", "LABEL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(good, tt.old) {
				t.Fatalf("the Dockerfile no longer holds %q: update this case", tt.old)
			}
			err := checkDockerfile(t, strings.Replace(good, tt.old, tt.new, 1))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("check = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

func checkDockerfile(t *testing.T, text string) error {
	stages := parseDockerfile(t, text)
	last := stages[len(stages)-1]
	if f := strings.Fields(last[0].args); len(f) == 0 || f[0] != "scratch" {
		return fmt.Errorf("the last stage is FROM %s: Build starts from nothing, FROM scratch", last[0].args)
	}
	byName := map[string][]instruction{}
	for _, s := range stages[:len(stages)-1] {
		if n := stageName(s); n != "" {
			byName[n] = s
		}
	}

	copied := map[string]string{} // path in the image -> source
	var user, entrypoint string
	var labels []string
	for _, in := range last[1:] {
		switch in.cmd {
		case "ARG":
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "LABEL":
			for _, kv := range strings.Fields(in.args) {
				k, _, _ := strings.Cut(kv, "=")
				labels = append(labels, k)
			}
		case "COPY":
			f := strings.Fields(in.args)
			from := ""
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					from = v
				} else {
					return fmt.Errorf("Dockerfile:%d: COPY %s: Build sets no owner nor mode but its own", in.line, f[0])
				}
				f = f[1:]
			}
			if len(f) < 2 {
				return fmt.Errorf("Dockerfile:%d: COPY %s", in.line, in.args)
			}
			srcs, dst := f[:len(f)-1], f[len(f)-1]
			if len(srcs) > 1 && !strings.HasSuffix(dst, "/") {
				return fmt.Errorf("Dockerfile:%d: COPY of several files to %s, not a directory", in.line, dst)
			}
			for _, src := range srcs {
				p := dst
				if strings.HasSuffix(dst, "/") {
					p = path.Join(dst, path.Base(src))
				}
				if from != "" {
					s, ok := byName[from]
					if !ok {
						return fmt.Errorf("Dockerfile:%d: COPY --from=%s: no such stage", in.line, from)
					}
					if err := buildsStatic(s, src); err != nil {
						return err
					}
					src = "binary built by stage " + from
				}
				copied[p] = src
			}
		default:
			return fmt.Errorf("Dockerfile:%d: the last stage has %s, which Build does not do", in.line, in.cmd)
		}
	}

	want := map[string]string{}
	var dirs []string
	for _, e := range Entries() {
		switch {
		case e.Mode.IsDir():
			dirs = append(dirs, e.Path)
		case e.IsBinary():
			want[e.Path] = copied[e.Path] // any stage that builds it static
			if !strings.HasPrefix(want[e.Path], "binary built by stage ") {
				want[e.Path] = "binary built by a stage"
			}
		default:
			want[e.Path] = e.Source
			if b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(e.Source))); err != nil || !bytes.Equal(b, e.Data) {
				return fmt.Errorf("%s is not the file Build puts at %s: %v", e.Source, e.Path, err)
			}
		}
	}
	if !maps.Equal(copied, want) {
		return fmt.Errorf("the last stage copies %v; Build makes %v", copied, want)
	}
	for _, d := range dirs {
		parent := false
		for p := range copied {
			parent = parent || strings.HasPrefix(p, d+"/")
		}
		if !parent {
			return fmt.Errorf("Build makes the directory %s, which no COPY of the last stage creates", d)
		}
	}
	if user != User {
		return fmt.Errorf("the last stage's USER is %q, Build's %q", user, User)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || !slices.Equal(ep, Entrypoint()) {
		return fmt.Errorf("the last stage's ENTRYPOINT is %s, Build's %q (in JSON form)", entrypoint, Entrypoint())
	}
	wantLabels := []string{LabelRevision, LabelTitle, LabelVersion}
	sort.Strings(labels)
	if !slices.Equal(labels, wantLabels) {
		return fmt.Errorf("the last stage's LABELs are %v, Build's %v", labels, wantLabels)
	}
	return nil
}

// buildsStatic checks that stage s writes the binary src with
// CGO_ENABLED=0 (the image has no C library).
func buildsStatic(s []instruction, src string) error {
	for _, in := range s {
		if in.cmd == "RUN" && strings.Contains(in.args, "-o "+src+" ") {
			if !strings.Contains(in.args, "CGO_ENABLED=0") {
				return fmt.Errorf("Dockerfile:%d: %s is built without CGO_ENABLED=0", in.line, src)
			}
			return nil
		}
	}
	return fmt.Errorf("stage %s has no RUN building %s", stageName(s), src)
}
