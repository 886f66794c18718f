package downloads

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/fetch"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// pdf is a stand-in body: downloads never parse what they fetch.
var pdf = []byte("%PDF-1.4\n% not really parsed\n" + strings.Repeat("x", 5000) + "\n%%EOF\n")

func TestCandidates(t *testing.T) {
	blob := base64.StdEncoding.EncodeToString(pdf)
	raw := fmt.Sprintf(`{"content":[
		{"type":"text","text":"two papers"},
		{"type":"resource_link","uri":"papers://arxiv/2401.00001","name":"smith2024.pdf","mimeType":"application/pdf","size":5000},
		{"type":"resource","resource":{"uri":"papers://inline/1","mimeType":"application/pdf","blob":%q}},
		{"type":"resource_link","uri":""},
		{"type":"resource","resource":{"uri":"papers://bad","blob":"%%%%"}}
	],"structuredContent":{"results":[{"title":"A","pdf_url":"https://example.org/a.pdf","doi":"10.1/x"},
		{"title":"B http://not.a/whole url","links":["https://example.org/b.pdf","https://example.org/a.pdf","ftp://x/y"]}],
		"zeta":"http://example.org/z"}}`, blob)
	got, more := Candidates([]byte(raw))
	if more != 0 {
		t.Fatalf("more = %d", more)
	}
	want := []struct{ id, kind, uri, where string }{
		{"c1", KindResourceLink, "papers://arxiv/2401.00001", "content[1]"},
		{"c2", KindEmbedded, "papers://inline/1", "content[2]"},
		{"c3", KindURL, "https://example.org/a.pdf", "structuredContent.results[0].pdf_url"},
		{"c4", KindURL, "https://example.org/b.pdf", "structuredContent.results[1].links[0]"},
		{"c5", KindURL, "http://example.org/z", "structuredContent.zeta"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d candidates: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Kind != w.kind || g.URI != w.uri || g.Where != w.where {
			t.Errorf("candidate %d = %+v, want %+v", i, g, w)
		}
	}
	if got[0].Size != 5000 || got[0].MediaType != "application/pdf" || got[0].Name != "smith2024.pdf" {
		t.Errorf("resource link fields: %+v", got[0])
	}
	if got[1].Size != int64(len(pdf)) {
		t.Errorf("embedded size %d, want %d", got[1].Size, len(pdf))
	}
	// The same result gives the same ids.
	again, _ := Candidates([]byte(raw))
	for i := range again {
		if again[i].ID != got[i].ID || again[i].URI != got[i].URI {
			t.Fatal("candidate ids are not stable")
		}
	}

	// Without structuredContent, a JSON text item is searched.
	got, _ = Candidates([]byte(`{"content":[{"type":"text","text":"{\"url\":\"https://example.org/t.pdf\"}"},{"type":"text","text":"see https://example.org/prose.pdf"}]}`))
	if len(got) != 1 || got[0].URI != "https://example.org/t.pdf" || got[0].Where != "text[0].url" {
		t.Errorf("JSON text: %+v", got)
	}

	// The cap, counted.
	var urls []string
	for i := range MaxCandidates + 7 {
		urls = append(urls, fmt.Sprintf("%q", fmt.Sprintf("https://example.org/%03d.pdf", i)))
	}
	got, more = Candidates([]byte(`{"content":[],"structuredContent":{"u":[` + strings.Join(urls, ",") + `]}}`))
	if len(got) != MaxCandidates || more != 7 || got[MaxCandidates-1].ID != fmt.Sprintf("c%d", MaxCandidates) {
		t.Errorf("cap: %d listed, %d more", len(got), more)
	}
	// Escaped slashes are still URLs; a result with no "://" is not decoded.
	got, _ = Candidates([]byte(`{"content":[],"structuredContent":{"u":"https:\/\/example.org\/e.pdf"}}`))
	if len(got) != 1 || got[0].URI != "https://example.org/e.pdf" {
		t.Errorf("escaped slashes: %+v", got)
	}
	if got, _ := Candidates([]byte(`{"content":[{"type":"text","text":"{\"doi\":\"10.1/x\"}"}]}`)); got != nil {
		t.Errorf("no URL: %+v", got)
	}
	if got, _ := Candidates([]byte(`not json`)); got != nil {
		t.Errorf("garbage: %+v", got)
	}
}

type env struct {
	dir  string
	data string
	ws   *workspace.Workspace
	db   *store.Store
	prov *provenance.Index
	arts *artifacts.Store
	s    *Service
}

func newEnv(t testing.TB, policy fetch.Policy, max int64) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{dir: filepath.Join(base, "ws"), data: filepath.Join(base, "data")}
	os.MkdirAll(e.dir, 0o755)
	ws, err := workspace.Open(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	e.ws, e.dir = ws, ws.Dir()
	e.open(t, policy, max)
	return e
}

func (e *env) open(t testing.TB, policy fetch.Policy, max int64) {
	t.Helper()
	db, err := store.Open(e.data, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cas.Open(e.data, cas.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := provenance.New(provenance.Config{Store: db, Workspace: e.ws, CAS: c})
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifacts.New(artifacts.Config{Store: db, Workspace: e.ws, CAS: c, Provenance: p})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: db, Workspace: e.ws, Provenance: p, Artifacts: a, Fetch: fetch.New(policy), TempDir: filepath.Join(e.data, "tmp"), MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	e.db, e.prov, e.arts, e.s = db, p, a, s
	t.Cleanup(func() { p.Close(); db.Close() })
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func (e *env) download(t *testing.T, req Request) Job {
	t.Helper()
	if req.Owner == "" {
		req.Owner, req.Session, req.InvocationID, req.Source, req.Tool, req.Permission = "o1", "s1", "inv_1", "papers", "search", "user"
	}
	j, err := e.s.Download(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestDownloadKinds(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		switch r.URL.Path {
		case "/paper":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/to-paper":
			http.Redirect(w, r, "/paper", http.StatusFound)
		case "/missing":
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	e := newEnv(t, fetch.Policy{AllowHosts: []string{host}}, 0)

	// An http URL, through a redirect on the allowed host.
	j := e.download(t, Request{Candidate: Candidate{ID: "c3", Kind: KindURL, URI: srv.URL + "/to-paper", Name: "to-paper"}})
	if j.State != StateCompleted || j.Path != "downloads/to-paper.pdf" || j.Bytes != int64(len(pdf)) || j.SHA256 != sum(pdf) || j.MediaType != "application/pdf" || j.FinalURL != srv.URL+"/paper" {
		t.Fatalf("http job: %+v", j)
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, j.Path)); !bytes.Equal(got, pdf) {
		t.Fatal("workspace file differs from the body")
	}
	// Provenance names the download, not an unknown writer.
	fp, err := e.prov.File(context.Background(), j.Path, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	w := fp.Current.Writer
	if w.Kind != provenance.KindDownload || w.Source == nil || w.Source.InvocationID != "inv_1" || w.Source.CandidateID != "c3" || w.Source.URI != srv.URL+"/to-paper" ||
		w.Source.Hash != sum(pdf) || w.Source.Bytes != int64(len(pdf)) || w.Source.DownloadJobID != j.ID || w.Source.MCPSource != "papers" || fp.Total != 1 {
		t.Fatalf("provenance: %+v (source %+v), %d revisions", w, w.Source, fp.Total)
	}
	// The artifact, with that origin.
	art, err := e.arts.Get(j.ArtifactID, "")
	if err != nil || art.Name != j.Path || art.Latest != 1 || j.ArtifactVersion != 1 {
		t.Fatalf("artifact: %+v, %v", art, err)
	}
	rr, err := e.arts.Read(j.ArtifactID, "", 1, 0, 0)
	if err != nil || !rr.Version.Binary || rr.Version.Hash != sum(pdf) || rr.Version.Origin.Kind != provenance.KindDownload {
		t.Fatalf("artifact version: %+v, %v", rr.Version, err)
	}

	// The same URL again: a second file, never an overwrite.
	j2 := e.download(t, Request{Candidate: Candidate{ID: "c3", Kind: KindURL, URI: srv.URL + "/paper", Name: "to-paper"}})
	if j2.State != StateCompleted || j2.Path != "downloads/to-paper-2.pdf" {
		t.Fatalf("second download: %+v", j2)
	}

	// An embedded blob, from the invocation's result.
	raw := []byte(fmt.Sprintf(`{"content":[{"type":"resource","resource":{"uri":"papers://inline/x","mimeType":"application/pdf","blob":%q}}]}`, base64.StdEncoding.EncodeToString(pdf)))
	cands, _ := Candidates(raw)
	j = e.download(t, Request{Candidate: cands[0], Result: raw, Destination: "papers/inline.pdf"})
	if j.State != StateCompleted || j.Path != "papers/inline.pdf" || j.SHA256 != sum(pdf) {
		t.Fatalf("embedded job: %+v", j)
	}

	// A non-http resource link, read from its source.
	var asked string
	read := func(ctx context.Context, uri string) ([]byte, error) {
		asked = uri
		return json.Marshal(map[string]any{"contents": []map[string]any{{"uri": uri, "mimeType": "application/pdf", "blob": base64.StdEncoding.EncodeToString(pdf)}}})
	}
	j = e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindResourceLink, URI: "papers://arxiv/2401.00001", Name: "smith 2024 (v2).pdf"}, ReadResource: read})
	if j.State != StateCompleted || asked != "papers://arxiv/2401.00001" || j.Path != "downloads/smith_2024__v2_.pdf" {
		t.Fatalf("resource link job: %+v (asked %q)", j, asked)
	}

	// A failure is a terminal job, with nothing in the workspace.
	j = e.download(t, Request{Candidate: Candidate{ID: "c9", Kind: KindURL, URI: srv.URL + "/missing"}})
	if j.State != StateFailed || !strings.Contains(j.Error, "404") || j.Path != "" {
		t.Fatalf("404 job: %+v", j)
	}
	// Jobs are the owner's only, and kept.
	if got, ok, _ := e.s.Job("o1", j.ID); !ok || got.State != StateFailed {
		t.Fatalf("Job: %+v %v", got, ok)
	}
	if _, ok, _ := e.s.Job("someone else", j.ID); ok {
		t.Fatal("another owner sees the job")
	}
}

func TestDownloadRefusals(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write(big)
		case "/exact":
			w.Write(big[:1024])
		}
	}))
	defer srv.Close()
	// A public-looking host that redirects to loopback.
	ln, _ := net.Listen("tcp", "127.0.0.2:0")
	redirector := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+"/exact", http.StatusFound)
	})}
	go redirector.Serve(ln)
	defer redirector.Close()

	host := strings.TrimPrefix(srv.URL, "http://")
	e := newEnv(t, fetch.Policy{AllowHosts: []string{ln.Addr().String()}}, 1024)

	j := e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: "http://" + ln.Addr().String() + "/r"}})
	if j.State != StateFailed || !strings.Contains(j.Error, "refusing to connect") {
		t.Fatalf("redirect to loopback: %+v", j)
	}
	// Loopback without an allow entry.
	j = e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/exact"}})
	if j.State != StateFailed || !strings.Contains(j.Error, "non-public") {
		t.Fatalf("loopback: %+v", j)
	}
	e.s.cfg.Fetch = fetch.New(fetch.Policy{AllowHosts: []string{host}, MaxBytes: 1024})
	// At the cap exactly, and one past it.
	if j = e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/exact"}}); j.State != StateCompleted || j.Bytes != 1024 {
		t.Fatalf("1024 bytes under a 1024 cap: %+v", j)
	}
	j = e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/big"}})
	if j.State != StateFailed || !strings.Contains(j.Error, "cap") {
		t.Fatalf("oversized: %+v", j)
	}
	// A declared size over the cap is refused before any fetch.
	j = e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/big", Size: 1025}})
	if j.State != StateFailed || !strings.Contains(j.Error, "declared") {
		t.Fatalf("declared oversize: %+v", j)
	}
	// An embedded resource over the cap.
	raw := []byte(fmt.Sprintf(`{"content":[{"type":"resource","resource":{"uri":"x://1","blob":%q}}]}`, base64.StdEncoding.EncodeToString(big)))
	cands, _ := Candidates(raw)
	if j = e.download(t, Request{Candidate: cands[0], Result: raw}); j.State != StateFailed || !strings.Contains(j.Error, "cap") {
		t.Fatalf("embedded oversize: %+v", j)
	}
	// Taken and escaping destinations.
	os.WriteFile(filepath.Join(e.dir, "keep.pdf"), []byte("mine"), 0o644)
	for _, dest := range []string{"keep.pdf", "../out.pdf", "/etc/passwd", "folder/"} {
		if err := e.s.CheckDestination(dest); err == nil {
			t.Errorf("CheckDestination(%q) accepted", dest)
		}
		if j = e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/exact"}, Destination: dest}); j.State != StateFailed {
			t.Errorf("destination %q: %+v", dest, j)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, "keep.pdf")); string(got) != "mine" {
		t.Fatal("an existing file was overwritten")
	}
	// Nothing failed left a file or a temporary body behind.
	ents, _ := os.ReadDir(filepath.Join(e.dir, "downloads"))
	if len(ents) != 1 {
		t.Errorf("downloads/ holds %d entries, want the one completed", len(ents))
	}
	if tmp, _ := os.ReadDir(filepath.Join(e.data, "tmp")); len(tmp) != 0 {
		t.Errorf("temporary bodies left: %d", len(tmp))
	}

	// Declined: recorded, terminal.
	d, err := e.s.Decline(Request{Owner: "o1", Session: "s1", InvocationID: "inv_1", Candidate: Candidate{ID: "c1"}}, "the user declined")
	if err != nil || d.State != StateDeclined || !d.Terminal() {
		t.Fatalf("Decline: %+v %v", d, err)
	}
}

