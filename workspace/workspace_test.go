package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture makes a workspace folder beside a folder outside it that holds a
// secret, and returns the opened workspace and the outside folder.
func fixture(t *testing.T) (*Workspace, string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	out := filepath.Join(base, "outside")
	for _, d := range []string{ws, out, filepath.Join(ws, "sub", "deeper")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(out, "secret.txt"), "TOP SECRET\n")
	write(t, filepath.Join(ws, "a.txt"), "alpha\n")
	write(t, filepath.Join(ws, "sub", "b.txt"), "beta\n")
	write(t, filepath.Join(ws, "sub", "deeper", "c.txt"), "gamma\n")
	w, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadFileInside(t *testing.T) {
	w, _ := fixture(t)
	for _, p := range []string{"a.txt", "./a.txt", "sub/../a.txt", w.Dir() + "/a.txt", "/workspace/a.txt", "sub//b.txt"} {
		r, err := w.ReadFile(p, 0, 0)
		if err != nil {
			t.Errorf("%q: %v", p, err)
			continue
		}
		if r.Page.Text == "" || r.Binary {
			t.Errorf("%q: empty or binary: %+v", p, r)
		}
	}
}

// TestPathEscapes is the escape corpus: none of these may return the
// secret, and each must be a refusal the caller can read.
func TestPathEscapes(t *testing.T) {
	w, out := fixture(t)
	ws := w.Dir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Symlinks pointing out: file, directory, relative, absolute, a symlinked
	// parent, a chain, and /proc tricks.
	must(os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(ws, "abs-link.txt")))
	must(os.Symlink("../outside/secret.txt", filepath.Join(ws, "rel-link.txt")))
	must(os.Symlink(out, filepath.Join(ws, "dir-link")))
	must(os.Symlink("../../outside", filepath.Join(ws, "sub", "up-link")))
	must(os.Symlink("rel-link.txt", filepath.Join(ws, "chain.txt")))
	must(os.Symlink("/proc/self/root", filepath.Join(ws, "proc-root")))
	must(os.Symlink("/proc/self/cwd", filepath.Join(ws, "proc-cwd")))
	must(os.Symlink("loop", filepath.Join(ws, "loop")))

	cases := []string{
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		"sub/deeper/../../../outside/secret.txt",
		"..",
		"../",
		"/etc/passwd",
		out + "/secret.txt",
		ws + "/../outside/secret.txt",
		"/workspace/../outside/secret.txt",
		"abs-link.txt",
		"rel-link.txt",
		"chain.txt",
		"dir-link/secret.txt",
		"sub/up-link/secret.txt",
		"proc-root/etc/passwd",
		"proc-root" + out + "/secret.txt",
		"proc-cwd/secret.txt",
		"loop",
		"a.txt\x00../../outside/secret.txt",
		strings.Repeat("a/", 3000) + "x",
		"",
		"\xff\xfe",
	}
	for _, p := range cases {
		r, err := w.ReadFile(p, 0, 0)
		if err == nil {
			t.Errorf("%q: no error; read %q", p, r.Page.Text)
			continue
		}
		if strings.Contains(r.Page.Text, "SECRET") {
			t.Errorf("%q: leaked the secret", p)
		}
		var we *Error
		if !asError(err, &we) {
			t.Errorf("%q: error is not a workspace refusal: %v", p, err)
		}
	}
}

func asError(err error, target **Error) bool {
	e, ok := err.(*Error)
	if ok {
		*target = e
	}
	return ok
}

// TestSymlinkSwap swaps a directory for a symlink to the outside between
// reads: the second read must not follow it.
func TestSymlinkSwap(t *testing.T) {
	w, out := fixture(t)
	if _, err := w.ReadFile("sub/b.txt", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(w.Dir(), "sub")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(out, "b.txt"), "SECRET B\n")
	if err := os.Symlink(out, filepath.Join(w.Dir(), "sub")); err != nil {
		t.Fatal(err)
	}
	r, err := w.ReadFile("sub/b.txt", 0, 0)
	if err == nil || strings.Contains(r.Page.Text, "SECRET") {
		t.Fatalf("read through swapped symlink: %v %q", err, r.Page.Text)
	}
}

