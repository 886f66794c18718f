package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/downloads"
	"github.com/sciencediscovery/scimcp/workspace/fetch"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
)

// dlEnv is a server wired the way cmd/scimcp wires artifact_download: the
// test upstream as source "up", provenance, artifacts, downloads and
// paper_extract_pdf.
type dlEnv struct {
	*testEnv
	prov *provenance.Index
	arts *artifacts.Store
	dl   *downloads.Service
}

type dlConfig struct {
	policy   string
	fetch    fetch.Policy
	paperURL string // offered in find_papers' structured content
}

func newDLEnv(t *testing.T, cfg dlConfig) *dlEnv {
	t.Helper()
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Fatal("poppler-utils is not installed (apt-get install -y poppler-utils); paper_extract_pdf must be tested")
	}
	d := &dlEnv{}
	d.testEnv = newEnv(t, func(o *Options) {
		data := o.Store.Dir()
		wsDir := filepath.Join(filepath.Dir(data), "ws")
		ws, err := workspace.Open(wsDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		blobs, err := cas.Open(data, cas.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d.prov, err = provenance.New(provenance.Config{Store: o.Store, Workspace: ws, CAS: blobs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.prov.Close() })
		d.arts, err = artifacts.New(artifacts.Config{Store: o.Store, Workspace: ws, CAS: blobs, Provenance: d.prov})
		if err != nil {
			t.Fatal(err)
		}
		d.dl, err = downloads.New(downloads.Config{Store: o.Store, Workspace: ws, Provenance: d.prov, Artifacts: d.arts,
			Fetch: fetch.New(cfg.fetch), TempDir: filepath.Join(data, "tmp"), MaxBytes: cfg.fetch.MaxBytes})
		if err != nil {
			t.Fatal(err)
		}
		local, err := runner.NewLocal(runner.LocalConfig{Workspace: wsDir, StateDir: filepath.Join(data, "sandbox-dl"),
			Helper: []string{os.Args[0]}, HelperEnv: []string{"SCIMCP_TEST_HELPER=1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { local.Ready() })
		o.Tools = toolkit.Catalogue(toolkit.Services{Workspace: ws, Outputs: o.Outputs, PaperRunner: local, Provenance: d.prov, Artifacts: d.arts, Downloads: d.dl})
		o.Groups = append(o.Groups, toolkit.GroupPapers)
		withUpstream(0)(o)
		o.Sources[0].Env["SCIMCP_TEST_UPSTREAM_PAPER_URL"] = cfg.paperURL
		o.Downloads, o.DownloadPolicy = d.dl, cfg.policy
	})
	startUpstream(t, d.testEnv)
	return d
}

// asker answers permission requests as a user would, and counts them.
type asker struct {
	mu       sync.Mutex
	action   mcp.ElicitationResponseAction
	content  any
	messages []string
}

func (a *asker) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.messages = append(a.messages, req.Params.Message)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: a.action, Content: a.content}}, nil
}

func (a *asker) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.messages...)
}

// connectAsking connects a client that supports form elicitation.
func (e *testEnv) connectAsking(t *testing.T, a *asker) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClientWithOptions(e.srv.MCP(), client.WithElicitationHandler(a))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "scimcp-test-asking", Version: "1"}
	if _, err := c.Initialize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// findPapers calls the upstream's find_papers and returns its invocation id
