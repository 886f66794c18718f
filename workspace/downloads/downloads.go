// Package downloads performs artifact_download: it turns what an upstream MCP
// result offered (a resource link, an embedded resource, an http(s) URL) into
// a workspace file with recorded provenance and a registered Project
// Artifact, and keeps a job record per download so a later call (such as
// paper_extract_pdf) can name the downloaded file by its job. It never
// parses the content it downloads.
//
// The package knows nothing about MCP transports: asking the user for
// permission and reading a source's resources belong to the caller.
package downloads

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/fetch"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Defaults and bounds.
const (
	// DefaultDir is the workspace folder downloads go to when no
	// destinationPath is given.
	DefaultDir = "downloads"
	// MaxNameBytes bounds a file name the server derives from a URI.
	MaxNameBytes = 120
	// maxSuffix bounds the "-2", "-3", ... tried for a taken default name.
	maxSuffix = 1000
)

// Job states. completed, failed, declined and cancelled are terminal.
const (
	StateDownloading = "downloading"
	StateCompleted   = "completed"
	StateFailed      = "failed"
	StateDeclined    = "declined"
	StateCancelled   = "cancelled"
)

// Job is the record of one artifact_download.
type Job struct {
	ID           string    `json:"artifactJobId"`
	Owner        string    `json:"-"`
	Session      string    `json:"session"`
	InvocationID string    `json:"mcpInvocationId"`
	Source       string    `json:"source"`
	Tool         string    `json:"tool"`
	Candidate    Candidate `json:"candidate"`
	State        string    `json:"state"`
	Error        string    `json:"error,omitempty"`
	// Permission says who allowed the download: "user" (asked through the
	// client) or "policy" (the server's configuration).
	Permission      string    `json:"permission,omitempty"`
	Path            string    `json:"path,omitempty"`
	FinalURL        string    `json:"final_url,omitempty" jsonschema:"the URL after redirects (http downloads)"`
	Bytes           int64     `json:"bytes,omitempty"`
	SHA256          string    `json:"sha256,omitempty"`
	MediaType       string    `json:"media_type,omitempty"`
	RevisionID      string    `json:"revision_id,omitempty" jsonschema:"the file revision provenance recorded"`
	ArtifactID      string    `json:"artifact_id,omitempty"`
	ArtifactName    string    `json:"artifact_name,omitempty"`
	ArtifactVersion int       `json:"artifact_version,omitempty"`
	Created         time.Time `json:"created"`
	Ended           time.Time `json:"ended,omitzero"`
}

// Terminal reports whether the job has ended.
func (j Job) Terminal() bool { return j.State != StateDownloading }

var bucketJobs = []byte("download_jobs")

// Config configures a Service.
type Config struct {
	Store      *store.Store
	Workspace  *workspace.Workspace
	Provenance *provenance.Index
	Artifacts  *artifacts.Store
	Fetch      *fetch.Client
	// TempDir holds bodies while they download (the data folder's tmp).
	TempDir string
	// MaxBytes caps one download (0: fetch.DefaultMaxBytes).
	MaxBytes int64
}

// Service runs downloads and keeps their job records.
type Service struct {
	cfg Config
	max int64
	mu  sync.Mutex // one destination choice at a time
}

// Error is a refusal the caller can act on.
type Error struct{ Msg string }

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

func refusef(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// New opens the job records. Jobs a previous process left downloading are
// marked failed: their download died with it.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Workspace == nil || cfg.Provenance == nil || cfg.Artifacts == nil || cfg.Fetch == nil {
		return nil, errors.New("downloads: Store, Workspace, Provenance, Artifacts and Fetch are required")
	}
	s := &Service{cfg: cfg, max: cfg.MaxBytes}
	if s.max <= 0 {
		s.max = fetch.DefaultMaxBytes
	}
	if s.cfg.TempDir == "" {
		s.cfg.TempDir = os.TempDir()
	}
	if err := os.MkdirAll(s.cfg.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("downloads: %w", err)
	}
	now := time.Now().UTC()
	err := cfg.Store.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketJobs)
		if err != nil {
			return err
		}
		var lost []record
		b.ForEach(func(k, v []byte) error {
			var r record
			if store.GetJSON(b, k, &r); r.State == StateDownloading {
				lost = append(lost, r)
			}
			return nil
		})
		for _, r := range lost {
			r.State, r.Error, r.Ended = StateFailed, "the server stopped while this download ran; call artifact_download again", now
			if err := store.PutJSON(b, []byte(r.ID), r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("downloads: %w", err)
	}
	return s, nil
}

