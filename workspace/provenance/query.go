package provenance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
)

// History bounds of File.
const (
	DefaultHistory = 20
	MaxHistory     = 100
)

// Observation is a file's state after Observe or Note.
type Observation struct {
	Path    string
	Exists  bool      // a regular file is there now
	Size    int64     // on disk now
	ModTime time.Time // on disk now
	// Current is the latest recorded revision (nil if none was ever
	// recorded).
	Current *Revision
	// Pending, when set, says why the file on disk differs from Current
	// and was not recorded: an execution that is still running may be
	// writing it, and its own scan will record the change.
	Pending string
	// Recorded reports that this call recorded a new revision.
	Recorded bool
}

// Observe brings one file's record up to date: if the file differs from its
// last recorded revision (or was never recorded, or is gone), the change is
// recorded now under the origin rules, with seenBy naming the caller
// ("get_file_provenance"). It refuses directories, symbolic links and other
// non-regular files.
func (x *Index) Observe(ctx context.Context, p, seenBy string) (Observation, error) {
	rel, err := x.cleanFile(p)
	if err != nil {
		return Observation{}, err
	}
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	st, exists, err := x.statFile(p, rel)
	if err != nil {
		return Observation{}, err
	}
	x.mu.RLock()
	e, indexed := x.files[rel]
	x.mu.RUnlock()
	obs := Observation{Path: rel, Exists: exists}
	if indexed {
		cp := *e // a copy: commit replaces entries
		e = &cp
	}
	if exists {
		obs.Size, obs.ModTime = st.size, time.Unix(0, st.mtime).UTC()
	}
	changed := (exists && (!indexed || e.st != st)) || (!exists && indexed)
	if changed {
		c := &pending{path: rel, st: st, deleted: !exists}
		if indexed {
			c.prev = e
		}
		ctime := st.ctime
		if !exists {
			var ok bool
			if ctime, ok = x.walk.nearestDirCtime(rel); !ok {
				ctime = time.Now().UnixNano()
			}
		}
		who, deferred := attribute(Writer{Kind: KindUnknown}, ctime, x.running(""), seenBy)
		if deferred {
			obs.Pending = "the file changed while an execution is running; that execution's scan will record the change when it ends"
		} else {
			c.who = who
			if !c.deleted {
				x.read(c, unlimited())
				if c.failed != nil {
					return obs, fmt.Errorf("provenance: read %s: %w", rel, c.failed)
				}
			}
			recs, err := x.commit([]*pending{c}, seenBy, false)
			if err != nil {
				return obs, err
			}
			obs.Recorded = len(recs) > 0
		}
	}
	cur, err := x.current(rel)
	if err != nil {
		return obs, err
	}
	obs.Current = cur
	return obs, nil
}

// Note records a file whose content the caller has just read and stored in
// the CAS (declare_artifact snapshots a file once, for both records). fi is
// the file's stat from the handle it read, taken before the read, and hash,
// size describe the bytes read. If the index already holds this state, Note
// changes nothing; otherwise it records the change under the origin rules.
func (x *Index) Note(p string, fi os.FileInfo, hash string, size int64, seenBy string) (Observation, error) {
	rel, err := x.cleanFile(p)
	if err != nil {
		return Observation{}, err
	}
	st := statFromInfo(fi)
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	x.mu.RLock()
	e, indexed := x.files[rel]
	x.mu.RUnlock()
	if indexed {
		cp := *e
		e = &cp
	}
	obs := Observation{Path: rel, Exists: true, Size: size, ModTime: time.Unix(0, st.mtime).UTC()}
	if !indexed || e.st != st || e.hash != hash {
		c := &pending{path: rel, st: st, hash: hash, size: size, kept: true}
		if indexed {
			c.prev = e
			c.same = e.hash == hash
		}
		who, deferred := attribute(Writer{Kind: KindUnknown}, st.ctime, x.running(""), seenBy)
		if deferred && !c.same {
			obs.Pending = "the file changed while an execution is running; that execution's scan will record the change when it ends"
		} else {
			c.who = who
			recs, err := x.commit([]*pending{c}, seenBy, false)
			if err != nil {
				return obs, err
			}
			obs.Recorded = len(recs) > 0
		}
	}
	cur, err := x.current(rel)
	if err != nil {
		return obs, err
	}
	obs.Current = cur
	return obs, nil
}