// and the candidates its result listed.
func findPapers(t *testing.T, c *client.Client) (string, []downloads.Candidate, string) {
	t.Helper()
	call(t, c, "tool_search", `{"query":"select:mcp__up__find_papers"}`)
	res := call(t, c, "mcp__up__find_papers", `{"topic":"binding"}`)
	if res.IsError {
		t.Fatalf("find_papers: %s", text(res))
	}
	meta := res.Meta.AdditionalFields["scimcp/untrusted"]
	raw, _ := json.Marshal(meta)
	var m struct {
		ID         string                `json:"mcpInvocationId"`
		Candidates []downloads.Candidate `json:"candidates"`
	}
	json.Unmarshal(raw, &m)
	return m.ID, m.Candidates, text(res)
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestArtifactDownloadWithPermission(t *testing.T) {
	var hits sync.Map
	paperSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.URL.Path, true)
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(twoPagePDF)
	}))
	defer paperSrv.Close()
	d := newDLEnv(t, dlConfig{paperURL: paperSrv.URL + "/files/over-http.pdf", fetch: fetch.Policy{AllowHosts: []string{strings.TrimPrefix(paperSrv.URL, "http://")}}})
	user := &asker{action: mcp.ElicitationResponseActionAccept, content: map[string]any{"allow": true}}
	c := d.connectAsking(t, user)

	inv, cands, txt := findPapers(t, c)
	if !strings.HasPrefix(inv, "inv_") || len(cands) != 3 {
		t.Fatalf("invocation %q, candidates %+v", inv, cands)
	}
	for i, want := range []struct{ kind, uri string }{
		{downloads.KindResourceLink, "papers://two-page"},
		{downloads.KindEmbedded, "papers://inline/one-page"},
		{downloads.KindURL, paperSrv.URL + "/files/over-http.pdf"},
	} {
		if cands[i].Kind != want.kind || cands[i].URI != want.uri || cands[i].ID != "c"+string(rune('1'+i)) {
			t.Errorf("candidate %d: %+v", i, cands[i])
		}
		// The model sees every candidate in the text, too.
		if !strings.Contains(txt, cands[i].ID+": ") || !strings.Contains(txt, want.uri) {
			t.Errorf("text does not list %s:\n%s", cands[i].ID, txt)
		}
	}

	// c1: a resource link read from the source with resources/read.
	res := call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c1"}`)
	var out ArtifactDownloadOut
	structured(t, res, &out)
	if res.IsError || out.State != "completed" || out.Permission != "user" || out.Path != "downloads/two-page.pdf" || out.SHA256 != sha(twoPagePDF) ||
		out.MediaType != "application/pdf" || out.ArtifactVersion != 1 || !strings.Contains(text(res), "paper_extract_pdf") {
		t.Fatalf("c1: %s %+v", text(res), out)
	}
	if got, _ := os.ReadFile(filepath.Join(d.dir, out.Path)); !bytes.Equal(got, twoPagePDF) {
		t.Fatal("the workspace file is not the source's PDF")
	}
	msgs := user.asked()
	if len(msgs) != 1 || !strings.Contains(msgs[0], "papers://two-page") || !strings.Contains(msgs[0], `"up"`) || !strings.Contains(msgs[0], "downloads/") {
		t.Fatalf("permission requests: %q", msgs)
	}
	// Provenance names the invocation, candidate, URI, hash and size.
	fp := call(t, c, "get_file_provenance", `{"path":"downloads/two-page.pdf"}`)
	ft := text(fp)
	for _, want := range []string{"download", inv, "papers://two-page", out.ArtifactJobID, sha(twoPagePDF)} {
		if !strings.Contains(ft, want) {
			t.Errorf("get_file_provenance lacks %q:\n%s", want, ft)
		}
	}
	pj := text(call(t, c, "get_file_provenance", `{"path":"downloads/two-page.pdf","format":"prov-json"}`))
	for _, want := range []string{`"scimcp:mcpInvocationId": "` + inv, `"scimcp:candidateId": "c1"`, `"MCP source up"`, `"prov:location": "papers://two-page"`} {
		if !strings.Contains(pj, want) {
			t.Errorf("PROV-JSON lacks %s:\n%s", want, pj)
		}
	}
	// The artifact is listed, with the download as its origin.
	la := call(t, c, "list_artifacts", `{}`)
	if lt := text(la); !strings.Contains(lt, "downloads/\n  two-page.pdf") || !strings.Contains(lt, "from a download") {
		t.Errorf("list_artifacts:\n%s", text(la))
	}
	ra := call(t, c, "read_artifact", `{"name":"downloads/two-page.pdf"}`)
	if !strings.Contains(text(ra), "binary") {
		t.Errorf("read_artifact of a PDF:\n%s", text(ra))
	}

	// A later turn: extraction by job id.
	ex := call(t, c, "paper_extract_pdf", `{"artifactJobId":"`+out.ArtifactJobID+`"}`)
	et := text(ex)
	if ex.IsError || !strings.Contains(et, "=== page 2 of 2 ===") || !strings.Contains(et, "Kd = 4.2 nM") || !strings.Contains(et, "isothermal titration") {
		t.Fatalf("extraction by job:\n%s", et)
	}

	// c2: the embedded blob, to a chosen destination.
	res = call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c2","destinationPath":"papers/inline.pdf"}`)
	structured(t, res, &out)
	if res.IsError || out.Path != "papers/inline.pdf" || out.SHA256 != sha(onePagePDF) {
		t.Fatalf("c2: %s", text(res))
	}
	// c3: the loopback http URL, reachable because the host is allowed.
	res = call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c3"}`)
	structured(t, res, &out)
	if _, fetched := hits.Load("/files/over-http.pdf"); res.IsError || out.Path != "downloads/over-http.pdf" || !fetched || out.FinalURL != paperSrv.URL+"/files/over-http.pdf" {
		t.Fatalf("c3: %s", text(res))
	}

	// Bad input: a clear error and nothing asked.
	before := len(user.asked())
	for _, tc := range []struct{ args, want string }{
		{`{"mcpInvocationId":"inv_nope","candidateId":"c1"}`, "no MCP invocation"},
		{`{"mcpInvocationId":"` + inv + `","candidateId":"c9"}`, "c1, c2, c3"},
		{`{"mcpInvocationId":"` + inv + `","candidateId":"c1","destinationPath":"papers/inline.pdf"}`, "never overwrite"},
		{`{"mcpInvocationId":"` + inv + `","candidateId":"c1","destinationPath":"../escape.pdf"}`, "leaves the workspace"},
		{`{"mcpInvocationId":"` + inv + `"}`, "candidateId"},
		{`{"artifactJobId":"x"}`, "mcpInvocationId"},
	} {
		if r := call(t, c, "artifact_download", tc.args); !r.IsError || !strings.Contains(text(r), tc.want) {
			t.Errorf("%s: %s", tc.args, text(r))
		}
	}
	if after := len(user.asked()); after != before {
		t.Errorf("bad input asked the user %d times", after-before)
	}
	// A result that offers nothing.
	call(t, c, "tool_search", `{"query":"select:mcp__up__nothing_here"}`)
	nh := call(t, c, "mcp__up__nothing_here", `{}`)
	var m struct {
		ID string `json:"mcpInvocationId"`
	}
	raw, _ := json.Marshal(nh.Meta.AdditionalFields["scimcp/untrusted"])
	json.Unmarshal(raw, &m)
	if r := call(t, c, "artifact_download", `{"mcpInvocationId":"`+m.ID+`","candidateId":"c1"}`); !r.IsError || !strings.Contains(text(r), "offered nothing") {
		t.Errorf("nothing to download: %s", text(r))
	}
	// Another session cannot use this session's invocation or job.
	other := d.connectAsking(t, user)
	if r := call(t, other, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c1"}`); !r.IsError || !strings.Contains(text(r), "no MCP invocation") {
		t.Errorf("another session: %s", text(r))
	}
	if r := call(t, other, "paper_extract_pdf", `{"artifactJobId":"`+out.ArtifactJobID+`"}`); !r.IsError || !strings.Contains(text(r), "no artifact_download job") {
		t.Errorf("another session's job: %s", text(r))
	}
	// A job whose file changed since is not extracted silently.
	os.WriteFile(filepath.Join(d.dir, "downloads/over-http.pdf"), onePagePDF, 0o644)
	if r := call(t, c, "paper_extract_pdf", `{"artifactJobId":"`+out.ArtifactJobID+`"}`); !r.IsError || !strings.Contains(text(r), "changed since") {
		t.Errorf("changed file: %s", text(r))
	}
}

