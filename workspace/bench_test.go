package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// bigFile writes n numbered lines of fixed width and returns the workspace.
func bigFile(b *testing.B, n int) *Workspace {
	b.Helper()
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.txt"))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&buf, "line %07d %s\n", i, "lorem ipsum dolor sit amet, consectetur adipiscing elit")
		if buf.Len() > 1<<20 {
			f.Write(buf.Bytes())
			buf.Reset()
		}
	}
	f.Write(buf.Bytes())
	f.Close()
	w, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w
}

// BenchmarkReadFileFarOffset: a ~40 KiB page at line 600,000 of a ~50 MB
// file, with the line index warm (the first read builds it).
func BenchmarkReadFileFarOffset(b *testing.B) {
	w := bigFile(b, 710_000)
	if _, err := w.ReadFile("big.txt", 600_000, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := w.ReadFile("big.txt", 600_000, 0)
		if err != nil || r.Page.Offset != 600_000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFileColdIndex: the first far read of a file, which scans it.
func BenchmarkReadFileColdIndex(b *testing.B) {
	w := bigFile(b, 710_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.index = newIndexCache(defaultIndexCacheEntries)
		if _, err := w.ReadFile("big.txt", 600_000, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkList5000(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < 5000; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("e%d", i%7))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.dat", i)), []byte("x"), 0o644)
	}
	w, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := w.List(context.Background())
		if err != nil || len(l.Entries) != MaxListEntries {
			b.Fatal(err, len(l.Entries))
		}
	}
}

func BenchmarkClean(b *testing.B) {
	w := &Workspace{dir: "/work/project"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := w.Clean("data/run-42/../results/table.csv"); err != nil {
			b.Fatal(err)
		}
	}
}
