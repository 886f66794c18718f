package artifacts

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
)

// URIPrefix starts every artifact resource URI.
const URIPrefix = "scimcp://artifacts/"

// URI names an artifact version as an MCP resource; version 0 names the
// latest version.
func URI(id string, version int) string {
	if version <= 0 {
		return URIPrefix + id
	}
	return fmt.Sprintf("%s%s/v%d", URIPrefix, id, version)
}

// ParseURI reads a URI made by URI: the artifact id and the version (0 for
// the latest).
func ParseURI(uri string) (string, int, error) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", 0, refusef(CodeInvalidURI, "%q is not an artifact URI; they look like %sart_0123456789abcdef or %sart_0123456789abcdef/v2", uri, URIPrefix, URIPrefix)
	}
	id, ver, hasVer := strings.Cut(rest, "/")
	if !idPattern.MatchString(id) {
		return "", 0, refusef(CodeInvalidURI, "%q does not name an artifact id (art_ and 16 hex digits)", uri)
	}
	if !hasVer {
		return id, 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(ver, "v"))
	if !strings.HasPrefix(ver, "v") || err != nil || n < 1 || strconv.Itoa(n) != ver[1:] {
		return "", 0, refusef(CodeInvalidURI, "%q: the version part must be v1, v2, ...", uri)
	}
	return id, n, nil
}

// Listed is an artifact with its creation snapshot (version 1) and its
// latest version.
type Listed struct {
	Artifact
	First  Version
	Last   Version
	Folder string // the virtual folder it sits in ("" at the top)
}

// List returns every artifact, sorted by name, and the virtual folders the
// names form (sorted; a folder "a/b" implies "a").
func (s *Store) List() ([]Listed, []string, error) {
	var out []Listed
	folders := map[string]bool{}
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNames).ForEach(func(name, id []byte) error {
			a, ok, err := getArtifact(tx, string(id))
			if err != nil || !ok {
				return err
			}
			l := Listed{Artifact: a}
			if l.First, err = getVersion(tx, a.ID, 1); err != nil {
				return err
			}
			if l.Last, err = getVersion(tx, a.ID, a.Latest); err != nil {
				return err
			}
			if i := strings.LastIndexByte(a.Name, '/'); i >= 0 {
				l.Folder = a.Name[:i]
			}
			for i := strings.IndexByte(a.Name, '/'); i >= 0; i = next(a.Name, i) {
				folders[a.Name[:i]] = true
			}
			out = append(out, l)
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	dirs := make([]string, 0, len(folders))
	for f := range folders {
		dirs = append(dirs, f)
	}
	sort.Strings(dirs)
	return out, dirs, nil
}

// Get resolves an artifact by id or by name (exactly one). A name that is
// a virtual folder is refused with the names inside it.
func (s *Store) Get(id, name string) (Artifact, error) {
	if (id == "") == (name == "") {
		return Artifact{}, refusef(CodeUnknown, "give exactly one of artifact_id or name")
	}
	var a Artifact
	var found bool
	var inside []string
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		var err error
		if id != "" {
			if !idPattern.MatchString(id) {
				return nil
			}
			a, found, err = getArtifact(tx, id)
			return err
		}
		if a, found, err = s.byName(tx, name); err != nil || found {
			return err
		}
		c := tx.Bucket(bucketNames).Cursor()
		prefix := []byte(name + "/")
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(inside) < 10; k, _ = c.Next() {
			inside = append(inside, string(k))
		}
		return nil
	})
	switch {
	case err != nil:
		return Artifact{}, err
	case found:
		return a, nil
	case id != "" && !idPattern.MatchString(id):
		return Artifact{}, refusef(CodeUnknown, "%q is not an artifact id; ids look like art_0123456789abcdef. Call list_artifacts to see them, or pass the name instead", id)
	case id != "":
		return Artifact{}, refusef(CodeUnknown, "no artifact %s; call list_artifacts to see the artifacts of this project", id)
	case len(inside) > 0:
		return Artifact{}, refusef(CodeNotFolder, "%q is a virtual folder, not an artifact; it holds %s. Read one of them", name, quoteList(inside))
	}
	return Artifact{}, refusef(CodeUnknown, "no artifact named %q; call list_artifacts to see the artifacts of this project", name)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// Version returns version v of an artifact (0: the latest).