// MaxBytes returns the cap of one download.
func (s *Service) MaxBytes() int64 { return s.max }

// Request describes one download.
type Request struct {
	Owner, Session string
	InvocationID   string
	Source, Tool   string
	Candidate      Candidate
	Result         []byte // the invocation's raw result (embedded resources)
	Destination    string // workspace path; "" picks downloads/<name>
	Permission     string
	// ReadResource reads a non-http resource link from its source: it
	// returns the raw resources/read result.
	ReadResource func(ctx context.Context, uri string) ([]byte, error)
	// Progress, when set, hears how many bytes an http download has
	// received (total: the declared size, 0 when unknown), at most every
	// ProgressEvery.
	Progress func(received, total int64)
}

// ProgressEvery spaces Request.Progress reports.
const ProgressEvery = 500 * time.Millisecond

// CheckDestination refuses a destinationPath before permission is asked:
// outside the workspace, or taken.
func (s *Service) CheckDestination(p string) error {
	if p == "" {
		return nil
	}
	rel, err := s.cfg.Workspace.Clean(p)
	if err != nil {
		return err
	}
	if rel == "." || strings.HasSuffix(p, "/") {
		return refusef("destinationPath %q names a folder; give a file path such as \"papers/smith2024.pdf\"", p)
	}
	ok, err := s.cfg.Workspace.Exists(rel)
	if err != nil {
		return err
	}
	if ok {
		return refusef("destinationPath %q already exists in the workspace; downloads never overwrite. Give another path, or omit destinationPath to use %s/", p, DefaultDir)
	}
	return nil
}

// Decline records a download the user or the policy refused.
func (s *Service) Decline(req Request, why string) (Job, error) {
	j := s.newJob(req)
	j.State, j.Error, j.Ended = StateDeclined, why, j.Created
	return j, s.put(j)
}

// Download runs one download to its terminal state and returns the job.
// The job is recorded before anything is fetched and updated when it ends.
// Failures of the download itself end the job as failed (or cancelled) and
// are reported in it; the error is for faults of the job store.
func (s *Service) Download(ctx context.Context, req Request) (Job, error) {
	j := s.newJob(req)
	j.State = StateDownloading
	if err := s.put(j); err != nil {
		return j, err
	}
	err := s.run(ctx, req, &j)
	j.Ended = time.Now().UTC()
	switch {
	case err == nil:
		j.State = StateCompleted
	case ctx.Err() != nil && j.Path != "":
		j.State, j.Error = StateCancelled, fmt.Sprintf("the call was cancelled after the file was written to %s (with its provenance) but before it was registered as an artifact", j.Path)
	case ctx.Err() != nil:
		j.State, j.Error = StateCancelled, "the call was cancelled before the download finished; nothing was written to the workspace"
	default:
		j.State, j.Error = StateFailed, err.Error()
	}
	return j, s.put(j)
}