func TestArtifactDownloadDeclined(t *testing.T) {
	d := newDLEnv(t, dlConfig{policy: DownloadAllow})
	for _, tc := range []struct {
		name    string
		action  mcp.ElicitationResponseAction
		content any
		want    string
	}{
		{"declined", mcp.ElicitationResponseActionDecline, nil, "the user declined"},
		{"cancelled", mcp.ElicitationResponseActionCancel, nil, "dismissed"},
		{"accepted without allowing", mcp.ElicitationResponseActionAccept, map[string]any{"allow": false}, "did not allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := &asker{action: tc.action, content: tc.content}
			c := d.connectAsking(t, user)
			inv, _, _ := findPapers(t, c)
			res := call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c1"}`)
			if !res.IsError || !strings.Contains(text(res), tc.want) || !strings.Contains(text(res), "declined") || len(user.asked()) != 1 {
				t.Fatalf("%s (asked %d times)", text(res), len(user.asked()))
			}
			// Even with an allowing policy, the user's answer decides.
			if _, err := os.Stat(filepath.Join(d.dir, "downloads")); err == nil {
				t.Fatal("a declined download wrote into the workspace")
			}
			job := jobIDIn(text(res))
			ex := call(t, c, "paper_extract_pdf", `{"artifactJobId":"`+job+`"}`)
			if !ex.IsError || !strings.Contains(text(ex), "declined") {
				t.Fatalf("extracting a declined job: %s", text(ex))
			}
		})
	}
}

