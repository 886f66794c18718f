package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// provEnv is a workspace with provenance and artifacts, for handler tests.
type provEnv struct {
	dir  string
	prov *provenance.Index
	arts *artifacts.Store
	cas  *cas.Store
	gfp  Tool
	tool map[string]Tool
}

func newProvEnv(t *testing.T) *provEnv {
	t.Helper()
	base := t.TempDir()
	os.MkdirAll(filepath.Join(base, "ws"), 0o755)
	ws, err := workspace.Open(filepath.Join(base, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	db, err := store.Open(filepath.Join(base, "data"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := cas.Open(db.Dir(), cas.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := provenance.New(provenance.Config{Store: db, Workspace: ws, CAS: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	a, err := artifacts.New(artifacts.Config{Store: db, Workspace: ws, CAS: c, Provenance: p})
	if err != nil {
		t.Fatal(err)
	}
	e := &provEnv{dir: ws.Dir(), prov: p, arts: a, cas: c, tool: map[string]Tool{}}
	e.gfp = GetFileProvenance(p, a)
	e.tool[e.gfp.Name()] = e.gfp
	for _, tl := range ArtifactTools(a) {
		e.tool[tl.Name()] = tl
	}
	return e
}

func (e *provEnv) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// call runs a tool's handler as session s1 would.
func (e *provEnv) call(t *testing.T, name, args string) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = json.RawMessage(args)
	ctx := WithCaller(context.Background(), Caller{Session: "s1", Owner: "s1"})
	res, err := e.tool[name].Handler(ctx, req)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return res
}

func provText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestExecutionWriter(t *testing.T) {
	code := 3
	now := time.Now()
	w := ExecutionWriter(runner.Execution{ID: "exec_0000000000000001", Command: "make", Runner: "local", Session: "s", EnvironmentID: "py311",
		State: runner.Failed, ExitCode: &code, Created: now, Started: &now, Ended: &now})
	if w.Kind != provenance.KindExecution || w.ExecutionID != "exec_0000000000000001" || w.Created == nil || !w.Created.Equal(now) ||
		w.State != "failed" || *w.ExitCode != 3 || w.EnvironmentID != "py311" || w.Runner != "local" || w.Session != "s" {
		t.Fatalf("%+v", w)
	}
}

func TestGetFileProvenanceModes(t *testing.T) {
	e := newProvEnv(t)
	e.write(t, "notes.txt", "alpha\nbeta\n")
	if _, err := e.prov.Scan(context.Background(), provenance.Writer{Kind: provenance.KindUnknown, Note: "server start"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	start := time.Now()
	e.write(t, "notes.txt", "alpha\nBETA\ngamma\n")
	end := time.Now()
	code := 0
	w := ExecutionWriter(runner.Execution{ID: "exec_00000000000000ab", Command: "sed -i s/beta/BETA/ notes.txt", Runner: "local",
		Session: "s1", State: runner.Succeeded, ExitCode: &code, Created: start, Started: &start, Ended: &end})
	if _, err := e.prov.Scan(context.Background(), w); err != nil {
		t.Fatal(err)
	}

	res := e.call(t, "get_file_provenance", `{"path":"notes.txt"}`)
	var out FileProvenanceOut
	provDecode(t, res, &out)
	if res.IsError || out.Mode != "summary" || out.Origin != "execution" || out.Execution == nil || out.Execution.Command != "sed -i s/beta/BETA/ notes.txt" ||
		out.HistoryTotal != 2 || out.Parent == nil || out.Parent.PreviousRevision != out.History[1].RevisionID || out.History[1].Origin != "unknown" {
		t.Fatalf("summary: %s\n%+v", provText(res), out)
	}
	txt := provText(res)
	for _, want := range []string{"Origin: execution exec_00000000000000ab (sed -i", "exit code 0", "History (2 of 2", "origin unknown", `"revision":"` + out.History[1].RevisionID} {
		if !strings.Contains(txt, want) {
			t.Errorf("summary text lacks %q:\n%s", want, txt)
		}
	}
	old := out.History[1].RevisionID

	// An earlier revision, page by page.
	res = e.call(t, "get_file_provenance", fmt.Sprintf(`{"path":"notes.txt","revision":%q,"limit":1}`, old))
	provDecode(t, res, &out)
	if res.IsError || out.Mode != "revision" || out.Page.Content != "alpha\n" || out.Page.NextOffset == nil || *out.Page.NextOffset != 1 {
		t.Fatalf("revision page: %s", provText(res))
	}
	if !strings.Contains(provText(res), fmt.Sprintf(`More: get_file_provenance {"path":"notes.txt","revision":%q,"offset":1,"limit":1}`, old)) {
		t.Fatalf("continuation: %s", provText(res))
	}
	// A diff to the current revision.
	res = e.call(t, "get_file_provenance", fmt.Sprintf(`{"path":"notes.txt","diff_from":%q}`, old))
	provDecode(t, res, &out)
	if res.IsError || out.Mode != "diff" || *out.Page.Added != 2 || *out.Page.Removed != 1 || !strings.Contains(out.Page.Content, "-beta\n+BETA\n+gamma\n") {
		t.Fatalf("diff: %s", provText(res))
	}
	// PROV-JSON, which parses.
	res = e.call(t, "get_file_provenance", `{"path":"notes.txt","format":"prov-json"}`)
	provDecode(t, res, &out)
	var doc provenance.PROV
	if res.IsError || !out.Page.EOF || json.Unmarshal([]byte(out.Page.Content), &doc) != nil || len(doc.WasGeneratedBy) == 0 || len(doc.Activity) == 0 {
		t.Fatalf("prov-json: %s", provText(res))
	}

	for _, tc := range []struct{ args, want string }{
		{`{}`, `missing required argument(s) "path"`},
		{`{"path":"notes.txt","revision":"rev_0000000000000001","diff_from":"rev_0000000000000001"}`, "at most one of"},
		{`{"path":"notes.txt","diff_to":"rev_0000000000000001"}`, "diff_to needs diff_from"},
		{`{"path":"notes.txt","offset":5}`, "offset and limit page"},
		{`{"path":"notes.txt","format":"rdf"}`, "format"},
		{`{"path":"notes.txt","history_limit":101}`, "history_limit must be at most 100"},
		{`{"path":"notes.txt","revision":"rev_ffffffffffffffff"}`, "no revision"},
		{`{"path":"notes.txt","revision":"nope"}`, "not a revision id"},
		{`{"path":"missing.txt"}`, "does not exist"},
		{`{"path":"../x"}`, "leaves the workspace"},
		{`{"path":"notes.txt","revision":"` + old + `","offset":99}`, "past the end"},
	} {
		res := e.call(t, "get_file_provenance", tc.args)
		if !res.IsError || !strings.Contains(provText(res), tc.want) {
			t.Errorf("%s: %v %q (want %q)", tc.args, res.IsError, provText(res), tc.want)
		}
	}
	// A revision of another file is refused for this path.
	e.write(t, "other.txt", "x\n")
	res = e.call(t, "get_file_provenance", `{"path":"other.txt"}`)
	var other FileProvenanceOut
	provDecode(t, res, &other)
	res = e.call(t, "get_file_provenance", fmt.Sprintf(`{"path":"notes.txt","revision":%q}`, other.CurrentRevision))
	if !res.IsError || !strings.Contains(provText(res), "belongs to other.txt") {
		t.Fatalf("foreign revision: %s", provText(res))
	}
	if other.Origin != "unknown" || !strings.Contains(provText(e.call(t, "get_file_provenance", `{"path":"other.txt"}`)), "do not guess") {
		t.Fatalf("hand-made file: %+v", other)
	}
}

func provDecode(t *testing.T, r *mcp.CallToolResult, v any) {
	t.Helper()
	data, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("structured %s: %v", data, err)
	}
}
