// Package cas is the content-addressed blob store of a data folder: every
// blob the server keeps (artifact versions, file revisions, fetched pages)
// lives once, under <data>/cas/sha256/ab/<hash>, named by the SHA-256 of its
// bytes.
//
// There is one write path, Put: the bytes stream into a temporary file in the
// store's folder while they are hashed; the file is synced and renamed to its
// hash, and the folder is synced so the rename survives a crash. A blob that
// already exists is not written twice. A crash leaves at worst a temporary
// file, which Open removes; a reader never sees a partial blob under a hash.
//
// Reads are verified: Open re-hashes a blob before serving it (once per
// process for an unchanged blob file) and reports a blob whose bytes no
// longer match its name as *CorruptError, never as valid content.
//
// The package knows nothing about MCP, revisions or artifacts; records that
// point into it live in bbolt, owned by the packages that write them.
package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// Dir is the store's folder under the data folder.
	Dir = "cas"
	// Algorithm names the hash; blobs live under <data>/cas/<Algorithm>/.
	Algorithm = "sha256"
	// tmpPrefix marks files being written; Open removes leftovers.
	tmpPrefix = ".tmp-"
	// copyBufferBytes is the streaming buffer of Put and of verification:
	// large enough for throughput, small enough that 50 concurrent puts stay
	// within a few MiB.
	copyBufferBytes = 256 << 10
)

var (
	// ErrNotFound: no blob has this hash.
	ErrNotFound = errors.New("blob not found")
	// ErrCorrupt: the blob's bytes no longer match its hash.
	ErrCorrupt = errors.New("blob is corrupt")
	// ErrInvalidHash: the string is not a lowercase hex SHA-256.
	ErrInvalidHash = errors.New("not a sha256 hash")
)

// CorruptError reports a blob whose content no longer hashes to its name. The
// blob is left in place for inspection; Put of the right content replaces it.
type CorruptError struct {
	Hash string // the name
	Got  string // the hash of the bytes found ("" when the size was already wrong)
	Size int64  // bytes found
	Want int64  // bytes expected, when known (-1 otherwise)
}

func (e *CorruptError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("blob %s is corrupt: %d bytes on disk, %d expected", e.Hash, e.Size, e.Want)
	}
	return fmt.Sprintf("blob %s is corrupt: its %d bytes hash to %s", e.Hash, e.Size, e.Got)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Options tune a Store.
type Options struct {
	// MaxBlobBytes caps what Put keeps: a larger stream is hashed and
	// measured but not stored (Blob.Stored false). 0 means no cap. PutMax
	// sets a cap per call.
	MaxBlobBytes int64
}

// Store is the blob store of one data folder. It is safe for use by many
// goroutines.
type Store struct {
	dir string // <data>/cas/sha256
	max int64

	mu       sync.Mutex
	verified map[string]fileID // hash → identity of the blob file when it last verified
}

// fileID identifies one state of a blob file: a rewrite in place changes
// ctime (which no user-space call can set back), a replacement changes the
// inode.
type fileID struct {
	ino, dev     uint64
	size         int64
	mtime, ctime int64
}

// Blob describes the outcome of a Put.
type Blob struct {
	Hash string // lowercase hex SHA-256 of the whole stream
	Size int64  // bytes in the stream
	// Stored reports that the blob is in the store. It is false only when
	// the stream was larger than the cap: then Hash and Size describe it,
	// but its bytes were not kept.
	Stored bool
	// Existed reports that an identical blob was already stored; nothing
	// was written.
	Existed bool
}

// Open opens (creating if needed) the store under dataDir and removes the
// temporary files a crash may have left.
func Open(dataDir string, opts Options) (*Store, error) {
	if opts.MaxBlobBytes < 0 {
		return nil, errors.New("cas: MaxBlobBytes must be ≥ 0")
	}
	dir := filepath.Join(dataDir, Dir, Algorithm)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cas: %w", err)
	}
	s := &Store{dir: dir, max: opts.MaxBlobBytes, verified: map[string]fileID{}}
	if _, err := s.Recover(); err != nil {
		return nil, fmt.Errorf("cas: recover: %w", err)
	}
	return s, nil
}

// Dir returns the folder that holds the blobs (<data>/cas/sha256).
func (s *Store) Dir() string { return s.dir }

// MaxBlobBytes returns the configured cap (0: none).
func (s *Store) MaxBlobBytes() int64 { return s.max }