// jobIDIn finds a dl_ job id in a text.
func jobIDIn(s string) string {
	i := strings.Index(s, "dl_")
	if i < 0 {
		return ""
	}
	j := i + 3
	for j < len(s) && strings.ContainsRune("0123456789abcdef", rune(s[j])) {
		j++
	}
	return s[i:j]
}

func TestArtifactDownloadPolicy(t *testing.T) {
	// A client without elicitation: the policy decides.
	refuse := newDLEnv(t, dlConfig{})
	c := refuse.connect(t)
	inv, _, _ := findPapers(t, c)
	res := call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c2"}`)
	if !res.IsError || !strings.Contains(text(res), "--download-policy allow") || !strings.Contains(text(res), "elicitation") {
		t.Fatalf("refused by policy: %s", text(res))
	}
	allow := newDLEnv(t, dlConfig{policy: DownloadAllow})
	c = allow.connect(t)
	inv, _, _ = findPapers(t, c)
	res = call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c2"}`)
	var out ArtifactDownloadOut
	structured(t, res, &out)
	if res.IsError || out.State != "completed" || out.Permission != "policy" {
		t.Fatalf("allowed by policy: %s", text(res))
	}
}

func TestArtifactDownloadRefusals(t *testing.T) {
	big := bytes.Repeat([]byte("%PDF-1.4 "), 1000)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(big) }))
	defer files.Close()
	// An allowed host that redirects to one that is not.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	redirector := &http.Server{Handler: http.RedirectHandler(files.URL+"/big.pdf", http.StatusFound)}
	go redirector.Serve(ln)
	defer redirector.Close()

	for _, tc := range []struct {
		name, url string
		policy    fetch.Policy
		want      string
	}{
		{"redirected to loopback", "http://" + ln.Addr().String() + "/paper.pdf", fetch.Policy{AllowHosts: []string{ln.Addr().String()}}, "non-public"},
		{"loopback not allowed", files.URL + "/big.pdf", fetch.Policy{}, "non-public"},
		{"oversized", files.URL + "/big.pdf", fetch.Policy{AllowHosts: []string{strings.TrimPrefix(files.URL, "http://")}, MaxBytes: int64(len(big)) - 1}, "cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDLEnv(t, dlConfig{paperURL: tc.url, fetch: tc.policy})
			c := d.connectAsking(t, &asker{action: mcp.ElicitationResponseActionAccept, content: map[string]any{"allow": true}})
			inv, _, _ := findPapers(t, c)
			start := time.Now()
			res := call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c3"}`)
			if !res.IsError || !strings.Contains(text(res), tc.want) || !strings.Contains(text(res), "Nothing was written") {
				t.Fatalf("%s (after %s)", text(res), time.Since(start))
			}
			if ents, _ := os.ReadDir(filepath.Join(d.dir, "downloads")); len(ents) != 0 {
				t.Fatalf("a refused download left %d files", len(ents))
			}
			job := jobIDIn(text(res))
			if j, ok, _ := d.dl.Job(sessionOwner(t, d.testEnv), job); !ok || j.State != downloads.StateFailed {
				t.Fatalf("job %s: %+v", job, j)
			}
		})
	}
}

