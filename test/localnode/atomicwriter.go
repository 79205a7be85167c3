package localnode

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// file is one file of a projected volume.
type file struct {
	data []byte
	mode os.FileMode
}

// writeAtomic makes dir hold exactly files (relative paths), the way the
// kubelet's atomic writer does: the files live in a timestamped directory
// that the symlink ..data points at, and each top-level name is a symlink
// through ..data, so a reader sees either the old or the new set, never a
// mix. It returns whether anything changed.
func writeAtomic(dir string, files map[string]file) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	dataLink := filepath.Join(dir, "..data")
	if old, err := os.Readlink(dataLink); err == nil && sameFiles(filepath.Join(dir, old), files) {
		return false, nil
	}
	ts := filepath.Join(dir, fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), time.Now().UnixNano()))
	if err := os.Mkdir(ts, 0o755); err != nil {
		return false, err
	}
	for p, f := range files {
		full := filepath.Join(ts, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(full, f.data, f.mode.Perm()); err != nil {
			return false, err
		}
		if err := os.Chmod(full, f.mode.Perm()); err != nil {
			return false, err
		}
	}
	old, _ := os.Readlink(dataLink)
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dataLink); err != nil {
		return false, err
	}
	top := map[string]bool{}
	for p := range files {
		top[strings.SplitN(filepath.ToSlash(p), "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join("..data", name) {
			continue
		}
		_ = os.RemoveAll(link)
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return false, err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return true, nil
}

// sameFiles reports whether dir holds exactly files.
func sameFiles(dir string, files map[string]file) bool {
	var have []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			have = append(have, rel)
		}
		return nil
	})
	if err != nil || len(have) != len(files) {
		return false
	}
	sort.Strings(have)
	for _, rel := range have {
		f, ok := files[rel]
		if !ok {
			return false
		}
		info, err := os.Stat(filepath.Join(dir, rel))
		if err != nil || info.Mode().Perm() != f.mode.Perm() {
			return false
		}
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || !bytes.Equal(b, f.data) {
			return false
		}
	}
	return true
}
