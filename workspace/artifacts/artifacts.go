// Package artifacts keeps Project Artifacts: workspace files a user or an
// agent declared as results worth keeping, project-wide and across sessions.
// Declaring snapshots a file's current content into the content-addressed
// store as a new version of a named artifact; later changes to the file do
// not touch the versions already declared. Logical names with slashes
// ("figures/fig1.png") form virtual folders for a client's sidebar without
// moving any file.
//
// Records live in bbolt (buckets artifacts, artifact_names,
// artifact_versions, artifact_paths); content lives in the CAS. Generated
// files are never artifacts until declared (the seed: "Generated files
// retain diff and derivation audit but become Artifacts only after
// declare_artifact").
//
// Artifacts are also MCP resources, addressed by URIs of the form
//
//	scimcp://artifacts/<artifact_id>            the latest version
//	scimcp://artifacts/<artifact_id>/v<version> one version, immutable
//
// The package knows nothing about MCP; refusals are *Error values.
package artifacts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Limits. MaxDeclarePaths is the seed's "path or paths (1–50)".
const (
	MaxDeclarePaths     = 50
	MaxNameBytes        = 512
	MaxDescriptionBytes = 4096
	// DefaultMaxVersionBytes caps one artifact version; a larger file is
	// refused (its entry fails, the others go on).
	DefaultMaxVersionBytes = 4 << 30
	// DefaultResourceBytes caps what ReadResource returns whole.
	DefaultResourceBytes = 16 << 20
	// lineIndexCache is how many versions keep their line index for paging.
	lineIndexCache = 64
)

var (
	bucketArtifacts = []byte("artifacts")         // id → Artifact
	bucketNames     = []byte("artifact_names")    // name → id
	bucketVersions  = []byte("artifact_versions") // id \x00 be64(version) → Version
	bucketPaths     = []byte("artifact_paths")    // source path \x00 id \x00 be64(version) → nil
)

// Artifact is one Project Artifact.
type Artifact struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
	Session     string    `json:"session,omitempty"` // that declared version 1
	Latest      int       `json:"latest"`
	Updated     time.Time `json:"updated"`
}

// Version is one declared snapshot of an artifact.
type Version struct {
	ArtifactID string  `json:"artifact_id"`
	Version    int     `json:"version"`
	Hash       string  `json:"hash"`
	Size       int64   `json:"size"`
	MediaType  string  `json:"media_type"`
	Preview    Preview `json:"preview"`
	Binary     bool    `json:"binary"`
	SourcePath string  `json:"source_path"`
	// FileRevision is the file revision the snapshot matches, when
	// provenance recorded one.
	FileRevision string `json:"file_revision,omitempty"`
	// Origin is the writer of that revision: the execution that made the
	// file, or kind unknown.
	Origin      provenance.Writer `json:"origin"`
	Declared    time.Time         `json:"declared"`
	Session     string            `json:"session,omitempty"`
	Description string            `json:"description,omitempty"`
}

// Config configures a Store.
type Config struct {
	Store      *store.Store
	Workspace  *workspace.Workspace
	CAS        *cas.Store
	Provenance *provenance.Index
	// MaxVersionBytes caps one version (0: DefaultMaxVersionBytes).
	MaxVersionBytes int64
	// OnChange, when set, is called after a declaration that created an
	// artifact or a version (the MCP layer sends
	// notifications/resources/list_changed). It runs on the declaring
	// goroutine.
	OnChange func()
}

// Store holds the Project Artifacts of one data folder. It is safe for use
// by many goroutines.
type Store struct {
	cfg Config
	max int64

	mu    sync.Mutex
	index map[string]*workspace.LineIndex // by hash: content never changes
	order []string
}

// beforeSnapshot, when set (tests only), runs after an entry is checked and
// before its file is opened.
var beforeSnapshot func(rel string)

// New opens the artifacts of a data folder.
func New(cfg Config) (*Store, error) {
	if cfg.Store == nil || cfg.Workspace == nil || cfg.CAS == nil || cfg.Provenance == nil {
		return nil, errors.New("artifacts: Store, Workspace, CAS and Provenance are required")
	}
	s := &Store{cfg: cfg, max: cfg.MaxVersionBytes, index: map[string]*workspace.LineIndex{}}
	if s.max <= 0 {
		s.max = DefaultMaxVersionBytes
	}
	err := cfg.Store.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketArtifacts, bucketNames, bucketVersions, bucketPaths} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	return s, nil
}

// MaxVersionBytes returns the cap of one version.
func (s *Store) MaxVersionBytes() int64 { return s.max }