// sessionOwner returns the owner of the one live session of a test env.
func sessionOwner(t *testing.T, e *testEnv) string {
	t.Helper()
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	for _, s := range e.srv.sessions {
		return s.Owner
	}
	t.Fatal("no session")
	return ""
}

// A client of protocol 2026-07-28 gets the permission question as an input
// request (SEP-2322) and answers it on the retried call.
func TestArtifactDownloadModernClient(t *testing.T) {
	d := newDLEnv(t, dlConfig{})
	user := &asker{action: mcp.ElicitationResponseActionAccept, content: map[string]any{"allow": true}}
	c, err := client.NewInProcessClientWithOptions(d.srv.MCP(), client.WithElicitationHandler(user))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "scimcp-test-modern", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if !mcp.IsModernProtocol(res.ProtocolVersion) {
		t.Fatalf("negotiated %s, want a 2026-07-28 or later version", res.ProtocolVersion)
	}
	inv, cands, _ := findPapers(t, c)
	if len(cands) != 2 {
		t.Fatalf("candidates: %+v", cands)
	}
	r := call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c2"}`)
	var out ArtifactDownloadOut
	structured(t, r, &out)
	if r.IsError || out.State != "completed" || out.Permission != "user" || len(user.asked()) != 1 {
		t.Fatalf("modern client: %s (asked %d times)", text(r), len(user.asked()))
	}
}

// A download that lands but cannot be registered (its name collides with an
// artifact) says where the file is, rather than that nothing was written.
func TestArtifactDownloadRegistrationFails(t *testing.T) {
	d := newDLEnv(t, dlConfig{policy: DownloadAllow})
	c := d.connect(t)
	d.write(t, "notes.txt", "an artifact named like the downloads folder\n")
	if r := call(t, c, "declare_artifact", `{"path":"notes.txt","name":"downloads"}`); r.IsError {
		t.Fatalf("declare: %s", text(r))
	}
	inv, _, _ := findPapers(t, c)
	res := call(t, c, "artifact_download", `{"mcpInvocationId":"`+inv+`","candidateId":"c2"}`)
	txt := text(res)
	if !res.IsError || !strings.Contains(txt, "registering it as an artifact failed") || !strings.Contains(txt, "The file is at downloads/") || strings.Contains(txt, "Nothing was written") {
		t.Fatalf("%s", txt)
	}
	fp := call(t, c, "get_file_provenance", `{"path":"downloads/one-page.pdf"}`)
	if fp.IsError || !strings.Contains(text(fp), "download") {
		t.Fatalf("provenance of the unregistered file: %s", text(fp))
	}
}

func TestClipUntrusted(t *testing.T) {
	if got := clipUntrusted("a\nb\x1b[31mc\x7f"); got != "ab[31mc" {
		t.Errorf("control characters: %q", got)
	}
	long := strings.Repeat("é", 150) // 300 bytes
	got := clipUntrusted(long)
	if !strings.HasSuffix(got, "…") || len(got) > maxUntrustedShown+len("…") || !utf8.ValidString(got) {
		t.Errorf("clipped: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := clipUntrusted("papers://two-page"); got != "papers://two-page" {
		t.Errorf("short text changed: %q", got)
	}
}