func TestJobInterruptedByRestart(t *testing.T) {
	e := newEnv(t, fetch.Policy{}, 0)
	j := e.s.newJob(Request{Owner: "o1", Session: "s1"})
	j.State = StateDownloading
	if err := e.s.put(j); err != nil {
		t.Fatal(err)
	}
	e.prov.Close()
	e.db.Close()
	e.open(t, fetch.Policy{}, 0)
	got, ok, err := e.s.Job("o1", j.ID)
	if err != nil || !ok || got.State != StateFailed || !strings.Contains(got.Error, "server stopped") || got.Ended.IsZero() {
		t.Fatalf("after restart: %+v %v %v", got, ok, err)
	}
}

func TestDownloadProgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			if i > 0 {
				time.Sleep(ProgressEvery + 100*time.Millisecond)
			}
			w.Write(bytes.Repeat([]byte("p"), 1024))
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	e := newEnv(t, fetch.Policy{AllowHosts: []string{strings.TrimPrefix(srv.URL, "http://")}}, 0)
	var got [][2]int64
	j := e.download(t, Request{Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/slow.bin", Size: 3072},
		Progress: func(received, total int64) { got = append(got, [2]int64{received, total}) }})
	if j.State != StateCompleted {
		t.Fatalf("job: %+v", j)
	}
	// One report per chunk at least (the chunks are further apart than
	// ProgressEvery), growing, with the declared total.
	if len(got) < 3 || got[len(got)-1][0] != 3072 {
		t.Fatalf("progress reports %v", got)
	}
	for i, g := range got {
		if g[1] != 3072 || (i > 0 && g[0] <= got[i-1][0]) {
			t.Fatalf("progress reports %v", got)
		}
	}
}
