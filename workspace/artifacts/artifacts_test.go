package artifacts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

type env struct {
	dir, data string
	ws        *workspace.Workspace
	db        *store.Store
	cas       *cas.Store
	prov      *provenance.Index
	s         *Store
	changes   int
}

func newEnv(tb testing.TB, mutate func(*Config)) *env {
	tb.Helper()
	base := tb.TempDir()
	e := &env{dir: filepath.Join(base, "ws"), data: filepath.Join(base, "data")}
	os.MkdirAll(e.dir, 0o755)
	ws, err := workspace.Open(e.dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ws.Close() })
	e.ws, e.dir = ws, ws.Dir()
	e.open(tb, mutate)
	return e
}

func (e *env) open(tb testing.TB, mutate func(*Config)) {
	tb.Helper()
	db, err := store.Open(e.data, store.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := cas.Open(e.data, cas.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := provenance.New(provenance.Config{Store: db, Workspace: e.ws, CAS: c})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Store: db, Workspace: e.ws, CAS: c, Provenance: p, OnChange: func() { e.changes++ }}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.db, e.cas, e.prov, e.s = db, c, p, s
	tb.Cleanup(func() { p.Close(); db.Close() })
}

func (e *env) close() { e.prov.Close(); e.db.Close() }

func (e *env) write(tb testing.TB, rel, content string) {
	tb.Helper()
	p := filepath.Join(e.dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func declare(t *testing.T, e *env, name string, paths ...string) DeclareResult {
	t.Helper()
	res, err := e.s.Declare(context.Background(), DeclareRequest{Paths: paths, Name: name, Session: "s1"})
	if err != nil {
		t.Fatalf("declare %v: %v", paths, err)
	}
	return res
}

func TestDeclareVersionsAndUnchanged(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "results/summary.csv", "a,b\n1,2\n")
	res := declare(t, e, "", "results/summary.csv")
	en := res.Entries[0]
	if !en.OK || !en.NewArtifact || en.Version.Version != 1 || en.Name != "results/summary.csv" || en.Version.Preview != PreviewTable || res.Declared != 1 || e.changes != 1 {
		t.Fatalf("first: %+v", res)
	}
	if en.Version.FileRevision == "" || en.Version.Origin.Kind != provenance.KindUnknown {
		t.Fatalf("origin of a file nobody recorded writing: %+v", en.Version)
	}
	res = declare(t, e, "", "./results//summary.csv")
	if en := res.Entries[0]; !en.OK || !en.Unchanged || en.Version.Version != 1 || res.Unchanged != 1 || e.changes != 1 {
		t.Fatalf("unchanged: %+v", res)
	}
	e.write(t, "results/summary.csv", "a,b\n1,2\n3,4\n")
	res = declare(t, e, "", "results/summary.csv")
	if en := res.Entries[0]; !en.OK || en.NewArtifact || en.Version.Version != 2 || en.Artifact.Latest != 2 || e.changes != 2 {
		t.Fatalf("v2: %+v", res)
	}
	list, dirs, err := e.s.List()
	if err != nil || len(list) != 1 || list[0].First.Version != 1 || list[0].Last.Version != 2 || list[0].Folder != "results" || len(dirs) != 1 || dirs[0] != "results" {
		t.Fatalf("list: %+v %v %v", list, dirs, err)
	}
	// Version 1 still reads its own content.
	r, err := e.s.Read("", "results/summary.csv", 1, 0, 0)
	if err != nil || r.Page.Text != "a,b\n1,2\n" {
		t.Fatalf("v1: %+v %v", r, err)
	}
	r, err = e.s.Read(list[0].ID, "", 0, 0, 0)
	if err != nil || r.Page.Text != "a,b\n1,2\n3,4\n" || r.Version.Version != 2 {
		t.Fatalf("latest: %+v %v", r, err)
	}
}

func TestDeclareLimits(t *testing.T) {
	e := newEnv(t, nil)
	var paths []string
	for i := 0; i < MaxDeclarePaths+1; i++ {
		p := fmt.Sprintf("f/%02d.txt", i)
		e.write(t, p, fmt.Sprintf("file %d\n", i))
		paths = append(paths, p)
	}
	if _, err := e.s.Declare(context.Background(), DeclareRequest{Paths: paths}); !IsCode(err, CodeTooMany) || !strings.Contains(err.Error(), "at most 50") {
		t.Fatalf("51 paths: %v", err)
	}
	if list, _, _ := e.s.List(); len(list) != 0 {
		t.Fatalf("a refused call declared %d", len(list))
	}
	if _, err := e.s.Declare(context.Background(), DeclareRequest{}); !IsCode(err, CodeTooMany) {
		t.Fatalf("0 paths: %v", err)
	}
	res := declare(t, e, "", paths[:MaxDeclarePaths]...)
	if res.Declared != MaxDeclarePaths || res.Failed != 0 {
		t.Fatalf("50 paths: declared %d failed %d", res.Declared, res.Failed)
	}
	res = declare(t, e, "one", paths[50])
	if res.Declared != 1 || res.Entries[0].Name != "one" {
		t.Fatalf("1 path: %+v", res)
	}
	long := strings.Repeat("n", MaxNameBytes)
	if res := declare(t, e, long, paths[0]); !res.Entries[0].OK {
		t.Fatalf("name of %d bytes: %+v", MaxNameBytes, res.Entries[0])
	}
	if _, err := e.s.Declare(context.Background(), DeclareRequest{Paths: paths[:1], Name: long + "n"}); !IsCode(err, CodeInvalidName) {
		t.Fatalf("name of %d bytes: %v", MaxNameBytes+1, err)
	}
	if _, err := e.s.Declare(context.Background(), DeclareRequest{Paths: paths[:1], Description: strings.Repeat("d", MaxDescriptionBytes)}); err != nil {
		t.Fatalf("description of %d bytes: %v", MaxDescriptionBytes, err)
	}
	if _, err := e.s.Declare(context.Background(), DeclareRequest{Paths: paths[:1], Description: strings.Repeat("d", MaxDescriptionBytes+1)}); err == nil {
		t.Fatal("long description accepted")
	}
}

func TestDeclareEntriesFailIndependently(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "ok.txt", "fine\n")
	e.write(t, "a/x.csv", "1,2\n")
	e.write(t, "b/x.csv", "3,4\n")
	os.Mkdir(filepath.Join(e.dir, "folder"), 0o755)
	os.Symlink("ok.txt", filepath.Join(e.dir, "link.txt"))
	os.Symlink("a", filepath.Join(e.dir, "alink"))
	res := declare(t, e, "", "ok.txt", "../outside.txt", "/etc/passwd", "folder", "link.txt", "alink/x.csv", "missing.txt", "./ok.txt", "")
	want := []struct {
		ok   bool
		text string
	}{
		{true, ""},
		{false, "leaves the workspace"},
		{false, "outside the workspace"},
		{false, "is a directory"},
		{false, "symbolic link"},
		{false, "symbolic link"},
		{false, "does not exist"},
		{false, "same file as entry 1"},
		{false, "path is empty"},
	}
	for i, w := range want {
		en := res.Entries[i]
		if en.OK != w.ok || !strings.Contains(en.Error, w.text) {
			t.Errorf("entry %d (%q): ok=%v error=%q, want ok=%v %q", i+1, en.Path, en.OK, en.Error, w.ok, w.text)
		}
	}
	if res.Declared != 1 || res.Failed != len(want)-1 {
		t.Fatalf("declared %d failed %d", res.Declared, res.Failed)
	}
	// Same file name in one folder name: the second fails, the first stays.
	res = declare(t, e, "inputs", "a/x.csv", "b/x.csv")
	if !res.Entries[0].OK || res.Entries[0].Name != "inputs/x.csv" || res.Entries[1].OK || !strings.Contains(res.Entries[1].Error, "already takes the name") {
		t.Fatalf("same base name: %+v", res.Entries)
	}
}

func TestVirtualFolderConflicts(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "f.txt", "f\n")
	e.write(t, "g.txt", "g\n")
	if res := declare(t, e, "figures/one", "f.txt"); !res.Entries[0].OK {
		t.Fatalf("%+v", res.Entries[0])
	}
	// "figures" is a folder now: an artifact cannot take its name.
	res := declare(t, e, "figures", "g.txt")
	if res.Entries[0].OK || res.Entries[0].Code != CodeNameConflict || !strings.Contains(res.Entries[0].Error, "virtual folder") {
		t.Fatalf("name over a folder: %+v", res.Entries[0])
	}
	// And an artifact cannot become a folder.
	res = declare(t, e, "figures/one/two", "g.txt")
	if res.Entries[0].OK || !strings.Contains(res.Entries[0].Error, "which is an artifact") {
		t.Fatalf("folder over a name: %+v", res.Entries[0])
	}
	if _, err := e.s.Get("", "figures"); !IsCode(err, CodeNotFolder) || !strings.Contains(err.Error(), `"figures/one"`) {
		t.Fatalf("get a folder: %v", err)
	}
	for _, bad := range []string{"/abs", "a//b", "a/", "a/../b", "./a", " a", "a\tb", "art_0123456789abcdef"} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}

func TestFileDeletedBeforeSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "keep.txt", "k\n")
	e.write(t, "gone.txt", "g\n")
	beforeSnapshot = func(rel string) {
		if rel == "gone.txt" {
			os.Remove(filepath.Join(e.dir, rel))
		}
	}
	defer func() { beforeSnapshot = nil }()
	res := declare(t, e, "", "gone.txt", "keep.txt")
	if res.Entries[0].OK || res.Entries[0].Code != CodeVanished || !strings.Contains(res.Entries[0].Error, "deleted before it could be snapshotted") || !res.Entries[1].OK {
		t.Fatalf("%+v", res.Entries)
	}
}

func TestTooLarge(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxVersionBytes = 100 })
	e.write(t, "at.txt", strings.Repeat("a", 100))
	e.write(t, "over.txt", strings.Repeat("b", 101))
	res := declare(t, e, "", "at.txt", "over.txt")
	if !res.Entries[0].OK || res.Entries[1].OK || res.Entries[1].Code != CodeTooLarge {
		t.Fatalf("%+v", res.Entries)
	}
}

func TestReadPagingAndBinary(t *testing.T) {
	e := newEnv(t, nil)
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	e.write(t, "big.txt", b.String())
	e.write(t, "plot.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00")
	declare(t, e, "", "big.txt", "plot.png")
	r, err := e.s.Read("", "big.txt", 0, 0, 0)
	if err != nil || r.Page.Lines != workspace.MaxPageLines || r.Page.NextOffset != 2000 || r.Page.TotalLines != 5000 {
		t.Fatalf("page 1: %+v %v", r.Page, err)
	}
	r, err = e.s.Read("", "big.txt", 0, 4000, 0)
	if err != nil || r.Page.Lines != 1000 || !r.Page.EOF || !strings.HasPrefix(r.Page.Text, "row 4001\n") {
		t.Fatalf("page 3: %+v %v", r.Page, err)
	}
	if _, err := e.s.Read("", "big.txt", 0, 5000, 0); !workspace.IsCode(err, workspace.CodeOffsetPastEnd) {
		t.Fatalf("past the end: %v", err)
	}
	r, err = e.s.Read("", "plot.png", 0, 0, 0)
	if err != nil || !r.Version.Binary || r.Version.Preview != PreviewImage || r.Version.MediaType != "image/png" || r.Page.Text != "" {
		t.Fatalf("binary: %+v %v", r, err)
	}
	for _, tc := range []struct {
		id, name string
		version  int
		want     string
	}{
		{"", "big.txt", 2, "has no version 2"},
		{"", "big.txt", -1, "has no version -1"},
		{"", "nope", 0, "no artifact named"},
		{"art_0000000000000000", "", 0, "no artifact art_0000000000000000"},
		{"bogus", "", 0, "not an artifact id"},
		{"", "", 0, "exactly one of"},
		{"art_0000000000000000", "big.txt", 0, "exactly one of"},
	} {
		if _, err := e.s.Read(tc.id, tc.name, tc.version, 0, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%q, %q, %d) = %v, want %q", tc.id, tc.name, tc.version, err, tc.want)
		}
	}
}

