package artifacts

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDeclare100MB: declare_artifact of a 100 MB file that changed
// since its last version: one streaming read that hashes and stores it (with
// fsync), the preview sniff, and the records.
func BenchmarkDeclare100MB(b *testing.B) {
	e := newEnv(b, nil)
	data := make([]byte, 100<<20)
	for i := range data {
		data[i] = byte('a' + i%26)
		if i%80 == 79 {
			data[i] = '\n'
		}
	}
	p := filepath.Join(e.dir, "big.txt")
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		data[0] = byte('A' + i%26) // a new version each time
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := e.s.Declare(context.Background(), DeclareRequest{Paths: []string{"big.txt"}})
		if err != nil || res.Declared != 1 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