// RecordWrite records the file at p as written by w now: the server calls
// it after it writes a workspace file itself (a transfer, a download, an
// artifact copied back), so the revision names that writer instead of
// waiting for a scan to find an unknown change. A missing file records a
// deletion by w.
func (x *Index) RecordWrite(ctx context.Context, p string, w Writer) (Revision, error) {
	return x.Write(ctx, p, w, nil)
}

// Write runs write (which creates or changes the file at p) and records its
// result as written by w, with no scan in between: a scan cannot see the
// new file first and record it with an unknown origin. When write fails
// nothing is recorded and its error is returned.
func (x *Index) Write(ctx context.Context, p string, w Writer, write func() error) (Revision, error) {
	if w.Kind == "" || w.Kind == KindExecution {
		return Revision{}, fmt.Errorf("provenance: a recorded write needs a server writer (download, transfer, artifact, unknown), not %q", w.Kind)
	}
	rel, err := x.cleanFile(p)
	if err != nil {
		return Revision{}, err
	}
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	if write != nil {
		if err := write(); err != nil {
			return Revision{}, err
		}
	}
	st, exists, err := x.statFile(p, rel)
	if err != nil {
		return Revision{}, err
	}
	x.mu.RLock()
	e, indexed := x.files[rel]
	x.mu.RUnlock()
	if indexed {
		cp := *e
		e = &cp
	}
	if !exists && !indexed {
		return Revision{}, errorf(CodeNotFound, nil, "%q does not exist in the workspace", p)
	}
	c := &pending{path: rel, st: st, deleted: !exists, who: w}
	if indexed {
		c.prev = e
	}
	if exists {
		x.read(c, unlimited())
		if c.failed != nil {
			return Revision{}, fmt.Errorf("provenance: read %s: %w", rel, c.failed)
		}
		c.same = false // a server write is a revision even when the bytes repeat
	}
	recs, err := x.commit([]*pending{c}, "recorded by the server ("+string(w.Kind)+")", false)
	if err != nil {
		return Revision{}, err
	}
	if len(recs) == 0 {
		return Revision{}, errorf(CodeNotFound, nil, "%q vanished while it was recorded", p)
	}
	return recs[0], nil
}