// DeclareRequest asks to declare workspace files as artifacts.
type DeclareRequest struct {
	Paths []string
	// Name is the artifact's logical name for one path; for several paths
	// it is a virtual folder and each artifact is named <Name>/<file name>.
	// Empty: each artifact is named by its workspace path.
	Name        string
	Description string
	Session     string
}

// Entry is the outcome of one path of a declaration.
type Entry struct {
	Path  string // as given
	Clean string // relative to the workspace, when it resolved
	Name  string // the artifact's logical name, when it was decided
	OK    bool
	// Error says why the entry failed; Code is machine-readable.
	Error string
	Code  string
	// For entries that succeeded:
	Artifact    Artifact
	Version     Version
	NewArtifact bool // the name was new
	Unchanged   bool // the content equals the latest version: no new version
	// Pending says the file's writer is not recorded yet (an execution
	// still running may be writing it).
	Pending string
}

// DeclareResult is the outcome of a declaration, entry by entry.
type DeclareResult struct {
	Entries                     []Entry
	Declared, Unchanged, Failed int
}

// Entry error codes.
const (
	CodeDuplicate      = "duplicate"
	CodeNameConflict   = "name_conflict"
	CodeInvalidName    = "invalid_name"
	CodeTooLarge       = "too_large"
	CodeVanished       = "vanished"
	CodeChanged        = "changed_while_read"
	CodeUnknown        = "unknown_artifact"
	CodeUnknownVersion = "unknown_version"
	CodeCorrupt        = "corrupt"
	CodeNotFolder      = "virtual_folder"
	CodeTooMany        = "too_many_paths"
	CodeInvalidURI     = "invalid_uri"
)

