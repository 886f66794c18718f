package provenance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace/store"
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

// BenchmarkRetain100k: one retention pass over 100,000 revisions that keep
// content (each a distinct 1 KiB content), under the cap: the pass reads
// every revision record and sweeps the CAS. Scans wait while it runs.
func BenchmarkRetain100k(b *testing.B) {
	e := newEnv(b, nil)
	err := e.db.Update(func(tx *bolt.Tx) error {
		revs := tx.Bucket(bucketRevisions)
		for i := range 100_000 {
			seq, _ := revs.NextSequence()
			r := Revision{ID: revID(seq), Path: fmt.Sprintf("d%02d/f%05d.txt", i%100, i/10), Change: Modified,
				Hash: fmt.Sprintf("%064x", i), Size: 1024, ContentKept: true, Writer: Writer{Kind: KindExecution, ExecutionID: fmt.Sprintf("exec_%016x", i/10)}}
			if err := store.PutJSON(revs, be64(seq), r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rep, err := e.x.Retain(context.Background(), RetainOptions{MaxBytes: 1 << 40})
		if err != nil || rep.KeptBytes != 100_000*1024 {
			b.Fatalf("%+v %v", rep, err)
		}
	}
}