// Recover removes temporary files left by writes a crash interrupted. Open
// calls it; one server process owns a data folder, so no write is in flight.
func (s *Store) Recover() (int, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err == nil {
				n++
			}
		}
	}
	return n, nil
}

var hashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidHash reports whether h names a blob: 64 lowercase hex digits.
func ValidHash(h string) bool { return hashPattern.MatchString(h) }

// Path returns where the blob h lives (whether or not it exists). It is for
// diagnostics and tests; nothing but Put may write there.
func (s *Store) Path(h string) string {
	if len(h) < 2 {
		return filepath.Join(s.dir, "__", h)
	}
	return filepath.Join(s.dir, h[:2], h)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufferBytes); return &b }}

// Put stores the stream r under its hash, subject to the store's cap.
func (s *Store) Put(r io.Reader) (Blob, error) { return s.PutMax(r, s.max) }

// PutMax stores the stream r under its hash unless it has more than max
// bytes (max ≤ 0: no cap); a larger stream is read to its end, hashed and
// measured, and reported with Stored false. It never holds more than one
// copy buffer of the stream in memory. A read error of r fails the Put and
// leaves nothing behind.
func (s *Store) PutMax(r io.Reader, max int64) (Blob, error) {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return Blob{}, fmt.Errorf("cas: %w", err)
	}
	tmp := f.Name()
	cw := &capWriter{f: f, max: max}
	defer func() {
		if cw.f != nil {
			cw.f.Close()
		}
		if tmp != "" {
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	n, err := io.CopyBuffer(io.MultiWriter(h, cw), r, *bp)
	bufPool.Put(bp)
	if err != nil {
		return Blob{}, fmt.Errorf("cas: %w", err)
	}
	b := Blob{Hash: hex.EncodeToString(h.Sum(nil)), Size: n}
	if cw.over {
		return b, nil // the deferred cleanup drops what was written
	}
	if err := f.Chmod(0o400); err != nil {
		return Blob{}, fmt.Errorf("cas: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Blob{}, fmt.Errorf("cas: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		cw.f = nil
		return Blob{}, fmt.Errorf("cas: %w", err)
	}
	cw.f = nil
	final := s.Path(b.Hash)
	if st, err := os.Lstat(final); err == nil && st.Mode().IsRegular() && st.Size() == n {
		// Deduplicated. (A blob of the wrong size is damaged: the rename
		// below replaces it with the right bytes.) Its modification time
		// is set to now: Sweep leaves blobs put after its mark alone, and a
		// blob put again may be about to get a new reference.
		now := time.Now()
		os.Chtimes(final, now, now)
		b.Stored, b.Existed = true, true
		return b, nil
	}
	sub := filepath.Dir(final)
	created := false
	if _, err := os.Stat(sub); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(sub, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return Blob{}, fmt.Errorf("cas: %w", err)
		}
		created = true
	}
	if err := os.Rename(tmp, final); err != nil {
		return Blob{}, fmt.Errorf("cas: %w", err)
	}
	tmp = ""
	syncDir(sub)
	if created {
		syncDir(s.dir)
	}
	s.forget(b.Hash)
	b.Stored = true
	return b, nil
}

// capWriter writes to f until more than max bytes have come, then drops
// the file and discards the rest (the hash still sees every byte).
type capWriter struct {
	f    *os.File
	max  int64
	n    int64
	over bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.over {
		return len(p), nil
	}
	w.n += int64(len(p))
	if w.max > 0 && w.n > w.max {
		w.over = true
		w.f.Truncate(0) // free the space now; the deferred cleanup removes it
		return len(p), nil
	}
	return w.f.Write(p)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Info describes a stored blob.
type Info struct {
	Hash string
	Size int64
}

// Stat reports whether the blob h is stored, and its size. It does not
// verify the content (Open and Verify do).
func (s *Store) Stat(h string) (Info, error) {
	if !ValidHash(h) {
		return Info{}, fmt.Errorf("%w: %q", ErrInvalidHash, h)
	}
	st, err := os.Stat(s.Path(h))
	if errors.Is(err, os.ErrNotExist) {
		return Info{}, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	if err != nil {
		return Info{}, fmt.Errorf("cas: %w", err)
	}
	return Info{Hash: h, Size: st.Size()}, nil
}

// File is an open, verified blob. It is read-only and safe for concurrent
// ReadAt.
type File struct {
	f    *os.File
	sr   *io.SectionReader
	hash string
	size int64
}

// Hash returns the blob's hash.
func (f *File) Hash() string { return f.hash }

// Size returns the blob's size in bytes.
func (f *File) Size() int64 { return f.size }

// ReadAt reads from the blob at off.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// Read reads the blob sequentially, from the start.
func (f *File) Read(p []byte) (int, error) { return f.sr.Read(p) }

// Close releases the blob.
func (f *File) Close() error { return f.f.Close() }

// Open opens the blob h for reading after checking that its bytes still hash
// to h. want is the size the caller recorded (-1 if unknown): a blob of
// another size is corrupt without reading it. Verification reads the whole
// blob once per process; later opens of the same unchanged blob file reuse
// the result. A damaged blob is reported as *CorruptError.
func (s *Store) Open(h string, want int64) (*File, error) {
	if !ValidHash(h) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidHash, h)
	}
	f, err := os.Open(s.Path(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("cas: %w", err)
	}
	id, err := identify(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if want >= 0 && id.size != want {
		f.Close()
		return nil, &CorruptError{Hash: h, Size: id.size, Want: want}
	}
	s.mu.Lock()
	ok := s.verified[h] == id
	s.mu.Unlock()
	if !ok {
		if err := verifyOpen(f, h, id.size); err != nil {
			f.Close()
			return nil, err
		}
		s.mu.Lock()
		s.verified[h] = id
		s.mu.Unlock()
	}
	return &File{f: f, sr: io.NewSectionReader(f, 0, id.size), hash: h, size: id.size}, nil
}

// Verify re-hashes the blob h now, whatever earlier checks found, and
// returns *CorruptError if its bytes no longer match.
func (s *Store) Verify(h string) error {
	s.forget(h)
	f, err := s.Open(h, -1)
	if err != nil {
		return err
	}
	return f.Close()
}

// ReadAll returns the whole verified blob h if it has at most max bytes.
func (s *Store) ReadAll(h string, max int64) ([]byte, error) {
	f, err := s.Open(h, -1)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.size > max {
		return nil, fmt.Errorf("cas: blob %s has %d bytes, more than %d", h, f.size, max)
	}
	buf := make([]byte, f.size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("cas: %w", err)
	}
	// The file could have been replaced between the check and this read;
	// the bytes in hand are what is served, so check them.
	if got := sum(buf); got != h {
		s.forget(h)
		return nil, &CorruptError{Hash: h, Got: got, Size: f.size, Want: -1}
	}
	return buf, nil
}

func (s *Store) forget(h string) {
	s.mu.Lock()
	delete(s.verified, h)
	s.mu.Unlock()
}

func identify(f *os.File) (fileID, error) {
	st, err := f.Stat()
	if err != nil {
		return fileID{}, fmt.Errorf("cas: %w", err)
	}
	id := fileID{size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.ino, id.dev = sys.Ino, uint64(sys.Dev)
		id.ctime = sys.Ctim.Nano()
	}
	return id, nil
}

func verifyOpen(f *os.File, h string, size int64) error {
	d := sha256.New()
	bp := bufPool.Get().(*[]byte)
	n, err := io.CopyBuffer(d, io.NewSectionReader(f, 0, size+1), *bp)
	bufPool.Put(bp)
	if err != nil {
		return fmt.Errorf("cas: verify %s: %w", h, err)
	}
	if got := hex.EncodeToString(d.Sum(nil)); got != h {
		return &CorruptError{Hash: h, Got: got, Size: n, Want: -1}
	}
	return nil
}

func sum(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// Hasher returns a new hash of the store's algorithm, for callers that hash
// content they do not store.
func Hasher() hash.Hash { return sha256.New() }

// Sweep removes the blobs that keep does not claim and that were last put
// before t, and reports how many and their bytes. Callers pass as t a time
// before they began collecting references (minus a grace for writers that
// put a blob and record its reference later): every blob put since then,
// new or deduplicated, has a later modification time and stays.
func (s *Store) Sweep(keep func(hash string) bool, t time.Time) (removed int, freed int64, err error) {
	subs, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, 0, err
	}
	for _, sub := range subs {
		if !sub.IsDir() || len(sub.Name()) != 2 {
			continue
		}
		dir := filepath.Join(s.dir, sub.Name())
		blobs, err := os.ReadDir(dir)
		if err != nil {
			return removed, freed, err
		}
		for _, b := range blobs {
			h := b.Name()
			if !ValidHash(h) || !strings.HasPrefix(h, sub.Name()) || keep(h) {
				continue
			}
			info, err := b.Info()
			if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(t) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, h)); err != nil {
				continue
			}
			s.forget(h)
			removed++
			freed += info.Size()
		}
	}
	return removed, freed, nil
}
