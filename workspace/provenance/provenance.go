// Package provenance records, for every regular file of the workspace, a
// revision each time it is created, changed or deleted: its content hash,
// size and time, who wrote it, and the revision it replaced. Content is kept
// in the content-addressed store (up to a size cap), so earlier revisions can
// be read and two text revisions compared.
//
// # When revisions are recorded
//
// The server calls Scan after every execution ends (runner.Config.OnEnd) and
// once at start. A scan walks the workspace, compares each file's size,
// mtime, ctime and inode with an index kept in bbolt and in memory, and reads
// only the files that differ, so a scan of an unchanged workspace costs a
// directory walk. Observe refreshes one file on demand (get_file_provenance,
// declare_artifact), and RecordWrite records a file the server itself wrote
// (a transfer, a download, an artifact copied back into the workspace).
//
// # Who wrote a file: the origin rules
//
// The server never infers an origin. A change is credited to an execution
// only when the kernel's change time (ctime, which no program can set back)
// of the file falls inside that execution's run window, from the moment it
// was requested to the moment it ended (with clockSlack either side for the
// kernel's coarse clock). A change made before the window is recorded with
// kind "unknown": it happened outside anything scimcp recorded (a user
// copying files in, an editor, another program). A change made after the
// window is left for a later scan. When Config.Running names executions still
// running, a change that one of them may have made is left for that
// execution's own scan instead of being recorded as unknown. A deletion is
// dated by the change time of the nearest folder that still exists.
//
// The package knows nothing about MCP; refusals are *Error values whose text
// says what to do next.
package provenance

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Defaults.
const (
	// DefaultKeepBytes: revisions up to this size keep their content in the
	// CAS; larger ones keep the hash and size only (content_kept false).
	DefaultKeepBytes = 64 << 20
	// DefaultUnknownKeepBytes: content kept per scan for files with no
	// recorded writer.
	DefaultUnknownKeepBytes = 256 << 20
	// DefaultMaxFiles bounds how many files a scan tracks, so a huge tree
	// cannot exhaust memory; past it the scan says it was truncated and
	// records no deletions.
	DefaultMaxFiles = 200_000
	// clockSlack widens an execution's window on both sides: file times come
	// from the kernel's coarse clock, which may lag the wall clock by a tick.
	clockSlack = 50 * time.Millisecond
	// maxHashWorkers bounds how many changed files are read and stored at
	// once. The work is I/O-bound (concurrent fsyncs share journal
	// commits), so it does not follow GOMAXPROCS.
	maxHashWorkers = 8
	// readAttempts is how often a file that keeps changing while it is read
	// is re-read before its revision is recorded as unstable.
	readAttempts = 3
	// maxReportedFailures bounds ScanReport.Failed.
	maxReportedFailures = 20
	// maxWalkWorkers bounds how many folders a scan lists at once.
	maxWalkWorkers = 8
	// lineIndexCache is how many revisions keep their line index for paging.
	lineIndexCache = 64
)

// Kind names who wrote a revision.
type Kind string

const (
	KindExecution Kind = "execution" // a run_shell execution
	KindDownload  Kind = "download"  // a web or MCP download the server performed
	KindTransfer  Kind = "transfer"  // copied from another workspace by workspace_transfer
	KindArtifact  Kind = "artifact"  // an artifact version copied into the workspace
	KindUnknown   Kind = "unknown"   // no recorded writer; never replaced by a guess
)

// Change is what a revision records.
type Change string

const (
	Created  Change = "created"
	Modified Change = "modified"
	Deleted  Change = "deleted"
)

