package workspace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.WriteFile(filepath.Join(dir, "taken.pdf"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dir, "afile"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out"))

	body := bytes.Repeat([]byte("0123456789"), 100_000)
	rel, n, err := w.Create("/workspace/downloads/deep/paper.pdf", func(wr io.Writer) error { _, err := wr.Write(body); return err })
	if err != nil || rel != "downloads/deep/paper.pdf" || n != int64(len(body)) {
		t.Fatalf("Create = %q, %d, %v", rel, n, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, rel)); !bytes.Equal(got, body) {
		t.Fatal("content differs")
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "downloads/deep")); len(ents) != 1 {
		t.Fatalf("temporary file left behind: %v", ents)
	}

	// Never overwrites.
	_, _, err = w.Create("taken.pdf", func(wr io.Writer) error { _, err := io.WriteString(wr, "new"); return err })
	if !IsCode(err, CodeExists) {
		t.Fatalf("existing file: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "taken.pdf")); string(got) != "old" {
		t.Fatalf("existing file changed to %q", got)
	}

	// A failing writer leaves nothing.
	boom := errors.New("boom")
	if _, _, err := w.Create("half.bin", func(wr io.Writer) error { io.WriteString(wr, "part"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing fill: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 { // taken.pdf afile out downloads
		names := []string{}
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("after a failed write the workspace holds %v", names)
	}

	// Escapes are refused by os.Root, and nothing appears outside.
	for _, p := range []string{"out/x.pdf", "../x.pdf", "/etc/x.pdf", "afile/x.pdf", "."} {
		if _, _, err := w.Create(p, func(wr io.Writer) error { return nil }); err == nil {
			t.Errorf("Create(%q) succeeded", p)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("a file was written outside the workspace: %v", ents)
	}
	if _, _, err := w.Create("out/x.pdf", func(wr io.Writer) error { return nil }); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("escape through a link: %v", err)
	}

	if ok, err := w.Exists("downloads/deep/paper.pdf"); !ok || err != nil {
		t.Errorf("Exists = %v, %v", ok, err)
	}
	if ok, err := w.Exists("afile/below"); ok || err != nil {
		t.Errorf("Exists under a file = %v, %v", ok, err)
	}
}
