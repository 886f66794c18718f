package mcpserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// TestMain lets the test binary act as the sandbox helper (as the scimcp
// binary does with `scimcp __sandbox`).
func TestMain(m *testing.M) {
	if os.Getenv("SCIMCP_TEST_HELPER") == "1" {
		os.Exit(runner.SandboxMain(os.Args[1:]))
	}
	if os.Getenv("SCIMCP_TEST_UPSTREAM") == "1" {
		os.Exit(serveTestUpstream())
	}
	os.Exit(m.Run())
}

type testEnv struct {
	srv   *Server
	ws    *workspace.Workspace
	store *store.Store
	outs  *outputs.Store
	execs *runner.Executions
	dir   string
	data  string
}

// newEnv builds a server over a fresh workspace and data folder. extra tools
// are added to the catalogue; mutate adjusts the options.
func newEnv(t *testing.T, mutate func(*Options), extra ...toolkit.Tool) *testEnv {
	return newEnvTB(t, mutate, extra...)
}

func newEnvTB(t testing.TB, mutate func(*Options), extra ...toolkit.Tool) *testEnv {
	t.Helper()
	dir := t.TempDir()
	wsDir := filepath.Join(dir, "ws")
	if err := os.MkdirAll(wsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{ws: ws, dir: wsDir, data: filepath.Join(dir, "data")}
	t.Cleanup(func() { ws.Close() })
	e.start(t, mutate, extra...)
	return e
}

// start opens the data folder and builds a server over it; call stop first
// to simulate a restart.
func (e *testEnv) start(t testing.TB, mutate func(*Options), extra ...toolkit.Tool) {
	t.Helper()
	st, err := store.Open(e.data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	outs, err := outputs.New(st, outputs.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	local, err := runner.NewLocal(runner.LocalConfig{
		Workspace: e.dir, StateDir: filepath.Join(e.data, "sandbox"),
		Helper: []string{os.Args[0]}, HelperEnv: []string{"SCIMCP_TEST_HELPER=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Ready() }) // the sandbox is prepared in the background
	execs, err := runner.NewExecutions(runner.Config{Store: st, Runners: []runner.Runner{local}, CancelGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { execs.Shutdown(5 * time.Second) })
	opts := Options{Version: "test", Store: st, Outputs: outs,
		Tools: append(toolkit.Catalogue(toolkit.Services{Workspace: e.ws, Outputs: outs, Executions: execs, PaperRunner: local}), extra...)}
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.store, e.outs, e.execs = srv, st, outs, execs
}

// stop closes the data folder (the server process "exits").
func (e *testEnv) stop() { e.store.Close() }

func (e *testEnv) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// connect starts an initialized in-process client.
func (e *testEnv) connect(t *testing.T) *client.Client { return e.connectTB(t) }

func (e *testEnv) connectTB(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(e.srv.MCP())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "scimcp-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// call invokes a tool with raw JSON arguments.
func call(t *testing.T, c *client.Client, name, args string) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	if args != "" {
		req.Params.Arguments = json.RawMessage(args)
	}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	checkOutputSchema(t, c, name, res)
	return res
}

// checkOutputSchema validates a result's structuredContent against the
// tool's output schema, as strict clients (the TypeScript SDK) do.
func checkOutputSchema(t *testing.T, c *client.Client, name string, res *mcp.CallToolResult) {
	t.Helper()
	if res.IsError || (res.StructuredContent == nil && len(res.RawStructuredContent) == 0) {
		return
	}
	resp, err := c.GetTransport().SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1 << 40)), Method: "tools/list"})
	if err != nil {
		return
	}
	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	json.Unmarshal(resp.Result, &list)
	for _, tl := range list.Tools {
		if tl.Name != name || len(tl.OutputSchema) == 0 {
			continue
		}
		var sch jsonschema.Schema
		if err := json.Unmarshal(tl.OutputSchema, &sch); err != nil {
			t.Fatalf("%s: output schema: %v", name, err)
		}
		rs, err := sch.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema: %v", name, err)
		}
		data := res.RawStructuredContent
		if len(data) == 0 {
			data, _ = json.Marshal(res.StructuredContent)
		}
		var v any
		json.Unmarshal(data, &v)
		if err := rs.Validate(v); err != nil {
			t.Fatalf("%s: structuredContent does not match the output schema: %v\n%s", name, err, data)
		}
	}
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structuredContent into v.
func structured(t *testing.T, r *mcp.CallToolResult, v any) {
	t.Helper()
	var data []byte
	var err error
	if len(r.RawStructuredContent) > 0 {
		data = r.RawStructuredContent
	} else {
		data, err = json.Marshal(r.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("structuredContent %s: %v", data, err)
	}
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}
