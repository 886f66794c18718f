// Package outputs keeps tool results that are too large to hand to a model
// whole. Every stored result is kept verbatim under
// <data>/tool-outputs/<session>/<ref>.txt and indexed in bbolt, so it can be
// re-read in bounded slices (by line range, character range or literal
// search) after the model's context has dropped it, and after a restart.
//
// Writes are all-or-nothing: the text goes to a temporary file that is synced
// and renamed into place before the index entry is committed. On start,
// Recover removes temporary files, files without an index entry and index
// entries without a file, so nothing half-written is ever served.
package outputs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Defaults from the seed: results above 8 KiB are stored with a ref; above
// 2,000 lines or 50 KiB the model gets a head/tail preview; read_tool_output
// answers are bounded to about 40 KiB; advice after about 64 and 96 KiB of
// cumulative reads of one ref. Stored outputs are kept for 7 days.
const (
	DefaultStoreAbove    = 8 * 1024
	DefaultPreviewBytes  = 50 * 1024
	DefaultPreviewLines  = 2000
	DefaultReadBytes     = 40 * 1024
	DefaultAdviseBytes   = 64 * 1024
	DefaultWarnBytes     = 96 * 1024
	DefaultMaxAge        = 7 * 24 * time.Hour
	DefaultMaxTotalBytes = 0 // no size cap unless configured

	// Dir is the folder under the data folder that holds stored outputs.
	Dir = "tool-outputs"
)

// Limits are the thresholds of the result bound and of read_tool_output.
type Limits struct {
	StoreAbove   int // results with more text bytes than this are stored
	PreviewBytes int // results above this many bytes ...
	PreviewLines int // ... or lines are replaced by a head/tail preview
	ReadBytes    int // bound of one read_tool_output answer
	AdviseBytes  int // cumulative reads of one ref before the first advice
	WarnBytes    int // cumulative reads of one ref before the stronger advice
	// Retention: outputs older than MaxAge are removed, then the oldest until
	// the total is at most MaxTotalBytes (0: no size cap).
	MaxAge        time.Duration
	MaxTotalBytes int64
}

// DefaultLimits returns the seed's thresholds.
func DefaultLimits() Limits {
	return Limits{
		StoreAbove: DefaultStoreAbove, PreviewBytes: DefaultPreviewBytes, PreviewLines: DefaultPreviewLines,
		ReadBytes: DefaultReadBytes, AdviseBytes: DefaultAdviseBytes, WarnBytes: DefaultWarnBytes,
		MaxAge: DefaultMaxAge, MaxTotalBytes: DefaultMaxTotalBytes,
	}
}

// Validate checks that the limits make sense together.
func (l Limits) Validate() error {
	switch {
	case l.StoreAbove < 0:
		return errors.New("store threshold must be ≥ 0")
	case l.PreviewBytes < 1024 || l.PreviewLines < 10:
		return errors.New("preview thresholds must be at least 1024 bytes and 10 lines")
	case l.ReadBytes < 1024:
		return errors.New("read bound must be at least 1024 bytes")
	case l.AdviseBytes > l.WarnBytes:
		return errors.New("advice threshold must not exceed the warning threshold")
	case l.MaxAge < 0 || l.MaxTotalBytes < 0:
		return errors.New("retention limits must be ≥ 0")
	}
	return nil
}

var bucket = []byte("tool_outputs")

