package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzClean: whatever the path, Clean either refuses it or returns a
// relative, clean path that does not climb out of the workspace.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/etc/passwd", "/workspace/a/../b", "a/./b//c", "\x00", "..", "a/..", strings.Repeat("../", 50), "/work/project/../project2/x", "é/ü.txt", "\xff"} {
		f.Add(s)
	}
	w := &Workspace{dir: "/work/project"}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := w.Clean(p)
		if err != nil {
			return
		}
		if strings.HasPrefix(rel, "/") || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || strings.Contains(rel, "\x00") {
			t.Fatalf("Clean(%q) = %q escapes", p, rel)
		}
		if !utf8.ValidString(rel) {
			t.Fatalf("Clean(%q) = %q is not UTF-8", p, rel)
		}
	})
}

// FuzzReadPage: pages are bounded, valid UTF-8, and following next_offset
// from the start covers the content exactly (when no line is cut).
func FuzzReadPage(f *testing.F) {
	f.Add([]byte("a\nb\nc"), 0, 0)
	f.Add([]byte("\r\n\r\n"), 1, 1)
	f.Add([]byte("x\xff\xfey\n"), 0, 2)
	f.Add(bytes.Repeat([]byte("long line\n"), 5000), 1234, 7)
	f.Fuzz(func(t *testing.T, content []byte, offset, limit int) {
		if len(content) > 256<<10 {
			return // keep each execution short: the engine gives up on slow ones
		}
		p, err := ReadPage(bytes.NewReader(content), int64(len(content)), nil, offset, limit)
		if err != nil {
			return
		}
		if p.Bytes > MaxPageBytes || p.Lines > MaxPageLines || !utf8.ValidString(p.Text) {
			t.Fatalf("unbounded or invalid page: %d bytes, %d lines", p.Bytes, p.Lines)
		}
		if p.EOF != (p.NextOffset == -1) {
			t.Fatalf("eof %v but next %d", p.EOF, p.NextOffset)
		}
		if !utf8.Valid(content) {
			return
		}
		var got bytes.Buffer
		idx := NewLineIndex(int64(len(content))) // shared, as read_file's cache does: the walk stays linear
		for off, i := 0, 0; i < 10000; i++ {
			q, err := ReadPage(bytes.NewReader(content), int64(len(content)), idx, off, 0)
			if err != nil {
				if len(content) == 0 {
					return
				}
				t.Fatalf("offset %d: %v", off, err)
			}
			if q.CutLine {
				return
			}
			got.WriteString(q.Text)
			if q.EOF {
				break
			}
			off = q.NextOffset
		}
		if !bytes.Equal(got.Bytes(), content) {
			t.Fatalf("pages put together differ from the content")
		}
	})
}

// FuzzReadFileOutside: no path reads a file outside the workspace.
func FuzzReadFileOutside(f *testing.F) {
	base := f.TempDir()
	ws := filepath.Join(base, "ws")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(base, "secret"), []byte("TOPSECRET"), 0o644)
	os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("fine"), 0o644)
	os.Symlink("../secret", filepath.Join(ws, "link"))
	os.Symlink(base, filepath.Join(ws, "sub", "up"))
	w, err := Open(ws)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"ok.txt", "link", "sub/up/secret", "../secret", base + "/secret", "/proc/self/root" + base + "/secret"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := w.ReadFile(p, 0, 0)
		if err == nil && strings.Contains(r.Page.Text, "TOPSECRET") {
			t.Fatalf("%q read the secret outside the workspace", p)
		}
	})
}