func (s *Store) Version(a Artifact, v int) (Version, error) {
	if v < 0 || v > a.Latest {
		return Version{}, refusef(CodeUnknownVersion, "artifact %q (%s) has no version %d; its versions are 1 to %d (omit version for the latest)", a.Name, a.ID, v, a.Latest)
	}
	if v == 0 {
		v = a.Latest
	}
	var out Version
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		var err error
		out, err = getVersion(tx, a.ID, v)
		return err
	})
	return out, err
}

// Versions returns every version of an artifact, oldest first.
func (s *Store) Versions(id string) ([]Version, error) {
	var out []Version
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketVersions).Cursor()
		prefix := append([]byte(id), 0)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var ver Version
			if err := json.Unmarshal(v, &ver); err != nil {
				return err
			}
			out = append(out, ver)
		}
		return nil
	})
	return out, err
}

// ReadResult is one page of an artifact version, or the description of a
// binary one.
type ReadResult struct {
	Artifact Artifact
	Version  Version
	Page     workspace.Page // zero for binary versions
}

// Read reads one page of a version (0: the latest) of the artifact named by
// id or name, with read_file's paging: at most limit lines (0:
// workspace.MaxPageLines) and workspace.MaxPageBytes, starting after offset
// lines. Binary versions return their description only, never their bytes.
// Content whose bytes no longer match the recorded hash is refused.
func (s *Store) Read(id, name string, version, offset, limit int) (ReadResult, error) {
	a, err := s.Get(id, name)
	if err != nil {
		return ReadResult{}, err
	}
	v, err := s.Version(a, version)
	if err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{Artifact: a, Version: v}
	if v.Binary {
		return res, nil
	}
	f, err := s.open(v)
	if err != nil {
		return res, err
	}
	defer f.Close()
	res.Page, err = workspace.ReadPageWithin(f, v.Size, s.lineIndex(v), offset, limit, workspace.MaxPageLines, workspace.MaxPageBytes)
	return res, err
}

// open opens a version's content, verified against its hash.
func (s *Store) open(v Version) (*cas.File, error) {
	f, err := s.cfg.CAS.Open(v.Hash, v.Size)
	switch {
	case errors.Is(err, cas.ErrCorrupt):
		return nil, refusef(CodeCorrupt, "the stored content of artifact %s version %d is damaged (its bytes no longer match hash %s); scimcp will not serve it. The data folder needs attention", v.ArtifactID, v.Version, v.Hash)
	case errors.Is(err, cas.ErrNotFound):
		return nil, refusef(CodeCorrupt, "the stored content of artifact %s version %d (hash %s) is missing from the data folder", v.ArtifactID, v.Version, v.Hash)
	}
	return f, err
}

// lineIndex returns the shared line index of a version's content; content
// is immutable, so an index never goes stale.
func (s *Store) lineIndex(v Version) *workspace.LineIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if idx, ok := s.index[v.Hash]; ok {
		return idx
	}
	idx := workspace.NewLineIndex(v.Size)
	s.index[v.Hash] = idx
	s.order = append(s.order, v.Hash)
	if len(s.order) > lineIndexCache {
		delete(s.index, s.order[0])
		s.order = s.order[1:]
	}
	return idx
}

// Resource describes an artifact as an MCP resource.
type Resource struct {
	URI         string
	Name        string // the logical name
	Title       string
	Description string
	MimeType    string
	Size        int64
	ArtifactID  string
	Version     int
	Preview     Preview
}

