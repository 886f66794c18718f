package provenance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// populate writes n files of about 1 KiB in 100 folders.
func populate(b *testing.B, e *env, n int) []string {
	b.Helper()
	body := strings.Repeat("0123456789abcdef", 64)
	paths := make([]string, n)
	for i := 0; i < n; i++ {
		rel := fmt.Sprintf("d%02d/f%05d.txt", i%100, i)
		p := filepath.Join(e.dir, rel)
		if i < 100 {
			os.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		paths[i] = rel
	}
	return paths
}

// BenchmarkScanUnchanged10k: the post-execution scan of a workspace of
// 10,000 files where nothing changed: a walk, one stat per file, no reads.
func BenchmarkScanUnchanged10k(b *testing.B) {
	e := newEnv(b, nil)
	populate(b, e, 10_000)
	if rep, err := e.x.Scan(context.Background(), unknown("start")); err != nil || rep.Created != 10_000 {
		b.Fatalf("%+v %v", rep, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := e.x.Scan(context.Background(), unknown("bench"))
		if err != nil || rep.Hashed != 0 || rep.Files != 10_000 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}

// BenchmarkScan100Changed: 100 of 10,000 files rewritten between scans; the
// scan reads the 100, stores their content and records 100 revisions.
func BenchmarkScan100Changed(b *testing.B) {
	e := newEnv(b, nil)
	paths := populate(b, e, 10_000)
	if _, err := e.x.Scan(context.Background(), unknown("start")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := 0; j < 100; j++ {
			os.WriteFile(filepath.Join(e.dir, paths[j*97]), []byte(fmt.Sprintf("round %d file %d\n", i, j)), 0o644)
		}
		b.StartTimer()
		rep, err := e.x.Scan(context.Background(), unknown("bench"))
		if err != nil || rep.Modified != 100 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}