// Declare snapshots each path's current content as a new version of its
// artifact. Entries succeed or fail independently; the call itself fails
// only for a request that is wrong as a whole (no path, more than
// MaxDeclarePaths, a bad name or description) or an infrastructure fault.
// Content is streamed into the CAS one file at a time, so 50 large files
// cost one copy buffer of memory, not their size.
func (s *Store) Declare(ctx context.Context, req DeclareRequest) (DeclareResult, error) {
	switch n := len(req.Paths); {
	case n == 0:
		return DeclareResult{}, refusef(CodeTooMany, "give at least one path to declare")
	case n > MaxDeclarePaths:
		return DeclareResult{}, refusef(CodeTooMany, "%d paths given; declare_artifact takes at most %d per call. Split them into several calls", n, MaxDeclarePaths)
	}
	if req.Name != "" {
		if err := ValidateName(req.Name); err != nil {
			return DeclareResult{}, err
		}
	}
	if len(req.Description) > MaxDescriptionBytes || !utf8.ValidString(req.Description) {
		return DeclareResult{}, refusef(CodeInvalidName, "description must be valid UTF-8 of at most %d bytes (it has %d)", MaxDescriptionBytes, len(req.Description))
	}
	res := DeclareResult{Entries: make([]Entry, len(req.Paths))}
	type snap struct {
		i    int
		blob cas.Blob
		fi   os.FileInfo
		head []byte
	}
	var snaps []snap
	byPath, byName := map[string]int{}, map[string]int{}
	for i, p := range req.Paths {
		e := &res.Entries[i]
		e.Path = p
		if ctx.Err() != nil {
			e.fail("cancelled", "the request was cancelled before this entry was declared")
			continue
		}
		rel, err := s.cfg.Workspace.Clean(p)
		if err != nil {
			e.failErr(err)
			continue
		}
		e.Clean = rel
		if j, dup := byPath[rel]; dup {
			e.fail(CodeDuplicate, fmt.Sprintf("%q is the same file as entry %d (%q); each file is declared once per call", p, j+1, req.Paths[j]))
			continue
		}
		byPath[rel] = i
		name := rel
		switch {
		case req.Name != "" && len(req.Paths) == 1:
			name = req.Name
		case req.Name != "":
			name = req.Name + "/" + path.Base(rel)
		}
		if err := ValidateName(name); err != nil {
			e.failErr(err)
			continue
		}
		e.Name = name
		if j, dup := byName[name]; dup {
			e.fail(CodeDuplicate, fmt.Sprintf("entry %d (%q) already takes the name %q in this call; declare files with the same file name in separate calls with different names", j+1, req.Paths[j], name))
			continue
		}
		byName[name] = i
		blob, fi, head, err := s.snapshot(rel, p)
		if err != nil {
			e.failErr(err)
			continue
		}
		snaps = append(snaps, snap{i: i, blob: blob, fi: fi, head: head})
	}

	// Provenance: which revision (and writer) each snapshot is.
	for _, sn := range snaps {
		e := &res.Entries[sn.i]
		v := &e.Version
		v.Hash, v.Size, v.SourcePath = sn.blob.Hash, sn.blob.Size, e.Clean
		v.Preview, v.MediaType, v.Binary = InferPreview(e.Clean, sn.head, sn.blob.Size <= int64(len(sn.head)))
		v.Origin = provenance.Writer{Kind: provenance.KindUnknown, Note: "no file revision matches this snapshot"}
		obs, err := s.cfg.Provenance.Note(e.Clean, sn.fi, sn.blob.Hash, sn.blob.Size, "declare_artifact")
		if err != nil {
			return res, err
		}
		switch {
		case obs.Pending != "":
			e.Pending = obs.Pending
			v.Origin.Note = "not attributed yet: " + obs.Pending
		case obs.Current != nil && obs.Current.Hash == sn.blob.Hash:
			v.FileRevision, v.Origin = obs.Current.ID, obs.Current.Writer
		}
	}

	now := time.Now().UTC()
	changed := false
	err := s.cfg.Store.Update(func(tx *bolt.Tx) error {
		changed = false
		for _, sn := range snaps {
			e := &res.Entries[sn.i]
			v := &e.Version
			v.Declared, v.Session, v.Description = now, req.Session, req.Description
			e.OK, e.Error, e.Code, e.NewArtifact, e.Unchanged = false, "", "", false, false
			a, found, err := s.byName(tx, e.Name)
			if err != nil {
				return err
			}
			if !found {
				if msg := nameConflict(tx, e.Name); msg != "" {
					e.fail(CodeNameConflict, msg)
					continue
				}
				a = Artifact{ID: newID(), Name: e.Name, Created: now, Session: req.Session}
				if err := tx.Bucket(bucketNames).Put([]byte(a.Name), []byte(a.ID)); err != nil {
					return err
				}
				e.NewArtifact = true
			} else {
				latest, err := getVersion(tx, a.ID, a.Latest)
				if err != nil {
					return err
				}
				if latest.Hash == v.Hash {
					e.OK, e.Unchanged, e.Artifact, e.Version = true, true, a, latest
					continue
				}
			}
			a.Latest++
			a.Updated = now
			if req.Description != "" {
				a.Description = req.Description
			}
			v.ArtifactID, v.Version = a.ID, a.Latest
			if err := store.PutJSON(tx.Bucket(bucketArtifacts), []byte(a.ID), a); err != nil {
				return err
			}
			if err := store.PutJSON(tx.Bucket(bucketVersions), versionKey(a.ID, v.Version), v); err != nil {
				return err
			}
			if err := tx.Bucket(bucketPaths).Put(pathKey(v.SourcePath, a.ID, v.Version), nil); err != nil {
				return err
			}
			e.OK, e.Artifact = true, a
			changed = true
		}
		return nil
	})
	if err != nil {
		return DeclareResult{}, fmt.Errorf("artifacts: record declaration: %w", err)
	}
	for _, e := range res.Entries {
		switch {
		case !e.OK:
			res.Failed++
		case e.Unchanged:
			res.Unchanged++
		default:
			res.Declared++
		}
	}
	if changed && s.cfg.OnChange != nil {
		s.cfg.OnChange()
	}
	return res, nil
}

func (e *Entry) fail(code, msg string) { e.OK, e.Code, e.Error = false, code, msg }

func (e *Entry) failErr(err error) {
	var ip interface{ InputProblem() bool }
	code := "error"
	var we *workspace.Error
	var pe *provenance.Error
	var ae *Error
	switch {
	case errors.As(err, &we):
		code = we.Code
	case errors.As(err, &pe):
		code = pe.Code
	case errors.As(err, &ae):
		code = ae.Code
	}
	if errors.As(err, &ip) && ip.InputProblem() {
		e.fail(code, err.Error())
		return
	}
	e.fail("internal", "scimcp could not snapshot this file: "+err.Error())
}