func resourceOf(a Artifact, v Version, uri string) Resource {
	desc := a.Description
	if desc == "" {
		desc = fmt.Sprintf("Project artifact %s, version %d of %d, declared from %s", a.Name, v.Version, a.Latest, v.SourcePath)
	}
	return Resource{
		URI: uri, Name: a.Name, Title: fmt.Sprintf("%s (v%d)", a.Name, v.Version), Description: desc,
		MimeType: v.MediaType, Size: v.Size, ArtifactID: a.ID, Version: v.Version, Preview: v.Preview,
	}
}

// Resources lists every artifact as a resource whose URI names its latest
// version (scimcp://artifacts/<id>); each version stays readable at
// scimcp://artifacts/<id>/v<n>.
func (s *Store) Resources() ([]Resource, error) {
	list, _, err := s.List()
	if err != nil {
		return nil, err
	}
	out := make([]Resource, len(list))
	for i, l := range list {
		out[i] = resourceOf(l.Artifact, l.Last, URI(l.ID, 0))
	}
	return out, nil
}

// ReadResource returns the whole content of the version a URI names, if it
// has at most max bytes (0: DefaultResourceBytes). It is for clients
// showing artifacts to people; the model pages through read_artifact.
func (s *Store) ReadResource(uri string, max int64) (Resource, []byte, error) {
	if max <= 0 {
		max = DefaultResourceBytes
	}
	id, ver, err := ParseURI(uri)
	if err != nil {
		return Resource{}, nil, err
	}
	a, err := s.Get(id, "")
	if err != nil {
		return Resource{}, nil, err
	}
	v, err := s.Version(a, ver)
	if err != nil {
		return Resource{}, nil, err
	}
	r := resourceOf(a, v, uri)
	if v.Size > max {
		return r, nil, refusef(CodeTooLarge, "artifact %s version %d has %d bytes; resources are served whole up to %d bytes. Page through it with read_artifact", a.Name, v.Version, v.Size, max)
	}
	f, err := s.open(v)
	if err != nil {
		return r, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return r, nil, err
	}
	if cas.ValidHash(v.Hash) && hashOf(data) != v.Hash {
		return r, nil, refusef(CodeCorrupt, "the stored content of artifact %s version %d changed while it was read; scimcp will not serve it", a.ID, v.Version)
	}
	return r, data, nil
}

func hashOf(b []byte) string {
	h := cas.Hasher()
	h.Write(b)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// LinksForPath lists the artifact versions declared from a workspace path,
// oldest first, for get_file_provenance and PROV exports.
func (s *Store) LinksForPath(rel string) ([]provenance.ArtifactLink, error) {
	var out []provenance.ArtifactLink
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPaths).Cursor()
		prefix := append([]byte(rel), 0)
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			rest := k[len(prefix):]
			if len(rest) < 9 || rest[len(rest)-9] != 0 {
				continue
			}
			id := string(rest[:len(rest)-9])
			n := int(binary.BigEndian.Uint64(rest[len(rest)-8:]))
			a, ok, err := getArtifact(tx, id)
			if err != nil || !ok {
				return err
			}
			v, err := getVersion(tx, id, n)
			if err != nil {
				return err
			}
			out = append(out, provenance.ArtifactLink{
				ArtifactID: id, Name: a.Name, Version: n, Hash: v.Hash, Size: v.Size, SourcePath: v.SourcePath,
				RevisionID: v.FileRevision, Declared: v.Declared, Session: v.Session, URI: URI(id, n),
			})
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Declared.Before(out[j].Declared) })
	return out, err
}

// Hashes returns the content hashes of every artifact version: blobs the
// CAS must keep whatever else lets go of them.
func (s *Store) Hashes() (map[string]bool, error) {
	out := map[string]bool{}
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVersions).ForEach(func(k, v []byte) error {
			var ver struct {
				Hash string `json:"hash"`
			}
			if err := json.Unmarshal(v, &ver); err != nil {
				return fmt.Errorf("artifact version %q: %w", k, err)
			}
			out[ver.Hash] = true
			return nil
		})
	})
	return out, err
}
