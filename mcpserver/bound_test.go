package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/toolkit"
)

// echoTool returns n numbered lines, each of the given width: a stand-in for
// a tool with large output (run_shell later).
func echoTool() toolkit.Tool {
	type in struct {
		Lines int `json:"lines"`
		Width int `json:"width"`
	}
	return toolkit.Define(toolkit.Spec{Name: "emit", Description: "test", Group: toolkit.GroupBase},
		func(ctx context.Context, a in) (toolkit.Result[struct{}], error) {
			var b strings.Builder
			for i := 1; i <= a.Lines; i++ {
				l := fmt.Sprintf("emitted line %d ", i)
				b.WriteString(l + strings.Repeat(".", max(a.Width-len(l)-1, 0)) + "\n")
			}
			return toolkit.Result[struct{}]{Text: b.String()}, nil
		})
}

func outputMeta(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if r.Meta == nil {
		return nil
	}
	m, _ := r.Meta.AdditionalFields[MetaOutputKey].(map[string]any)
	return m
}

func TestBoundThroughClient(t *testing.T) {
	e := newEnv(t, nil, echoTool())
	c := e.connect(t)

	// Below 8 KiB: unchanged, no ref.
	small := call(t, c, "emit", `{"lines":10,"width":40}`)
	if outputMeta(t, small) != nil || strings.Contains(text(small), "ref_") {
		t.Fatalf("small result got a ref: %s", text(small))
	}
	// Between 8 and 50 KiB: full text plus a ref.
	mid := call(t, c, "emit", `{"lines":300,"width":100}`)
	m := outputMeta(t, mid)
	if m == nil || m["preview"] != false || !strings.Contains(text(mid), "emitted line 300 ") || !strings.Contains(text(mid), m["ref"].(string)) {
		t.Fatalf("mid-size result: meta=%v", m)
	}
	// Above 2,000 lines: preview + ref, and every line recoverable.
	big := call(t, c, "emit", `{"lines":20000,"width":60}`)
	m = outputMeta(t, big)
	if m == nil || m["preview"] != true || strings.Contains(text(big), "emitted line 10000 ") || len(text(big)) > 50*1024 {
		t.Fatalf("big result not previewed: %d bytes, meta=%v", len(text(big)), m)
	}
	ref := m["ref"].(string)
	if !strings.Contains(text(big), ref) || !strings.Contains(text(big), "emitted line 20000 ") {
		t.Fatal("preview must name the ref and show the tail")
	}
	res := call(t, c, "read_tool_output", fmt.Sprintf(`{"ref":%q,"query":"EMITTED LINE 12345 "}`, ref))
	var out toolkit.ReadToolOutputOut
	structured(t, res, &out)
	if res.IsError || out.TotalMatches == nil || *out.TotalMatches != 1 || out.Matches[0].Line != 12345 {
		t.Fatalf("search: %s", text(res))
	}
	res = call(t, c, "read_tool_output", fmt.Sprintf(`{"ref":%q,"offset":9999,"limit":2}`, ref))
	structured(t, res, &out)
	if !strings.HasPrefix(out.Content, "emitted line 10000 ") || *out.NextOffset != 10001 {
		t.Fatalf("line range: %s", text(res))
	}
	// read_tool_output is self-bounded: its own answers are never stored.
	if outputMeta(t, res) != nil {
		t.Fatal("read_tool_output's answer was stored again")
	}
	// Modes are exclusive.
	res = call(t, c, "read_tool_output", fmt.Sprintf(`{"ref":%q,"offset":1,"query":"x"}`, ref))
	if !res.IsError || !strings.Contains(text(res), "exactly one mode") {
		t.Fatalf("mixed modes: %s", text(res))
	}
	res = call(t, c, "read_tool_output", `{"ref":"ref_nothinghere"}`)
	if !res.IsError || !strings.Contains(text(res), "expected form") {
		t.Fatalf("malformed ref: %s", text(res))
	}

	// Another session cannot read the ref, and is told the same as for a
	// missing one.
	other := e.connect(t)
	res = call(t, other, "read_tool_output", fmt.Sprintf(`{"ref":%q,"offset":0}`, ref))
	if !res.IsError || !strings.Contains(text(res), "no stored output") {
		t.Fatalf("foreign session read the ref: %s", text(res))
	}

	// The stored file is the verbatim text.
	var rel string
	filepath.WalkDir(filepath.Join(e.data, "tool-outputs"), func(p string, d os.DirEntry, err error) error {
		if strings.HasSuffix(p, ref+".txt") {
			rel = p
		}
		return nil
	})
	data, err := os.ReadFile(rel)
	if err != nil || !strings.HasPrefix(string(data), "emitted line 1 ") || strings.Count(string(data), "\n") != 20000 {
		t.Fatalf("stored file: %v, %d lines", err, strings.Count(string(data), "\n"))
	}
}