// snapshot streams a file into the CAS and returns its blob, its stat from
// before the read and its first bytes. A file deleted, replaced or changed
// while it is read is refused rather than stored half-written.
func (s *Store) snapshot(rel, given string) (cas.Blob, os.FileInfo, []byte, error) {
	if beforeSnapshot != nil {
		beforeSnapshot(rel)
	}
	f, _, fi, err := s.cfg.Provenance.OpenFile(rel)
	if err != nil {
		if provenance.IsCode(err, provenance.CodeNotFound) {
			return cas.Blob{}, nil, nil, refusef(CodeVanished, "%q does not exist (it may have been deleted before it could be snapshotted); call list_files to see the files that do", given)
		}
		return cas.Blob{}, nil, nil, err
	}
	defer f.Close()
	if fi.Size() > s.max {
		return cas.Blob{}, nil, nil, refusef(CodeTooLarge, "%q has %d bytes; an artifact version holds at most %d bytes", given, fi.Size(), s.max)
	}
	head := &headWriter{max: workspace.SniffBytes}
	blob, err := s.cfg.CAS.PutMax(io.TeeReader(f, head), s.max)
	if err != nil {
		return cas.Blob{}, nil, nil, fmt.Errorf("snapshot %s: %w", rel, err)
	}
	if !blob.Stored {
		return cas.Blob{}, nil, nil, refusef(CodeTooLarge, "%q grew to %d bytes while it was read; an artifact version holds at most %d bytes", given, blob.Size, s.max)
	}
	after, err := f.Stat()
	if err != nil {
		return cas.Blob{}, nil, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if !provenance.SameFile(fi, after) || blob.Size != fi.Size() {
		return cas.Blob{}, nil, nil, refusef(CodeChanged, "%q changed while it was being snapshotted (it is probably still being written); declare it again once it is complete", given)
	}
	return blob, fi, head.b, nil
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	b   []byte
	max int
}

func (h *headWriter) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

var idPattern = regexp.MustCompile(`^art_[0-9a-f]{16}$`)

func newID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "art_" + hex.EncodeToString(b[:])
}

// ValidateName checks an artifact's logical name: valid UTF-8, at most
// MaxNameBytes, no control characters, slash-separated segments that are
// neither empty nor "." or "..", no surrounding spaces, and not shaped like
// an artifact id.
func ValidateName(n string) error {
	bad := func(why string) error {
		return refusef(CodeInvalidName, "name %q is not usable: %s. Names are like \"results/summary.csv\": segments separated by single slashes", n, why)
	}
	switch {
	case n == "":
		return bad("it is empty")
	case len(n) > MaxNameBytes:
		return bad(fmt.Sprintf("it has %d bytes, the limit is %d", len(n), MaxNameBytes))
	case !utf8.ValidString(n):
		return bad("it is not valid UTF-8")
	case strings.TrimSpace(n) != n:
		return bad("it starts or ends with white space")
	case idPattern.MatchString(n):
		return bad("it looks like an artifact id")
	}
	for _, r := range n {
		if unicode.IsControl(r) {
			return bad("it contains a control character")
		}
	}
	for _, seg := range strings.Split(n, "/") {
		switch seg {
		case "":
			return bad("it has an empty segment (a leading, trailing or doubled slash)")
		case ".", "..":
			return bad("it has a \".\" or \"..\" segment")
		}
	}
	return nil
}

// nameConflict says why a new name cannot be used: it is a virtual folder
// (other names continue below it), or one of its folders is an artifact.
func nameConflict(tx *bolt.Tx, name string) string {
	c := tx.Bucket(bucketNames).Cursor()
	prefix := []byte(name + "/")
	if k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
		return fmt.Sprintf("the name %q is a virtual folder holding other artifacts (such as %q); choose another name, or a name inside the folder", name, string(k))
	}
	for i := strings.IndexByte(name, '/'); i >= 0; i = next(name, i) {
		if tx.Bucket(bucketNames).Get([]byte(name[:i])) != nil {
			return fmt.Sprintf("the name %q would put an artifact inside %q, which is an artifact, not a virtual folder; choose another name", name, name[:i])
		}
	}
	return ""
}

func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func versionKey(id string, v int) []byte {
	k := append([]byte(id), 0)
	return binary.BigEndian.AppendUint64(k, uint64(v))
}

func pathKey(p, id string, v int) []byte {
	k := append([]byte(p), 0)
	k = append(k, id...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(v))
}

func (s *Store) byName(tx *bolt.Tx, name string) (Artifact, bool, error) {
	id := tx.Bucket(bucketNames).Get([]byte(name))
	if id == nil {
		return Artifact{}, false, nil
	}
	return getArtifact(tx, string(id))
}

func getArtifact(tx *bolt.Tx, id string) (Artifact, bool, error) {
	var a Artifact
	ok, err := store.GetJSON(tx.Bucket(bucketArtifacts), []byte(id), &a)
	return a, ok, err
}

func getVersion(tx *bolt.Tx, id string, v int) (Version, error) {
	var out Version
	ok, err := store.GetJSON(tx.Bucket(bucketVersions), versionKey(id, v), &out)
	if err == nil && !ok {
		err = fmt.Errorf("artifact %s: version %d is missing", id, v)
	}
	return out, err
}

// Error is a refusal the caller can act on.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

func refusef(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// IsCode reports whether err is an artifacts *Error with the given code.
func IsCode(err error, code string) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Code == code
}