func TestReadFileRefusals(t *testing.T) {
	w, _ := fixture(t)
	ws := w.Dir()
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, code string }{
		{"missing.txt", CodeNotFound},
		{"sub", CodeIsDirectory},
		{".", CodeIsDirectory},
		{"fifo", CodeNotRegular},
		{"a.txt/x", CodeNotFound},
	} {
		_, err := w.ReadFile(tc.path, 0, 0)
		if !IsCode(err, tc.code) {
			t.Errorf("%q: got %v, want code %s", tc.path, err, tc.code)
		}
	}
}

func TestReadFileBinary(t *testing.T) {
	w, _ := fixture(t)
	write(t, filepath.Join(w.Dir(), "data.txt"), "header\x00\x01\x02binary tail")
	write(t, filepath.Join(w.Dir(), "pic.png"), "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	write(t, filepath.Join(w.Dir(), "doc.pdf"), "%PDF-1.4\n1 0 obj\n")
	for name, mt := range map[string]string{"data.txt": "application/octet-stream", "pic.png": "image/png", "doc.pdf": "application/pdf"} {
		r, err := w.ReadFile(name, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Binary || r.MediaType != mt || r.Page.Text != "" || r.Size == 0 {
			t.Errorf("%s: binary=%v media=%s text=%q size=%d", name, r.Binary, r.MediaType, r.Page.Text, r.Size)
		}
	}
	// Latin-1 text with a few high bytes is still text.
	write(t, filepath.Join(w.Dir(), "latin.txt"), "caf\xe9 au lait, na\xefve r\xe9sum\xe9 of a long enough line of text\n")
	r, err := w.ReadFile("latin.txt", 0, 0)
	if err != nil || r.Binary || !r.Page.InvalidUTF8 {
		t.Fatalf("latin-1: %v %+v", err, r)
	}
}

// TestReadFileChanges: a file that changes between reads is re-indexed,
// and one that vanishes is reported as missing.
func TestReadFileChanges(t *testing.T) {
	w, _ := fixture(t)
	p := filepath.Join(w.Dir(), "grow.txt")
	write(t, p, string(numbered(600)))
	r, err := w.ReadFile("grow.txt", 599, 0)
	if err != nil || r.Page.Text != "line 600\n" {
		t.Fatalf("%v %q", err, r.Page.Text)
	}
	write(t, p, string(numbered(900)))
	r, err = w.ReadFile("grow.txt", 899, 0)
	if err != nil || r.Page.Text != "line 900\n" || r.Page.TotalLines != 900 {
		t.Fatalf("after growth: %v %+v", err, r.Page)
	}
	os.Remove(p)
	if _, err := w.ReadFile("grow.txt", 0, 0); !IsCode(err, CodeNotFound) {
		t.Fatalf("vanished: %v", err)
	}
}

func TestList(t *testing.T) {
	w, out := fixture(t)
	if err := os.Symlink(out, filepath.Join(w.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	l, err := w.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range l.Entries {
		paths = append(paths, e.Path)
	}
	want := "a.txt sub sub/b.txt sub/deeper sub/deeper/c.txt"
	if got := strings.Join(paths, " "); got != want {
		t.Fatalf("breadth-first listing:\n got %s\nwant %s", got, want)
	}
	if l.Symlinks != 1 || l.Omitted != 0 || !l.OmittedExact {
		t.Fatalf("symlinks=%d omitted=%d exact=%v", l.Symlinks, l.Omitted, l.OmittedExact)
	}
	if l.Entries[0].Size != int64(len("alpha\n")) || l.Entries[0].ModTime.IsZero() || !l.Entries[1].Dir {
		t.Fatalf("entry details: %+v", l.Entries[:2])
	}
}

func TestListCap(t *testing.T) {
	for _, n := range []int{MaxListEntries - 1, MaxListEntries, MaxListEntries + 1, 1234} {
		dir := t.TempDir()
		for i := 0; i < n; i++ {
			write(t, filepath.Join(dir, fmt.Sprintf("f%05d", i)), "x")
		}
		w, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		l, err := w.List(context.Background())
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantShown := min(n, MaxListEntries)
		if len(l.Entries) != wantShown || l.Omitted != n-wantShown || !l.OmittedExact {
			t.Errorf("%d files: shown=%d omitted=%d exact=%v", n, len(l.Entries), l.Omitted, l.OmittedExact)
		}
	}
}

// TestListDeadline: an expired context returns what was found with an
// inexact count instead of hanging.
func TestListDeadline(t *testing.T) {
	w, _ := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, err := w.List(ctx)
	if err != nil || l.OmittedExact {
		t.Fatalf("cancelled walk: err=%v exact=%v", err, l.OmittedExact)
	}
}