func TestCorruptVersionIsNotServed(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "r.txt", "result 1\n")
	declare(t, e, "", "r.txt")
	e.write(t, "r.txt", "result 2\n")
	res := declare(t, e, "", "r.txt")
	v1, _ := e.s.Read("", "r.txt", 1, 0, 0)
	p := e.cas.Path(v1.Version.Hash)
	os.Chmod(p, 0o600)
	os.WriteFile(p, []byte("RESULT 1\n"), 0o600)
	if _, err := e.s.Read("", "r.txt", 1, 0, 0); !IsCode(err, CodeCorrupt) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("corrupt v1: %v", err)
	}
	if _, _, err := e.s.ReadResource(URI(res.Entries[0].Artifact.ID, 1), 0); !IsCode(err, CodeCorrupt) {
		t.Fatalf("corrupt resource: %v", err)
	}
	// The other version and the records are intact.
	if r, err := e.s.Read("", "r.txt", 2, 0, 0); err != nil || r.Page.Text != "result 2\n" {
		t.Fatalf("v2: %+v %v", r, err)
	}
}

func TestResources(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "notes.md", "# Notes\n\n- one\n")
	res := declare(t, e, "docs/notes", "notes.md")
	id := res.Entries[0].Artifact.ID
	rs, err := e.s.Resources()
	if err != nil || len(rs) != 1 || rs[0].URI != "scimcp://artifacts/"+id || rs[0].Name != "docs/notes" || rs[0].MimeType != "text/markdown" {
		t.Fatalf("%+v %v", rs, err)
	}
	r, data, err := e.s.ReadResource(URI(id, 1), 0)
	if err != nil || string(data) != "# Notes\n\n- one\n" || r.Version != 1 {
		t.Fatalf("%+v %q %v", r, data, err)
	}
	if _, _, err := e.s.ReadResource(URI(id, 0), 5); !IsCode(err, CodeTooLarge) {
		t.Fatalf("over max: %v", err)
	}
	for _, bad := range []string{"file:///etc/passwd", URIPrefix + "nope", URIPrefix + id + "/2", URIPrefix + id + "/v0", URIPrefix + id + "/v01", URIPrefix + id + "/v2/x"} {
		if _, _, err := ParseURI(bad); !IsCode(err, CodeInvalidURI) {
			t.Errorf("ParseURI(%q): %v", bad, err)
		}
	}
	if _, _, err := e.s.ReadResource(URI(id, 9), 0); !IsCode(err, CodeUnknownVersion) {
		t.Fatalf("unknown version: %v", err)
	}
	gotID, v, err := ParseURI(URI(id, 12))
	if err != nil || gotID != id || v != 12 {
		t.Fatalf("round trip: %s %d %v", gotID, v, err)
	}
}

