package outputs

import (
	"fmt"
	"strings"
	"testing"
)

func benchText(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "%08d some log line with a value=%d and status ok\n", i, i*7)
	}
	return b.String()
}

// BenchmarkBoundSmall: a result below 8 KiB passes the bound untouched; it
// must cost next to nothing.
func BenchmarkBoundSmall(b *testing.B) {
	s, _ := newStoreB(b)
	text := benchText(4 * 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r, _ := s.Bound("o", "s", "t", text); r.Stored {
			b.Fatal("stored")
		}
	}
}

func benchBound(b *testing.B, size int) {
	s, _ := newStoreB(b)
	text := benchText(size)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A new owner each time: an identical result of the same owner would
		// reuse its ref and not be stored again.
		if r, err := s.Bound(fmt.Sprint("o", i), "s", "t", text); err != nil || !r.Preview {
			b.Fatal(err)
		}
	}
}

func BenchmarkBound1MB(b *testing.B)  { benchBound(b, 1<<20) }
func BenchmarkBound50MB(b *testing.B) { benchBound(b, 50<<20) }

func BenchmarkSearch50MB(b *testing.B) {
	s, _ := newStoreB(b)
	text := benchText(50 << 20)
	rec, err := s.Put("o", "s", "t", text)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a, err := s.Search("o", rec.Ref, Query{Text: "value=3500007 "})
		if err != nil || a.TotalMatches != 1 {
			b.Fatal(err, a.TotalMatches)
		}
	}
}

func newStoreB(b *testing.B) (*Store, error) {
	b.Helper()
	s, err := newStoreTB(b)
	if err != nil {
		b.Fatal(err)
	}
	return s, nil
}