// OpenFile opens a regular workspace file for reading without following a
// symbolic link anywhere on its path, and returns its workspace-relative
// path and its stat taken from the open handle. It refuses, with an *Error,
// paths outside the workspace, directories, symbolic links, special files
// and missing files (CodeNotFound).
func (x *Index) OpenFile(p string) (*os.File, string, os.FileInfo, error) {
	rel, err := x.cleanFile(p)
	if err != nil {
		return nil, "", nil, err
	}
	st, exists, err := x.statFile(p, rel)
	if err != nil {
		return nil, rel, nil, err
	}
	if !exists {
		return nil, rel, nil, errorf(CodeNotFound, nil, "%q does not exist in the workspace; call list_files to see the files that do", p)
	}
	f, err := x.walk.openFile(rel)
	if err != nil {
		if isNotExist(err) {
			return nil, rel, nil, errorf(CodeNotFound, err, "%q was deleted while it was being opened", p)
		}
		return nil, rel, nil, fmt.Errorf("open %s: %w", rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, rel, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if got := statFromInfo(fi); !fi.Mode().IsRegular() || got.ino != st.ino || got.dev != st.dev {
		f.Close()
		return nil, rel, nil, errorf(CodeNotRegular, nil, "%q was replaced while it was being opened; try again", p)
	}
	return f, rel, fi, nil
}

// SameFile reports whether two stats of one file show the same state (size,
// times and inode): a file whose stat changed while it was read may have
// been read half-written.
func SameFile(a, b os.FileInfo) bool { return statFromInfo(a) == statFromInfo(b) }

// cleanFile resolves a caller's path to a workspace-relative file path.
func (x *Index) cleanFile(p string) (string, error) {
	rel, err := x.ws.Clean(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", errorf(CodeNotRegular, nil, "%q is the workspace folder itself; name a file in it", p)
	}
	return rel, nil
}

// statFile lstat()s a workspace file without following symbolic links. It
// reports exists false for a missing file and refuses what is not a regular
// file.
func (x *Index) statFile(p, rel string) (stat, bool, error) {
	st, err := x.walk.statPath(rel)
	if err != nil && !errors.Is(err, unix.ELOOP) && x.throughSymlink(rel) {
		err = unix.ELOOP
	}
	switch {
	case err == nil:
	case isNotExist(err):
		return stat{}, false, nil
	case errors.Is(err, unix.ELOOP):
		return stat{}, false, errorf(CodeNotRegular, err, "%q goes through a symbolic link; provenance is recorded for regular files reached without symbolic links. Ask about the path the link points to", p)
	case errors.Is(err, unix.EXDEV):
		return stat{}, false, errorf(CodeNotRegular, err, "%q leaves the workspace", p)
	default:
		return stat{}, false, fmt.Errorf("provenance: stat %s: %w", rel, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return statOf(&st), true, nil
	case unix.S_IFDIR:
		return stat{}, false, errorf(CodeNotRegular, nil, "%q is a directory; provenance is recorded per file. Call list_files to see the files in it", p)
	case unix.S_IFLNK:
		return stat{}, false, errorf(CodeNotRegular, nil, "%q is a symbolic link; scimcp never follows links for provenance. Ask about the file it points to", p)
	}
	return stat{}, false, errorf(CodeNotRegular, nil, "%q is not a regular file; provenance is recorded for regular files only", p)
}

// throughSymlink reports whether a folder on the way to rel is a symbolic
// link (the kernel reports some of those as ENOTDIR).
func (x *Index) throughSymlink(rel string) bool {
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		if fi, err := x.ws.Root().Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// current returns the latest revision of a path, or nil.
func (x *Index) current(rel string) (*Revision, error) {
	var out *Revision
	err := x.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketHistory).Cursor()
		prefix := historyKey(rel, 0)[:len(rel)+1]
		k, _ := seekLast(c, prefix)
		if k == nil {
			return nil
		}
		seq := k[len(prefix):]
		v := tx.Bucket(bucketRevisions).Get(seq)
		if v == nil {
			return nil
		}
		r, err := decodeRevision(tx, v)
		if err != nil {
			return err
		}
		out = &r
		return nil
	})
	return out, err
}

// seekLast positions c on the last key with the prefix.
func seekLast(c *bolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := append(bytes.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	k, v := c.Seek(end)
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil, nil
	}
	return k, v
}

// FileProvenance is what the index knows of one path.
type FileProvenance struct {
	Observation
	// History is the path's revisions, newest first, at most the limit
	// asked for; Total counts them all.
	History []Revision
	Total   int
}

// File returns a path's provenance after bringing its record up to date
// (see Observe): its current revision and up to limit revisions, newest
// first (0: DefaultHistory; at most MaxHistory). A path that neither exists
// nor has history is refused.
func (x *Index) File(ctx context.Context, p string, limit int, seenBy string) (FileProvenance, error) {
	if limit <= 0 {
		limit = DefaultHistory
	}
	limit = min(limit, MaxHistory)
	obs, err := x.Observe(ctx, p, seenBy)
	if err != nil {
		return FileProvenance{}, err
	}
	fp := FileProvenance{Observation: obs}
	err = x.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketHistory).Cursor()
		prefix := historyKey(obs.Path, 0)[:len(obs.Path)+1]
		revs := tx.Bucket(bucketRevisions)
		for k, _ := seekLast(c, prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
			fp.Total++
			if len(fp.History) >= limit {
				continue
			}
			v := revs.Get(k[len(prefix):])
			if v == nil {
				continue
			}
			r, err := decodeRevision(tx, v)
			if err != nil {
				return err
			}
			fp.History = append(fp.History, r)
		}
		return nil
	})
	if err != nil {
		return fp, err
	}
	if fp.Total == 0 && !fp.Exists {
		if fp.Pending != "" {
			return fp, nil
		}
		return fp, errorf(CodeNotFound, nil, "%q does not exist in the workspace and has no recorded history; call list_files to see the files that do", p)
	}
	return fp, nil
}