func TestPersistAcrossRestartAndLinks(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.json", `{"x": 1}`)
	declare(t, e, "", "a.json")
	e.close()
	e.open(t, nil)
	list, _, err := e.s.List()
	if err != nil || len(list) != 1 || list[0].Last.Preview != PreviewJSON {
		t.Fatalf("%+v %v", list, err)
	}
	e.write(t, "a.json", `{"x": 2}`)
	declare(t, e, "", "a.json")
	links, err := e.s.LinksForPath("a.json")
	if err != nil || len(links) != 2 || links[0].Version != 1 || links[1].Version != 2 || links[1].RevisionID == "" || links[1].URI != URI(list[0].ID, 2) {
		t.Fatalf("links: %+v %v", links, err)
	}
	vs, err := e.s.Versions(list[0].ID)
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions: %+v %v", vs, err)
	}
}

// TestOriginFromExecution: a file an execution wrote names that execution
// in the version it was declared as.
func TestOriginFromExecution(t *testing.T) {
	e := newEnv(t, nil)
	start := time.Now()
	e.write(t, "out.txt", "made\n")
	end := time.Now()
	w := provenance.Writer{Kind: provenance.KindExecution, ExecutionID: "exec_0000000000000007", Command: "make", Created: &start, Ended: &end}
	if _, err := e.prov.Scan(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	res := declare(t, e, "", "out.txt")
	v := res.Entries[0].Version
	if v.Origin.Kind != provenance.KindExecution || v.Origin.ExecutionID != "exec_0000000000000007" || v.Origin.Command != "make" || v.FileRevision == "" {
		t.Fatalf("%+v", v)
	}
}

// TestFiftyLargeFilesStream: declaring 50 files of 4 MiB allocates far less
// than their 200 MiB: content streams, it is never held whole.
func TestFiftyLargeFilesStream(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MiB")
	}
	e := newEnv(t, nil)
	chunk := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
	var paths []string
	for i := 0; i < MaxDeclarePaths; i++ {
		p := fmt.Sprintf("big/%02d.dat", i)
		f, err := os.Create(filepath.Join(e.dir, "x"))
		if i == 0 {
			os.MkdirAll(filepath.Join(e.dir, "big"), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 64; j++ {
			chunk[0] = byte(i)
			f.Write(chunk)
		}
		f.Close()
		os.Rename(filepath.Join(e.dir, "x"), filepath.Join(e.dir, p))
		paths = append(paths, p)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := declare(t, e, "", paths...)
	runtime.ReadMemStats(&after)
	if res.Declared != MaxDeclarePaths {
		t.Fatalf("declared %d: %+v", res.Declared, res.Entries[0])
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Fatalf("declaring 200 MiB allocated %d MiB", alloc>>20)
	}
}

func TestInferPreview(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          Preview
		binary        bool
	}{
		{"a.txt", "hello\nworld\n", PreviewText, false},
		{"a.csv", "a,b\n1,2\n", PreviewTable, false},
		{"a.tsv", "a\tb\n1\t2\n", PreviewTable, false},
		{"data.out", "x;y;z\n1;2;3\n4;5;6\n", PreviewTable, false},
		{"prose.txt", "Hello, world\nGoodbye, world\n", PreviewText, false},
		{"a.csv", "just one column\nof words\n", PreviewText, false},
		{"a.json", `{"a": [1, 2]}`, PreviewJSON, false},
		{"result", `[{"a": 1}, {"a": 2}]`, PreviewJSON, false},
		{"log.jsonl", "{\"a\":1}\n{\"a\":2}\n", PreviewJSON, false},
		{"a.json", `{"a": oops}`, PreviewText, false},
		{"README", "# Title\n\nSome **bold** text and a [link](http://x.org).\n", PreviewMarkdown, false},
		{"notes.md", "plain words\n", PreviewMarkdown, false},
		{"script.py", "# comment\n- not a list\n**x**\n", PreviewText, false},
		{"page", "<!DOCTYPE html><html><body>x</body></html>", PreviewHTML, false},
		{"fig.svg", `<svg xmlns="http://www.w3.org/2000/svg"></svg>`, PreviewImage, false},
		{"fig.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", PreviewImage, true},
		{"fig.txt", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", PreviewImage, true},
		{"paper.pdf", "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\x00", PreviewPDF, true},
		{"table.csv", "\x00\x01\x02binary", PreviewBinary, true},
		{"model.pt", "\x00\x00\x00\x01\x02\x03", PreviewBinary, true},
	} {
		got, mt, bin := InferPreview(tc.name, []byte(tc.content), true)
		if got != tc.want || bin != tc.binary {
			t.Errorf("%s %.20q: %s (%s, binary %v), want %s", tc.name, tc.content, got, mt, bin, tc.want)
		}
	}
	// A JSON head cut mid-value is still JSON when the file goes on.
	if got, _, _ := InferPreview("x", []byte(`{"rows": [1, 2, 3, "abc`), false); got != PreviewJSON {
		t.Errorf("cut JSON: %s", got)
	}
}

// Provenance retention never thins an artifact: every version's content is
// claimed through Hashes and survives a pass that drops all else it can.
func TestArtifactContentSurvivesRetention(t *testing.T) {
	e := newEnv(t, nil)
	for _, content := range []string{"one\n", "two\n"} {
		e.write(t, "a.csv", content)
		if r := declare(t, e, "a", "a.csv"); !r.Entries[0].OK {
			t.Fatalf("declare: %+v", r)
		}
	}
	e.write(t, "a.csv", "three\n")
	e.write(t, "scratch.txt", "x\n")
	if _, err := e.prov.Scan(context.Background(), provenance.Writer{Kind: provenance.KindUnknown, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	e.write(t, "scratch.txt", "y\n") // its first content is now an earlier revision nobody claims
	if _, err := e.prov.Scan(context.Background(), provenance.Writer{Kind: provenance.KindUnknown, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	keep, err := e.s.Hashes()
	if err != nil || len(keep) != 2 {
		t.Fatalf("Hashes = %v, %v", keep, err)
	}
	rep, err := e.prov.Retain(context.Background(), provenance.RetainOptions{MaxBytes: 1, Protected: func(h string) bool { return keep[h] }, SweepBefore: time.Now().Add(time.Minute)})
	if err != nil || rep.Dropped != 1 || rep.Swept != 1 {
		t.Fatalf("retain: %+v %v", rep, err)
	}
	for v, want := range map[int]string{1: "one\n", 2: "two\n"} {
		r, err := e.s.Read("", "a", v, 0, 0)
		if err != nil || r.Page.Text != want {
			t.Fatalf("version %d after retention: %+v %v", v, r, err)
		}
	}
}