func (s *Service) run(ctx context.Context, req Request, j *Job) error {
	if req.Destination != "" {
		if err := s.CheckDestination(req.Destination); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(s.cfg.TempDir, "download-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()

	// 1. The bytes, into a temporary file outside the workspace.
	c := req.Candidate
	started := time.Now().UTC()
	declared := c.MediaType
	h := sha256.New()
	var n int64
	switch {
	case c.Kind == KindEmbedded:
		data, mt, err := embeddedData(req.Result, c)
		if err != nil {
			return err
		}
		if mt != "" {
			declared = mt
		}
		if int64(len(data)) > s.max {
			return refusef("the embedded resource is %d bytes, over the download cap of %d", len(data), s.max)
		}
		if _, err := io.MultiWriter(tmp, h).Write(data); err != nil {
			return fmt.Errorf("storing the download: %w", err)
		}
		n = int64(len(data))
	case isHTTP(c.URI):
		if c.Size > s.max {
			return refusef("%s is declared as %d bytes, over the download cap of %d; nothing was fetched", c.URI, c.Size, s.max)
		}
		var dst io.Writer = tmp
		if req.Progress != nil {
			dst = &progressWriter{w: tmp, total: c.Size, report: req.Progress}
		}
		res, err := s.cfg.Fetch.Fetch(ctx, c.URI, dst)
		if err != nil {
			return err
		}
		n, j.FinalURL = res.Bytes, res.URL
		h = nil
		j.SHA256 = res.SHA256
		if mt, _, err := mime.ParseMediaType(res.ContentType); err == nil && mt != "application/octet-stream" {
			declared = mt
		}
	default:
		if req.ReadResource == nil {
			return refusef("%s is not an http(s) URL and its source cannot be asked for it", c.URI)
		}
		raw, err := req.ReadResource(ctx, c.URI)
		if err != nil {
			return fmt.Errorf("reading %s from MCP source %s: %w", c.URI, req.Source, err)
		}
		data, mt, err := ResourceData(raw, c.URI)
		if err != nil {
			return err
		}
		if mt != "" {
			declared = mt
		}
		if int64(len(data)) > s.max {
			return refusef("%s is %d bytes, over the download cap of %d", c.URI, len(data), s.max)
		}
		if _, err := io.MultiWriter(tmp, h).Write(data); err != nil {
			return fmt.Errorf("storing the download: %w", err)
		}
		n = int64(len(data))
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if h != nil {
		j.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	j.Bytes = n
	head := make([]byte, workspace.SniffBytes)
	hn, _ := tmp.ReadAt(head, 0)
	sniffed, _ := workspace.Sniff(c.Name, head[:hn])
	j.MediaType = sniffed
	if sniffed == "application/octet-stream" || sniffed == "text/plain" {
		if declared != "" {
			j.MediaType = declared
		}
	}

	// 2. Into the workspace, recorded as written by this download.
	ended := time.Now().UTC()
	writer := provenance.Writer{
		Kind: provenance.KindDownload, Session: req.Session, Started: &started, Ended: &ended, State: StateCompleted,
		Source: &provenance.Source{
			URI: c.URI, Hash: j.SHA256, InvocationID: req.InvocationID, MCPSource: req.Source, MCPTool: req.Tool,
			CandidateID: c.ID, DownloadJobID: j.ID, MediaType: j.MediaType, Bytes: n,
		},
		Note: fmt.Sprintf("downloaded by artifact_download %s: candidate %s (%s) of MCP invocation %s (source %s, tool %s)", j.ID, c.ID, c.Kind, req.InvocationID, req.Source, req.Tool),
	}
	if j.FinalURL != "" && j.FinalURL != c.URI {
		writer.Note += "; fetched from " + j.FinalURL
	}
	rev, err := s.place(ctx, req.Destination, c, j, tmp, writer)
	if err != nil {
		return err
	}
	j.Path, j.RevisionID = rev.Path, rev.ID

	// 3. Registered as a Project Artifact.
	desc := fmt.Sprintf("Downloaded from MCP source %s (tool %s, invocation %s): %s", req.Source, req.Tool, req.InvocationID, c.URI)
	if len(desc) > artifacts.MaxDescriptionBytes {
		desc = desc[:artifacts.MaxDescriptionBytes]
		for len(desc) > 0 && !utf8.ValidString(desc) {
			desc = desc[:len(desc)-1]
		}
	}
	dr, err := s.cfg.Artifacts.Declare(ctx, artifacts.DeclareRequest{Paths: []string{rev.Path}, Description: desc, Session: req.Session})
	if err != nil {
		return fmt.Errorf("the file was written to %s but registering it as an artifact failed: %w", rev.Path, err)
	}
	e := dr.Entries[0]
	if !e.OK {
		return fmt.Errorf("the file was written to %s but registering it as an artifact failed: %s", rev.Path, e.Error)
	}
	j.ArtifactID, j.ArtifactName, j.ArtifactVersion = e.Artifact.ID, e.Artifact.Name, e.Version.Version
	return nil
}

// place copies the downloaded body into the workspace at the destination
// (or the first free downloads/<name>), under the provenance lock.
func (s *Service) place(ctx context.Context, dest string, c Candidate, j *Job, body *os.File, w provenance.Writer) (provenance.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := []string{dest}
	if dest == "" {
		base := fileName(c, j.MediaType)
		names = names[:0]
		ext := path.Ext(base)
		stem := strings.TrimSuffix(base, ext)
		names = append(names, path.Join(DefaultDir, base))
		for i := 2; i <= maxSuffix; i++ {
			names = append(names, path.Join(DefaultDir, stem+"-"+strconv.Itoa(i)+ext))
		}
	}
	for _, name := range names {
		rev, err := s.cfg.Provenance.Write(ctx, name, w, func() error {
			if _, err := body.Seek(0, io.SeekStart); err != nil {
				return err
			}
			_, _, err := s.cfg.Workspace.Create(name, func(dst io.Writer) error {
				_, err := io.Copy(dst, body)
				return err
			})
			return err
		})
		if workspace.IsCode(err, workspace.CodeExists) && dest == "" {
			continue
		}
		return rev, err
	}
	return provenance.Revision{}, refusef("%s/ already holds %d files named like %s; give a destinationPath", DefaultDir, maxSuffix, fileName(c, j.MediaType))
}

// fileName derives a safe file name from a candidate.
func fileName(c Candidate, mediaType string) string {
	name := c.Name
	if name == "" || strings.Contains(name, "/") {
		name = nameOf(c.URI)
	}
	name = strings.TrimLeft(workspace.SafeName(name), "._")
	if len(name) > MaxNameBytes {
		ext := path.Ext(name)
		if len(ext) > 16 {
			ext = ""
		}
		name = name[:MaxNameBytes-len(ext)] + ext
	}
	if name == "" {
		name = "download"
	}
	if path.Ext(name) == "" {
		if ext := extensionFor(mediaType); ext != "" {
			name += ext
		}
	}
	return name
}

var knownExt = map[string]string{
	"application/pdf": ".pdf", "application/json": ".json", "text/plain": ".txt", "text/csv": ".csv",
	"text/html": ".html", "text/markdown": ".md", "image/png": ".png", "image/jpeg": ".jpg", "application/zip": ".zip",
	"application/gzip": ".gz", "application/xml": ".xml", "text/xml": ".xml",
}

func extensionFor(mt string) string {
	if e, ok := knownExt[mt]; ok {
		return e
	}
	if exts, _ := mime.ExtensionsByType(mt); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// progressWriter reports the bytes written through it, spaced by
// ProgressEvery.
type progressWriter struct {
	w      io.Writer
	n      int64
	total  int64
	last   time.Time
	report func(received, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if now := time.Now(); now.Sub(p.last) >= ProgressEvery {
		p.last = now
		p.report(p.n, p.total)
	}
	return n, err
}

func isHTTP(uri string) bool {
	return strings.HasPrefix(strings.ToLower(uri), "http://") || strings.HasPrefix(strings.ToLower(uri), "https://")
}

func (s *Service) newJob(req Request) Job {
	var b [8]byte
	rand.Read(b[:])
	return Job{ID: "dl_" + hex.EncodeToString(b[:]), Owner: req.Owner, Session: req.Session, InvocationID: req.InvocationID,
		Source: req.Source, Tool: req.Tool, Candidate: req.Candidate, Permission: req.Permission, Created: time.Now().UTC()}
}

type record struct {
	Job
	Owner string `json:"owner"`
}

func (s *Service) put(j Job) error {
	return s.cfg.Store.Update(func(tx *bolt.Tx) error {
		return store.PutJSON(tx.Bucket(bucketJobs), []byte(j.ID), record{Job: j, Owner: j.Owner})
	})
}

// Job returns a job of owner.
func (s *Service) Job(owner, id string) (Job, bool, error) {
	var r record
	var ok bool
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = store.GetJSON(tx.Bucket(bucketJobs), []byte(id), &r)
		return err
	})
	if err != nil || !ok || r.Owner != owner {
		return Job{}, false, err
	}
	r.Job.Owner = r.Owner
	return r.Job, true, nil
}