// Writer describes who produced a revision.
type Writer struct {
	Kind Kind `json:"kind"`

	// Executions.
	ExecutionID         string     `json:"execution_id,omitempty"`
	Command             string     `json:"command,omitempty"`
	Script              string     `json:"script,omitempty"`
	ScriptRevision      string     `json:"script_revision,omitempty"` // the script's revision when the scan ran
	Args                []string   `json:"args,omitempty"`
	Runner              string     `json:"runner,omitempty"`
	EnvironmentID       string     `json:"environment_id,omitempty"`
	EnvironmentRevision string     `json:"environment_revision,omitempty"`
	State               string     `json:"state,omitempty"`
	ExitCode            *int       `json:"exit_code,omitempty"`
	Signal              string     `json:"signal,omitempty"`
	Created             *time.Time `json:"created,omitempty"` // requested: the attribution window opens here
	Started             *time.Time `json:"started,omitempty"`
	Ended               *time.Time `json:"ended,omitempty"`
	Session             string     `json:"session,omitempty"`

	// Copies: where the content came from (transfer, artifact, download).
	Source *Source `json:"source,omitempty"`
	// Note says more, in words (for unknown: why no writer is known).
	Note string `json:"note,omitempty"`
}

// Source is what a copied file came from.
type Source struct {
	Path            string `json:"path,omitempty"`
	RevisionID      string `json:"revision_id,omitempty"`
	Hash            string `json:"hash,omitempty"`
	WorkspaceID     string `json:"workspace_id,omitempty"`
	ArtifactID      string `json:"artifact_id,omitempty"`
	ArtifactVersion int    `json:"artifact_version,omitempty"`
	URI             string `json:"uri,omitempty"`
	// Downloads of an MCP source's result: the invocation, the candidate
	// of its result, and the artifact_download job.
	InvocationID  string `json:"invocation_id,omitempty"`
	MCPSource     string `json:"mcp_source,omitempty"`
	MCPTool       string `json:"mcp_tool,omitempty"`
	CandidateID   string `json:"candidate_id,omitempty"`
	DownloadJobID string `json:"download_job_id,omitempty"`
	MediaType     string `json:"media_type,omitempty"`
	Bytes         int64  `json:"bytes,omitempty"`
}