// Record is the index entry of one stored output.
type Record struct {
	Ref     string    `json:"ref"`
	Owner   string    `json:"owner"`
	Session string    `json:"session"`
	Tool    string    `json:"tool"`
	Bytes   int64     `json:"bytes"`
	Lines   int       `json:"lines"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
	File    string    `json:"file"` // relative to the tool-outputs folder
}

// Store holds the stored outputs of one data folder.
type Store struct {
	db     *store.Store
	dir    string
	limits Limits

	// noSync skips fsync of stored files (benchmarks and fuzzing only).
	noSync bool

	mu    sync.Mutex
	reads map[string]*readLog // by owner + "\x00" + ref
	// recent maps owner + tool + sha256 to the ref last stored with that
	// content, so an identical result (list_files of an unchanged tree)
	// reuses its ref instead of being stored again.
	recent map[string]string
	index  map[string]*workspace.LineIndex
}

// New opens the stored outputs of a data folder and recovers from any crash.
func New(db *store.Store, limits Limits) (*Store, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(db.Dir(), Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: dir, limits: limits, reads: map[string]*readLog{}, index: map[string]*workspace.LineIndex{}, recent: map[string]string{}}
	if _, err := s.Recover(); err != nil {
		return nil, fmt.Errorf("recover stored outputs: %w", err)
	}
	return s, nil
}

// Limits returns the configured thresholds.
func (s *Store) Limits() Limits { return s.limits }

var refPattern = regexp.MustCompile(`^ref_[0-9a-f]{16}$`)

// Put stores text verbatim as an output of tool in a session and returns its
// record. The file is complete on disk before the index names it.
func (s *Store) Put(owner, session, tool, text string) (Record, error) {
	h := sha256.New()
	h.Write(unsafe.Slice(unsafe.StringData(text), len(text))) // read only: no 50 MB copy
	sum := hex.EncodeToString(h.Sum(nil))
	key := owner + "\x00" + tool + "\x00" + sum
	s.mu.Lock()
	prev, ok := s.recent[key]
	s.mu.Unlock()
	if ok {
		if rec, err := s.Get(owner, prev); err == nil && rec.SHA256 == sum {
			return rec, nil
		}
	}
	ref := newRef()
	sub := safeName(session)
	if err := os.MkdirAll(filepath.Join(s.dir, sub), 0o700); err != nil {
		return Record{}, err
	}
	rec := Record{
		Ref: ref, Owner: owner, Session: session, Tool: tool,
		Bytes: int64(len(text)), Lines: countLines(text),
		Created: time.Now().UTC(), File: sub + "/" + ref + ".txt",
	}
	rec.SHA256 = sum
	final := filepath.Join(s.dir, rec.File)
	if err := writeAtomic(final, text, !s.noSync); err != nil {
		return Record{}, fmt.Errorf("store output: %w", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return store.PutJSON(tx.Bucket(bucket), []byte(ref), rec)
	}); err != nil {
		os.Remove(final)
		return Record{}, fmt.Errorf("index output: %w", err)
	}
	s.mu.Lock()
	if len(s.recent) > 4096 {
		clear(s.recent)
	}
	s.recent[key] = ref
	s.mu.Unlock()
	return rec, nil
}

// Error is a refusal the caller can act on (unknown ref, another session's
// ref, a bad range).
type Error struct{ Msg string }

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

func refusef(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Get returns the record of ref if owner may read it.
func (s *Store) Get(owner, ref string) (Record, error) {
	if !refPattern.MatchString(ref) {
		return Record{}, refusef("%q is not a stored-output ref; refs look like ref_0123456789abcdef and appear in the result that was stored", ref)
	}
	var rec Record
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = store.GetJSON(tx.Bucket(bucket), []byte(ref), &rec)
		return err
	})
	if err != nil {
		return Record{}, err
	}
	if !ok || rec.Owner != owner {
		// Another session's ref is reported exactly like a missing one, so
		// refs cannot be probed across sessions.
		return Record{}, refusef("no stored output %s in this session (it may have expired under the retention policy); re-run the tool to produce it again", ref)
	}
	return rec, nil
}

func (s *Store) open(rec Record) (*os.File, error) {
	f, err := os.Open(filepath.Join(s.dir, filepath.FromSlash(rec.File)))
	if err != nil {
		return nil, fmt.Errorf("stored output %s is indexed but unreadable: %w", rec.Ref, err)
	}
	st, err := f.Stat()
	if err != nil || st.Size() != rec.Bytes {
		f.Close()
		return nil, fmt.Errorf("stored output %s is damaged (size %d, indexed %d)", rec.Ref, st.Size(), rec.Bytes)
	}
	return f, nil
}

// Recover makes the folder and the index agree after a crash: temporary
// files and unindexed files are removed, and index entries whose file is
// missing or of the wrong size are dropped. It returns how many things it
// fixed.
func (s *Store) Recover() (int, error) {
	indexed := map[string]Record{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var rec Record
			if _, err := store.GetJSON(tx.Bucket(bucket), k, &rec); err == nil {
				indexed[rec.File] = rec
			}
			return nil
		})
	}); err != nil {
		return 0, err
	}
	fixed := 0
	onDisk := map[string]bool{}
	err := filepath.WalkDir(s.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(s.dir, p)
		rel = filepath.ToSlash(rel)
		rec, ok := indexed[rel]
		info, ierr := d.Info()
		if strings.HasPrefix(d.Name(), ".tmp-") || !ok || ierr != nil || info.Size() != rec.Bytes {
			os.Remove(p)
			fixed++
			return nil
		}
		onDisk[rel] = true
		return nil
	})
	if err != nil {
		return fixed, err
	}
	var drop []string
	for file, rec := range indexed {
		if !onDisk[file] {
			drop = append(drop, rec.Ref)
		}
	}
	if len(drop) > 0 {
		fixed += len(drop)
		err = s.db.Update(func(tx *bolt.Tx) error {
			for _, ref := range drop {
				if err := tx.Bucket(bucket).Delete([]byte(ref)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return fixed, err
}

// Prune applies the retention policy at time now: outputs older than MaxAge
// go first, then the oldest until the total fits MaxTotalBytes.
func (s *Store) Prune(now time.Time) (removed int, freed int64, err error) {
	var all []Record
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var rec Record
			if _, err := store.GetJSON(tx.Bucket(bucket), k, &rec); err == nil {
				all = append(all, rec)
			}
			return nil
		})
	}); err != nil {
		return 0, 0, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Created.Before(all[j].Created) })
	var total int64
	for _, r := range all {
		total += r.Bytes
	}
	var drop []Record
	for _, r := range all {
		old := s.limits.MaxAge > 0 && now.Sub(r.Created) > s.limits.MaxAge
		over := s.limits.MaxTotalBytes > 0 && total > s.limits.MaxTotalBytes
		if !old && !over {
			break // oldest first: nothing after this one is older
		}
		drop = append(drop, r)
		total -= r.Bytes
	}
	if len(drop) == 0 {
		return 0, 0, nil
	}
	// Index first, then files: a crash in between leaves unindexed files,
	// which Recover removes, never an index entry without its file.
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range drop {
			if err := tx.Bucket(bucket).Delete([]byte(r.Ref)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	for _, r := range drop {
		delete(s.index, r.Ref)
		os.Remove(filepath.Join(s.dir, filepath.FromSlash(r.File)))
		removed++
		freed += r.Bytes
	}
	s.mu.Unlock()
	return removed, freed, nil
}

func newRef() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "ref_" + hex.EncodeToString(b[:])
}

// safeName keeps a session id usable as one folder name.
func safeName(s string) string {
	name := workspace.SafeName(s)
	if name == "" || strings.Trim(name, ".") == "" {
		return "session"
	}
	return name
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// writeAtomic writes text to name through a synced temporary file and a
// rename, then syncs the folder so the rename itself survives a crash.
func writeAtomic(name, text string, sync bool) error {
	dir := filepath.Dir(name)
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		return fail(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil && sync {
		d.Sync()
		d.Close()
	} else if err == nil {
		d.Close()
	}
	return nil
}