// Revision returns one revision by id.
func (x *Index) Revision(id string) (Revision, error) {
	seq, ok := parseRevID(id)
	if !ok {
		return Revision{}, errorf(CodeUnknownRevision, nil, "%q is not a revision id; revision ids look like rev_000000000000002a and are listed in a file's history", id)
	}
	var r Revision
	var found bool
	err := x.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRevisions).Get(be64(seq))
		if v == nil {
			return nil
		}
		var err error
		r, err = decodeRevision(tx, v)
		found = err == nil
		return err
	})
	if err != nil {
		return Revision{}, err
	}
	if !found {
		return Revision{}, errorf(CodeUnknownRevision, nil, "no revision %s; get_file_provenance lists a file's revisions", id)
	}
	return r, nil
}

// OpenContent opens the kept content of a revision, verified against its
// hash. A deletion has no content; a revision above the content cap kept
// only its hash; a blob whose bytes no longer match is reported as corrupt
// and never served.
func (x *Index) OpenContent(r Revision) (*cas.File, error) {
	switch {
	case r.Change == Deleted:
		return nil, errorf(CodeNoContent, nil, "revision %s records the deletion of %s; it has no content. Read the revision before it (%s)", r.ID, r.Path, orNone(r.Previous))
	case !r.ContentKept:
		return nil, errorf(CodeNoContent, nil, "the content of revision %s (%d bytes) was not kept: %s. Its hash is %s", r.ID, r.Size, orNone(r.ContentNote), r.Hash)
	}
	f, err := x.cas.Open(r.Hash, r.Size)
	switch {
	case errors.Is(err, cas.ErrCorrupt):
		return nil, errorf(CodeCorrupt, err, "the stored content of revision %s is damaged (its bytes no longer match hash %s); scimcp will not serve it. The data folder needs attention", r.ID, r.Hash)
	case errors.Is(err, cas.ErrNotFound):
		return nil, errorf(CodeCorrupt, err, "the stored content of revision %s (hash %s) is missing from the data folder; scimcp cannot serve it", r.ID, r.Hash)
	case err != nil:
		return nil, err
	}
	return f, nil
}

// MediaType sniffs a revision's kept content: its media type and whether it
// is binary (see workspace.Sniff).
func (x *Index) MediaType(r Revision) (string, bool, error) {
	f, err := x.OpenContent(r)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	head := make([]byte, min(f.Size(), workspace.SniffBytes))
	if _, err := f.ReadAt(head, 0); err != nil && len(head) > 0 && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("provenance: read %s: %w", r.ID, err)
	}
	mt, bin := workspace.Sniff(r.Path, head)
	return mt, bin, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// RevisionPage is one page of a revision's content, or the description of
// binary content.
type RevisionPage struct {
	Revision  Revision
	MediaType string
	Binary    bool
	Page      workspace.Page // zero for binary content
}

// ReadRevision reads one page of a revision's kept content with read_file's
// paging (see workspace.ReadPage): at most limit lines (0:
// workspace.MaxPageLines) and workspace.MaxPageBytes, after offset lines.
// Binary content is described, never returned.
func (x *Index) ReadRevision(id string, offset, limit int) (RevisionPage, error) {
	r, err := x.Revision(id)
	if err != nil {
		return RevisionPage{}, err
	}
	f, err := x.OpenContent(r)
	if err != nil {
		return RevisionPage{Revision: r}, err
	}
	defer f.Close()
	head := make([]byte, min(f.Size(), workspace.SniffBytes))
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return RevisionPage{Revision: r}, fmt.Errorf("provenance: read %s: %w", r.ID, err)
	}
	out := RevisionPage{Revision: r}
	out.MediaType, out.Binary = workspace.Sniff(r.Path, head)
	if out.Binary {
		return out, nil
	}
	out.Page, err = workspace.ReadPage(f, f.Size(), x.lineIndex(r.Hash, f.Size()), offset, limit)
	return out, err
}

// lineIndex returns the shared line index of some content; content is
// immutable under its hash, so an index never goes stale.
func (x *Index) lineIndex(hash string, size int64) *workspace.LineIndex {
	x.idxMu.Lock()
	defer x.idxMu.Unlock()
	if idx, ok := x.idx[hash]; ok {
		return idx
	}
	if x.idx == nil {
		x.idx = map[string]*workspace.LineIndex{}
	}
	idx := workspace.NewLineIndex(size)
	x.idx[hash] = idx
	x.idxOrder = append(x.idxOrder, hash)
	if len(x.idxOrder) > lineIndexCache {
		delete(x.idx, x.idxOrder[0])
		x.idxOrder = x.idxOrder[1:]
	}
	return idx
}