// Revision is one recorded state of a file.
type Revision struct {
	ID       string    `json:"id"`
	Path     string    `json:"path"`
	Change   Change    `json:"change"`
	Hash     string    `json:"hash,omitempty"` // empty for deletions
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"mtime"`
	Recorded time.Time `json:"recorded"`
	// ContentKept reports that the content is in the CAS; ContentNote says
	// why not when it is not.
	ContentKept bool   `json:"content_kept"`
	ContentNote string `json:"content_note,omitempty"`
	Writer      Writer `json:"writer"`
	// Previous is the revision this one replaced ("" for the first).
	Previous string `json:"previous,omitempty"`
	// SeenBy names what noticed the change: "scan after execution exec_…",
	// "server start", "get_file_provenance", ...
	SeenBy string `json:"seen_by,omitempty"`
}

// Window is an execution that is still running, for Config.Running.
type Window struct {
	ExecutionID string
	Start       time.Time // when it was requested
}

// Config configures an Index.
type Config struct {
	Store     *store.Store
	Workspace *workspace.Workspace
	CAS       *cas.Store
	// KeepBytes caps the content kept per revision (0: DefaultKeepBytes;
	// negative: keep no content).
	KeepBytes int64
	// UnknownKeepBytes caps the content one scan keeps, in all, for files
	// with no recorded writer (the first scan of a workspace full of
	// datasets would otherwise copy them all into the CAS). Past it those
	// revisions keep the hash and size only, and say so. 0:
	// DefaultUnknownKeepBytes; negative: no cap beyond KeepBytes.
	UnknownKeepBytes int64
	// MaxFiles bounds the files a scan tracks (0: DefaultMaxFiles).
	MaxFiles int
	// Exclude lists workspace folders (relative, slash-separated) that
	// scans do not enter. The data folder is excluded automatically when it
	// lies inside the workspace.
	Exclude []string
	// Running, when set, lists the executions running now. A change one of
	// them may have made is left for its own scan instead of being recorded
	// with an unknown origin.
	Running func() []Window
}

// Index is the file index and revision history of one workspace. It is safe
// for use by many goroutines; scans and observations run one at a time.
type Index struct {
	cfg  Config
	db   *store.Store
	ws   *workspace.Workspace
	cas  *cas.Store
	walk *walker
	keep int64

	scanMu   sync.Mutex // one scan, observation or recorded write at a time
	retainMu sync.Mutex // one Retain pass at a time

	// files is the index, as on disk. It is written only under scanMu
	// (by commit, under mu as well), so a scan reads it without mu.
	mu    sync.RWMutex
	files map[string]*entry
	gen   uint64 // the current scan's mark (see entry.seen)

	idxMu    sync.Mutex
	idx      map[string]*workspace.LineIndex // by content hash, for paging revisions
	idxOrder []string
}

// entry is the index's record of a file's last recorded state.
type entry struct {
	st   stat
	hash string // hex
	rev  uint64 // sequence of its current revision
	kept bool
	// seen is the mark of the last scan that found the file; entries a
	// complete scan did not mark are deletions. Only the scan's walkers
	// write it.
	seen uint64
}

var (
	bucketFiles     = []byte("prov_files")     // path → entry (binary)
	bucketRevisions = []byte("prov_revisions") // be64(seq) → Revision (JSON)
	bucketHistory   = []byte("prov_history")   // path \x00 be64(seq) → nil
	bucketWriters   = []byte("prov_writers")   // execution id → Writer (JSON)
)

// New opens the provenance index of a workspace and loads it into memory.
func New(cfg Config) (*Index, error) {
	if cfg.Store == nil || cfg.Workspace == nil || cfg.CAS == nil {
		return nil, errors.New("provenance: Store, Workspace and CAS are required")
	}
	keep := cfg.KeepBytes
	switch {
	case keep == 0:
		keep = DefaultKeepBytes
	case keep < 0:
		keep = -1
	}
	if cfg.MaxFiles <= 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	root, err := cfg.Workspace.Root().Open(".")
	if err != nil {
		return nil, fmt.Errorf("provenance: open workspace: %w", err)
	}
	exclude := map[string]bool{}
	for _, e := range cfg.Exclude {
		exclude[strings.Trim(filepathToSlash(e), "/")] = true
	}
	if rel, err := filepath.Rel(cfg.Workspace.Dir(), cfg.Store.Dir()); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		exclude[filepathToSlash(rel)] = true
	}
	x := &Index{
		cfg: cfg, db: cfg.Store, ws: cfg.Workspace, cas: cfg.CAS, keep: keep,
		walk: &walker{
			root:     root,
			fallback: func(rel string) (*os.File, error) { return cfg.Workspace.Root().Open(rel) },
			exclude:  exclude,
			max:      cfg.MaxFiles,
		},
		files: map[string]*entry{},
	}
	if err := x.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketFiles, bucketRevisions, bucketHistory, bucketWriters} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		root.Close()
		return nil, fmt.Errorf("provenance: %w", err)
	}
	if err := x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
			if e, ok := decodeEntry(v); ok {
				x.files[string(k)] = &e
			}
			return nil
		})
	}); err != nil {
		root.Close()
		return nil, fmt.Errorf("provenance: load index: %w", err)
	}
	return x, nil
}

// Close releases the workspace handle.
func (x *Index) Close() error { return x.walk.root.Close() }

// KeepBytes returns the content cap per revision (-1: none kept).
func (x *Index) KeepBytes() int64 { return x.keep }

func filepathToSlash(p string) string { return filepath.ToSlash(filepath.Clean(p)) }

// ScanReport says what a scan found.
type ScanReport struct {
	Files       int           // regular files in the workspace
	Hashed      int           // files read because their size, times or inode changed
	BytesHashed int64         // bytes read
	Created     int           // revisions recorded, by change
	Modified    int           //
	Deleted     int           //
	Unknown     int           // of those, revisions with origin unknown
	Deferred    int           // changes left for a later scan (after the window, or a running execution's)
	Unchanged   int           // re-read but with the same content (touched)
	Truncated   bool          // the walk stopped at MaxFiles or ctx; no deletions were recorded
	Unreadable  []string      // folders that could not be listed (deletions beneath them are not recorded)
	Failed      []string      // files that could not be read or stored, left for the next scan ("path: error")
	Duration    time.Duration //
}

// pending is one change a scan found.
type pending struct {
	path    string
	st      stat
	prev    *entry
	deleted bool
	who     Writer
	// filled by read()
	hash, note string
	size       int64
	kept       bool
	gone       bool  // vanished before it could be read
	same       bool  // content unchanged: update the index only
	failed     error // could not be read or stored: left for the next scan
}

// Scan walks the workspace and records a revision for every file created,
// changed or deleted since the last scan. w is the writer to credit: an
// execution that just ended (Kind execution, with Created or Started, and
// Ended set), or Kind unknown for a scan outside any execution (at server
// start). See the package documentation for the origin rules.
func (x *Index) Scan(ctx context.Context, w Writer) (ScanReport, error) {
	start := time.Now()
	if w.Kind != KindExecution && w.Kind != KindUnknown {
		return ScanReport{}, fmt.Errorf("provenance: scan writer must be an execution or unknown, not %q", w.Kind)
	}
	seenBy := w.Note
	if w.Kind == KindExecution {
		seenBy = "scan after execution " + w.ExecutionID
	} else if seenBy == "" {
		seenBy = "scan"
	}
	x.scanMu.Lock()
	defer x.scanMu.Unlock()

	x.gen++
	gen := x.gen
	var mu sync.Mutex
	var changes []*pending
	wr := x.walk.walk(ctx, func(rel []byte, st stat) {
		// Reading x.files without x.mu is safe: only scanMu holders write it.
		e, ok := x.files[string(rel)]
		if ok {
			e.seen = gen
			if e.st == st {
				return
			}
		}
		c := &pending{path: string(rel), st: st}
		if ok {
			prev := *e
			c.prev = &prev
		}
		mu.Lock()
		changes = append(changes, c)
		mu.Unlock()
	})
	rep := ScanReport{Files: wr.files, Truncated: wr.truncated, Unreadable: wr.unreadable}
	if !wr.truncated {
		for p, e := range x.files {
			if e.seen == gen || under(p, wr.unreadable) {
				continue
			}
			prev := *e
			changes = append(changes, &pending{path: p, prev: &prev, deleted: true})
		}
	}
	if len(changes) == 0 {
		rep.Duration = time.Since(start)
		return rep, nil
	}

	running := x.running(w.ExecutionID)
	script := ""
	if w.Kind == KindExecution && w.Script != "" {
		if rel, err := x.ws.Clean(w.Script); err == nil {
			script = rel
		}
	}
	var todo []*pending
	for _, c := range changes {
		ctime := c.st.ctime
		if c.deleted {
			var ok bool
			if ctime, ok = x.walk.nearestDirCtime(c.path); !ok {
				ctime = time.Now().UnixNano()
			}
		}
		who, deferred := attribute(w, ctime, running, seenBy)
		if deferred {
			rep.Deferred++
			continue
		}
		c.who = who
		todo = append(todo, c)
	}
	// The script's own change (if any) is committed first, so the
	// execution's record can name the script's revision.
	for i, c := range todo {
		if c.path == script && i > 0 {
			todo[0], todo[i] = todo[i], todo[0]
		}
	}
	x.readAll(ctx, todo, &rep)
	for _, c := range todo {
		if c.failed != nil && len(rep.Failed) < maxReportedFailures {
			rep.Failed = append(rep.Failed, c.path+": "+c.failed.Error())
		}
		if c.same && c.failed == nil {
			rep.Unchanged++
		}
	}
	recs, err := x.commit(todo, seenBy, w.Kind == KindExecution)
	if err != nil {
		return rep, err
	}
	for _, r := range recs {
		switch r.Change {
		case Created:
			rep.Created++
		case Modified:
			rep.Modified++
		case Deleted:
			rep.Deleted++
		}
		if r.Writer.Kind == KindUnknown {
			rep.Unknown++
		}
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// under reports whether p lies beneath one of the folders.
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if d == "." || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// running lists the running executions other than self.
func (x *Index) running(self string) []Window {
	if x.cfg.Running == nil {
		return nil
	}
	var out []Window
	for _, r := range x.cfg.Running() {
		if r.ExecutionID != self {
			out = append(out, r)
		}
	}
	return out
}

// attribute applies the origin rules to a change made at ctime (Unix ns).
// It returns the writer to record, or deferred when a later scan must decide.
func attribute(w Writer, ctime int64, running []Window, seenBy string) (Writer, bool) {
	if w.Kind == KindExecution {
		from := w.Created
		if from == nil {
			from = w.Started
		}
		if from != nil && w.Ended != nil {
			lo := from.Add(-clockSlack).UnixNano()
			hi := w.Ended.Add(clockSlack).UnixNano()
			switch {
			case ctime >= lo && ctime <= hi:
				return w, false
			case ctime > hi:
				return Writer{}, true
			}
		}
	}
	for _, r := range running {
		if ctime >= r.Start.Add(-clockSlack).UnixNano() {
			return Writer{}, true
		}
	}
	return unknownWriter(seenBy), false
}

func unknownWriter(seenBy string) Writer {
	return Writer{Kind: KindUnknown, Note: "no recorded writer: the change was made outside every execution and server write that scimcp records (first seen by " + seenBy + ")"}
}

// scriptRevision returns the current revision of an execution's script, if
// it is a tracked workspace file: one recorded in the running transaction
// (fresh), else the index's.
func (x *Index) scriptRevision(script string, fresh map[string]string) string {
	rel, err := x.ws.Clean(script)
	if err != nil {
		return ""
	}
	if id, ok := fresh[rel]; ok {
		return id
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if e, ok := x.files[rel]; ok {
		return revID(e.rev)
	}
	return ""
}

// readAll hashes the changed files (and stores their content up to the cap)
// with a few workers. Once ctx ends, the files not read yet are left for the
// next scan.
func (x *Index) readAll(ctx context.Context, todo []*pending, rep *ScanReport) {
	work := make(chan *pending)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := min(maxHashWorkers, max(len(todo), 1)) // I/O-bound: concurrent fsyncs share journal commits
	var unknownLeft atomic.Int64
	switch b := x.cfg.UnknownKeepBytes; {
	case b == 0:
		unknownLeft.Store(DefaultUnknownKeepBytes)
	case b < 0:
		unknownLeft.Store(math.MaxInt64)
	default:
		unknownLeft.Store(b)
	}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if c.deleted {
					continue
				}
				if err := ctx.Err(); err != nil {
					c.failed = err
					continue
				}
				x.read(c, &unknownLeft)
				mu.Lock()
				rep.Hashed++
				rep.BytesHashed += c.size
				mu.Unlock()
			}
		}()
	}
	for _, c := range todo {
		work <- c
	}
	close(work)
	wg.Wait()
}

// read snapshots one changed file into the CAS. A file that keeps changing
// while it is read is re-read up to readAttempts times; its revision then
// records the last content read and says it was unstable, and the index keeps
// the stat from before that read so the next scan looks again.
func (x *Index) read(c *pending, unknownLeft *atomic.Int64) {
	keep := x.keep
	if c.who.Kind == KindUnknown && keep >= 0 {
		// Reserve this file's size from the scan's budget for content of
		// unknown origin, or keep its hash only.
		if unknownLeft.Add(-c.st.size) < 0 {
			unknownLeft.Add(c.st.size)
			keep = 0
		}
	}
	for attempt := 1; ; attempt++ {
		f, err := x.walk.openFile(c.path)
		if err != nil {
			c.gone = true
			return
		}
		before, ok := fstat(f)
		if !ok {
			f.Close()
			c.gone = true
			return
		}
		var b cas.Blob
		if keep < 0 || (keep == 0 && x.keep >= 0) {
			b, err = hashOnly(f) // no content kept (PutMax takes 0 as "no cap")
		} else {
			b, err = x.cas.PutMax(f, keep)
		}
		after, _ := fstat(f)
		f.Close()
		if err != nil {
			c.failed = err
			return
		}
		c.st, c.hash, c.size, c.kept = before, b.Hash, b.Size, b.Stored
		if !b.Stored {
			switch {
			case x.keep < 0:
				c.note = "content not kept: this server keeps hashes only"
			case keep < x.keep:
				c.note = "content not kept: this scan already kept the most content it keeps for files with no recorded writer; only the hash and size are recorded"
			default:
				c.note = fmt.Sprintf("content not kept: %d bytes is above the %d-byte cap for revision content; only the hash and size are recorded", b.Size, x.keep)
			}
		}
		if before == after || attempt == readAttempts {
			if before != after {
				c.note = strings.TrimSpace(c.note + " The file changed while it was read; this revision holds the last content read.")
				c.st = stat{} // force the next scan to read it again
			}
			if c.prev != nil && c.prev.hash == c.hash {
				c.same = true
			}
			return
		}
	}
}

// unlimited is a content budget without a cap, for writes with a recorded
// writer.
func unlimited() *atomic.Int64 {
	var b atomic.Int64
	b.Store(math.MaxInt64)
	return &b
}

// hashOnly hashes and measures a file without keeping its content.
func hashOnly(f *os.File) (cas.Blob, error) {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return cas.Blob{}, err
	}
	return cas.Blob{Hash: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

func fstat(f *os.File) (stat, bool) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return stat{}, false
	}
	return statFromInfo(fi), true
}

func statFromInfo(fi os.FileInfo) stat {
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return stat{size: s.Size, mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(), ino: s.Ino, dev: uint64(s.Dev)}
}

// commit records the revisions of the changes in one transaction and then
// updates the in-memory index. execWriter stores the full writer once under
// its execution id.
func (x *Index) commit(todo []*pending, seenBy string, execWriter bool) ([]Revision, error) {
	now := time.Now().UTC()
	var recs []Revision
	type update struct {
		path string
		e    entry
		del  bool
	}
	var updates []update
	err := x.db.Update(func(tx *bolt.Tx) error {
		revs, hist, files := tx.Bucket(bucketRevisions), tx.Bucket(bucketHistory), tx.Bucket(bucketFiles)
		recs, updates = recs[:0], updates[:0]
		wrote := map[string]bool{}
		revOf := map[string]string{} // revisions recorded in this transaction, by path
		for _, c := range todo {
			if c.failed != nil || (c.gone && c.prev == nil) {
				continue // unreadable now, or appeared and vanished between the walk and the read
			}
			if c.same {
				e := *c.prev
				e.st = c.st
				if err := files.Put([]byte(c.path), encodeEntry(e)); err != nil {
					return err
				}
				updates = append(updates, update{path: c.path, e: e})
				continue
			}
			seq, err := revs.NextSequence()
			if err != nil {
				return err
			}
			r := Revision{ID: revID(seq), Path: c.path, Recorded: now, Writer: c.who, SeenBy: seenBy}
			if c.prev != nil {
				r.Previous = revID(c.prev.rev)
			}
			switch {
			case c.deleted || c.gone:
				r.Change = Deleted
			case c.prev == nil:
				r.Change = Created
			default:
				r.Change = Modified
			}
			if r.Change != Deleted {
				r.Hash, r.Size, r.ContentKept, r.ContentNote = c.hash, c.size, c.kept, c.note
				r.ModTime = time.Unix(0, c.st.mtime).UTC()
			}
			stored := r
			if r.Writer.Kind == KindExecution && execWriter {
				if id := r.Writer.ExecutionID; id != "" && !wrote[id] {
					full := r.Writer
					if full.Script != "" && full.ScriptRevision == "" {
						full.ScriptRevision = x.scriptRevision(full.Script, revOf)
					}
					if err := store.PutJSON(tx.Bucket(bucketWriters), []byte(id), full); err != nil {
						return err
					}
					wrote[id] = true
				}
				stored.Writer = Writer{Kind: KindExecution, ExecutionID: r.Writer.ExecutionID}
			}
			if err := store.PutJSON(revs, be64(seq), stored); err != nil {
				return err
			}
			if err := hist.Put(historyKey(c.path, seq), nil); err != nil {
				return err
			}
			revOf[c.path] = r.ID
			if r.Change == Deleted {
				if err := files.Delete([]byte(c.path)); err != nil {
					return err
				}
				updates = append(updates, update{path: c.path, del: true})
			} else {
				e := entry{st: c.st, hash: c.hash, rev: seq, kept: c.kept}
				if err := files.Put([]byte(c.path), encodeEntry(e)); err != nil {
					return err
				}
				updates = append(updates, update{path: c.path, e: e})
			}
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("provenance: record revisions: %w", err)
	}
	x.mu.Lock()
	for _, u := range updates {
		if u.del {
			delete(x.files, u.path)
		} else {
			e := u.e
			e.seen = x.gen
			x.files[u.path] = &e
		}
	}
	x.mu.Unlock()
	return recs, nil
}

func revID(seq uint64) string { return fmt.Sprintf("rev_%016x", seq) }

// parseRevID returns the sequence of a revision id.
func parseRevID(id string) (uint64, bool) {
	var seq uint64
	if len(id) != 20 || !strings.HasPrefix(id, "rev_") {
		return 0, false
	}
	b, err := hex.DecodeString(id[4:])
	if err != nil {
		return 0, false
	}
	seq = binary.BigEndian.Uint64(b)
	return seq, seq > 0
}

func be64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func historyKey(path string, seq uint64) []byte {
	k := make([]byte, 0, len(path)+9)
	k = append(k, path...)
	k = append(k, 0)
	return append(k, be64(seq)...)
}

const entryBytes = 8*6 + 1 + 32

func encodeEntry(e entry) []byte {
	b := make([]byte, entryBytes)
	binary.BigEndian.PutUint64(b[0:], uint64(e.st.size))
	binary.BigEndian.PutUint64(b[8:], uint64(e.st.mtime))
	binary.BigEndian.PutUint64(b[16:], uint64(e.st.ctime))
	binary.BigEndian.PutUint64(b[24:], e.st.ino)
	binary.BigEndian.PutUint64(b[32:], e.st.dev)
	binary.BigEndian.PutUint64(b[40:], e.rev)
	if e.kept {
		b[48] = 1
	}
	hex.Decode(b[49:], []byte(e.hash))
	return b
}

func decodeEntry(b []byte) (entry, bool) {
	if len(b) != entryBytes {
		return entry{}, false
	}
	return entry{
		st: stat{
			size: int64(binary.BigEndian.Uint64(b[0:])), mtime: int64(binary.BigEndian.Uint64(b[8:])),
			ctime: int64(binary.BigEndian.Uint64(b[16:])), ino: binary.BigEndian.Uint64(b[24:]),
			dev: binary.BigEndian.Uint64(b[32:]),
		},
		rev:  binary.BigEndian.Uint64(b[40:]),
		kept: b[48] == 1,
		hash: hex.EncodeToString(b[49:]),
	}, true
}

// decodeRevision reads a stored revision and joins its execution writer.
func decodeRevision(tx *bolt.Tx, v []byte) (Revision, error) {
	var r Revision
	if err := json.Unmarshal(v, &r); err != nil {
		return r, err
	}
	if r.Writer.Kind == KindExecution && r.Writer.ExecutionID != "" {
		var full Writer
		if ok, err := store.GetJSON(tx.Bucket(bucketWriters), []byte(r.Writer.ExecutionID), &full); err == nil && ok {
			r.Writer = full
		}
	}
	return r, nil
}
