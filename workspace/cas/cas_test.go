package cas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func newStore(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hashOf(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

func TestPutOpenDedup(t *testing.T) {
	s := newStore(t, Options{})
	data := []byte("hello, blob\n")
	b, err := s.Put(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b.Hash != hashOf(data) || b.Size != int64(len(data)) || !b.Stored || b.Existed {
		t.Fatalf("first put: %+v", b)
	}
	if want := filepath.Join(s.Dir(), b.Hash[:2], b.Hash); s.Path(b.Hash) != want {
		t.Fatalf("path %s, want %s", s.Path(b.Hash), want)
	}
	if !strings.HasSuffix(s.Dir(), filepath.Join("cas", "sha256")) {
		t.Fatalf("dir %s", s.Dir())
	}
	b2, err := s.Put(bytes.NewReader(data))
	if err != nil || !b2.Existed || !b2.Stored || b2.Hash != b.Hash {
		t.Fatalf("second put: %+v %v", b2, err)
	}
	f, err := s.Open(b.Hash, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("read %q", got)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
	info, err := s.Stat(b.Hash)
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("stat: %+v %v", info, err)
	}
}

func TestEmptyBlob(t *testing.T) {
	s := newStore(t, Options{})
	b, err := s.Put(strings.NewReader(""))
	if err != nil || !b.Stored || b.Size != 0 || b.Hash != hashOf(nil) {
		t.Fatalf("%+v %v", b, err)
	}
	got, err := s.ReadAll(b.Hash, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("%q %v", got, err)
	}
}

// TestCap: a stream of exactly the cap is stored; one byte more is hashed
// and measured but not stored, and says so.
func TestCap(t *testing.T) {
	const max = 1000
	s := newStore(t, Options{MaxBlobBytes: max})
	at := bytes.Repeat([]byte("a"), max)
	b, err := s.Put(bytes.NewReader(at))
	if err != nil || !b.Stored || b.Size != max {
		t.Fatalf("at cap: %+v %v", b, err)
	}
	over := bytes.Repeat([]byte("b"), max+1)
	b, err = s.Put(bytes.NewReader(over))
	if err != nil || b.Stored || b.Size != max+1 || b.Hash != hashOf(over) {
		t.Fatalf("over cap: %+v %v", b, err)
	}
	if _, err := s.Stat(b.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("blob over the cap was stored: %v", err)
	}
	// A per-call cap overrides the store's.
	b, err = s.PutMax(bytes.NewReader(over), 0)
	if err != nil || !b.Stored {
		t.Fatalf("no cap: %+v %v", b, err)
	}
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		r.n--
		for i := range p {
			p[i] = 'x'
		}
		return len(p), nil
	}
	return 0, errors.New("disk on fire")
}

func TestPutReadErrorLeavesNothing(t *testing.T) {
	s := newStore(t, Options{})
	if _, err := s.Put(&failingReader{n: 3}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("err = %v", err)
	}
	entries, _ := os.ReadDir(s.Dir())
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestCorruptBlobIsNeverServed(t *testing.T) {
	s := newStore(t, Options{})
	data := []byte("precious result\n")
	b, _ := s.Put(bytes.NewReader(data))
	if f, err := s.Open(b.Hash, -1); err != nil {
		t.Fatal(err)
	} else {
		f.Close() // verified and cached
	}
	// Same size, different bytes: only a content check can tell.
	p := s.Path(b.Hash)
	os.Chmod(p, 0o600)
	if err := os.WriteFile(p, []byte("PRECIOUS RESULT\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.Open(b.Hash, int64(len(data)))
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Got == "" {
		t.Fatalf("open of a rewritten blob: %v", err)
	}
	if err := s.Verify(b.Hash); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("verify: %v", err)
	}
	if _, err := s.ReadAll(b.Hash, 100); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read all: %v", err)
	}
	// A size mismatch is caught without reading.
	os.WriteFile(p, []byte("short"), 0o600)
	if _, err := s.Open(b.Hash, int64(len(data))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes on disk") {
		t.Fatalf("size mismatch: %v", err)
	}
	// Putting the right content again heals the blob.
	if _, err := s.Put(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(b.Hash); err != nil {
		t.Fatalf("after repair: %v", err)
	}
}

func TestBadHashes(t *testing.T) {
	s := newStore(t, Options{})
	for _, h := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("0", 63) + "g", "../../etc/passwd"} {
		if _, err := s.Open(h, -1); !errors.Is(err, ErrInvalidHash) {
			t.Errorf("Open(%q): %v", h, err)
		}
		if _, err := s.Stat(h); !errors.Is(err, ErrInvalidHash) {
			t.Errorf("Stat(%q): %v", h, err)
		}
	}
	if _, err := s.Open(strings.Repeat("0", 64), -1); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
}

func TestRecoverRemovesTemporaryFiles(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.Dir(), tmpPrefix+"123"), []byte("half"), 0o600)
	s2, err := Open(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s2.Dir(), tmpPrefix+"123")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file survived: %v", err)
	}
}

func TestConcurrentPutsOfTheSameContent(t *testing.T) {
	s := newStore(t, Options{})
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Put(bytes.NewReader(data))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Verify(hashOf(data)); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkPut100MB(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 100<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data[0] = byte(i) // a new blob each time
		if _, err := s.Put(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSweep(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(content string) Blob {
		b, err := s.Put(strings.NewReader(content))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	age := func(b Blob, d time.Duration) {
		old := time.Now().Add(-d)
		if err := os.Chtimes(s.Path(b.Hash), old, old); err != nil {
			t.Fatal(err)
		}
	}
	kept, orphan, recent, again := put("kept"), put("orphan blob"), put("recent"), put("put again")
	for _, b := range []Blob{kept, orphan, again} {
		age(b, 2*time.Hour)
	}
	put("put again") // deduplicated: its time is now, so the sweep leaves it
	mark := time.Now().Add(-time.Hour)
	n, freed, err := s.Sweep(func(h string) bool { return h == kept.Hash }, mark)
	if err != nil || n != 1 || freed != int64(len("orphan blob")) {
		t.Fatalf("Sweep = %d, %d, %v", n, freed, err)
	}
	if _, err := s.Open(orphan.Hash, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the orphan survived: %v", err)
	}
	for _, b := range []Blob{kept, recent, again} {
		f, err := s.Open(b.Hash, b.Size)
		if err != nil {
			t.Fatalf("%s: %v", b.Hash, err)
		}
		f.Close()
	}
}