// TestListFilesLargeTreeBounded: list_files on a big tree is a real tool
// whose result crosses 8 KiB, so it gets a ref that read_tool_output reads.
func TestListFilesLargeTreeBounded(t *testing.T) {
	e := newEnv(t, nil)
	for i := 0; i < 700; i++ {
		e.write(t, fmt.Sprintf("d%02d/sample-%04d.csv", i%30, i), "x")
	}
	c := e.connect(t)
	res := call(t, c, "list_files", "")
	m := outputMeta(t, res)
	if m == nil {
		t.Fatalf("list_files of 500 entries was not stored (%d bytes)", len(text(res)))
	}
	out := call(t, c, "read_tool_output", fmt.Sprintf(`{"ref":%q,"query":"d29/"}`, m["ref"]))
	var r toolkit.ReadToolOutputOut
	structured(t, out, &r)
	if out.IsError || r.TotalMatches == nil || *r.TotalMatches == 0 {
		t.Fatalf("search in stored listing: %s", text(out))
	}
}

// TestHTTPSessionSurvivesRestart: a client keeps its session id across a
// server restart and can still read its stored outputs; a DELETE ends the
// session for good.
func TestHTTPSessionSurvivesRestart(t *testing.T) {
	e := newEnv(t, nil, echoTool())
	serve := func() (*httptest.Server, func(context.Context)) {
		h, closeAll := e.srv.HTTPHandler(HTTPOptions{})
		return httptest.NewServer(h), closeAll
	}
	ts, closeAll := serve()
	tr, err := transport.NewStreamableHTTP(ts.URL + EndpointPath)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sid := c.GetSessionId()
	ref := outputMeta(t, call(t, c, "emit", `{"lines":3000,"width":50}`))["ref"].(string)

	// Restart: close sessions as a graceful shutdown does, close the store,
	// and serve again on another port from the same data folder.
	closeAll(context.Background())
	ts.Close()
	e.stop()
	e.start(t, nil, echoTool())
	ts2, closeAll2 := serve()
	defer func() { closeAll2(context.Background()); ts2.Close() }()

	// The client goes on with its session id (mcp-go's client insists on a
	// fresh initialize, so this is a raw request, as a reconnecting client's).
	r := post(t, ts2.URL+EndpointPath, "", fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_tool_output","arguments":{"ref":%q,"offset":2999}}}`, ref),
		map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"})
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK || !strings.Contains(string(body), "emitted line 3000 ") || strings.Contains(string(body), `"isError":true`) {
		t.Fatalf("after restart, the resumed session could not read its ref: %d %s", r.StatusCode, body)
	}
	// An unknown id is still refused.
	r = post(t, ts2.URL+EndpointPath, "", `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`,
		map[string]string{"Mcp-Session-Id": "mcp-session-00000000000000000000000000000000", "Mcp-Protocol-Version": "2025-06-18"})
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session id after restart: status %d", r.StatusCode)
	}
	// DELETE ends the session; the id is not accepted again.
	del, _ := http.NewRequest(http.MethodDelete, ts2.URL+EndpointPath, nil)
	del.Header.Set("Mcp-Session-Id", sid)
	if r, err := http.DefaultClient.Do(del); err != nil || r.StatusCode >= 300 {
		t.Fatalf("DELETE: %v %v", err, r.StatusCode)
	}
	rec, _, _ := e.store.GetSession(sid)
	if rec.EndedAt == nil {
		t.Fatal("DELETE did not end the session")
	}
	r = post(t, ts2.URL+EndpointPath, "", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"})
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("ended session id: status %d", r.StatusCode)
	}
}
