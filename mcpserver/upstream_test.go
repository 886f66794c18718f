package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/mcpserver/sources"
	"github.com/sciencediscovery/scimcp/toolkit"
)

// withUpstream configures the test upstream as source "up".
func withUpstream(extraTools int) func(*Options) {
	return func(o *Options) {
		o.Sources = []sources.Config{{
			Name:    "up",
			Command: os.Args[0],
			Env:     map[string]string{"SCIMCP_TEST_UPSTREAM": "1", "SCIMCP_TEST_UPSTREAM_TOOLS": fmt.Sprint(extraTools)},
		}}
	}
}

// startUpstream starts the sources and waits until "up" is ready.
func startUpstream(t *testing.T, e *testEnv) {
	t.Helper()
	e.srv.StartSources()
	t.Cleanup(e.srv.Close)
	deadline := time.Now().Add(20 * time.Second)
	for e.srv.SourceStates()["up"] != "ready" {
		if time.Now().After(deadline) {
			t.Fatalf("source not ready: %v", e.srv.SourceStates())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func listTools(t *testing.T, c *client.Client) map[string]mcp.Tool {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func TestDeferredToolsAndToolSearch(t *testing.T) {
	e := newEnv(t, withUpstream(0), fakeTool("whoami", "base"))
	startUpstream(t, e)
	a, b := e.connect(t), e.connect(t)

	var mu sync.Mutex
	changed := 0
	a.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/tools/list_changed" {
			mu.Lock()
			changed++
			mu.Unlock()
		}
	})

	tools := listTools(t, a)
	echo, ok := tools["mcp__up__echo"]
	if !ok || tools["tool_search"].Name == "" {
		t.Fatalf("tools/list lacks the deferred tool or tool_search: %v", slices.Collect(mapsKeys(tools)))
	}
	if echo.Meta == nil || echo.Meta.AdditionalFields[MetaDeferredKey] != true || strings.Contains(string(mustJSON(echo.InputSchema)), "text") {
		t.Fatalf("deferred tool is not a placeholder: %s", mustJSON(echo))
	}

	// Invalid arguments before promotion point to tool_search.
	res := call(t, a, "mcp__up__echo", `{"txt":"x"}`)
	if !res.IsError || !strings.Contains(text(res), "tool_search") {
		t.Fatalf("invalid call before promotion: %s", text(res))
	}
	// tool_search finds and promotes it for this session only.
	res = call(t, a, "tool_search", `{"query":"echo text back"}`)
	var so ToolSearchOut
	structured(t, res, &so)
	if len(so.Tools) == 0 || so.Tools[0].Name != "mcp__up__echo" || !slices.Contains(so.Promoted, "mcp__up__echo") {
		t.Fatalf("tool_search: %s", text(res))
	}
	if !strings.Contains(string(listTools(t, a)["mcp__up__echo"].RawInputSchema)+string(mustJSON(listTools(t, a)["mcp__up__echo"].InputSchema)), `"text"`) {
		t.Fatal("promoted tool lacks its schema in this session's tools/list")
	}
	if strings.Contains(string(mustJSON(listTools(t, b)["mcp__up__echo"].InputSchema)), `"text"`) {
		t.Fatal("promotion leaked into another session")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		n := changed
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no tools/list_changed to the searching session")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The call goes through, marked untrusted, with an invocation id.
	res = call(t, a, "mcp__up__echo", `{"text":"hello upstream"}`)
	if res.IsError || !strings.Contains(text(res), "echo: hello upstream") || !strings.Contains(text(res), "untrusted") {
		t.Fatalf("forwarded call: %s", text(res))
	}
	um, _ := res.Meta.AdditionalFields["scimcp/untrusted"].(map[string]any)
	invID, _ := um["mcpInvocationId"].(string)
	owner := strings.TrimPrefix(text(call(t, a, "whoami", "")), "ran whoami for ")
	inv, ok, err := e.srv.invocations.Get(owner, invID)
	if err != nil || !ok || inv.Source != "up" || inv.Tool != "echo" || inv.Outcome != "ok" || inv.ArgsSHA256 == "" {
		t.Fatalf("invocation record %q: %v %v %+v", invID, ok, err, inv)
	}
	if _, ok, _ := e.srv.invocations.Get("someone-else", invID); ok {
		t.Fatal("another owner can read the invocation")
	}

	// select: and regex: forms.
	res = call(t, b, "tool_search", `{"query":"select:mcp__up__pick,mcp__up__nope"}`)
	structured(t, res, &so)
	if len(so.Tools) != 1 || !slices.Contains(so.Unknown, "mcp__up__nope") || !strings.Contains(string(so.Tools[0].InputSchema), "oneOf") {
		t.Fatalf("select: %s", text(res))
	}
	// The oneOf keyword reaches the client's tools/list unchanged (read
	// raw: mcp-go's client decoding itself drops it).
	resp, err := b.GetTransport().SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(99)), Method: "tools/list"})
	if err != nil || !strings.Contains(string(resp.Result), `"oneOf":[{"required":["id"]},{"required":["barcode"]}]`) {
		t.Fatalf("oneOf lost in tools/list: %v", err)
	}
	if r := call(t, b, "mcp__up__pick", `{"barcode":"XX1"}`); !r.IsError {
		t.Fatalf("schema violation forwarded: %s", text(r))
	}
	if r := call(t, b, "mcp__up__pick", `{"barcode":"BC12"}`); r.IsError {
		t.Fatalf("valid oneOf call refused: %s", text(r))
	}
	res = call(t, b, "tool_search", `{"query":"regex:^mcp__up__(slow|grow)$","limit":5}`)
	structured(t, res, &so)
	if len(so.Tools) != 2 {
		t.Fatalf("regex: %s", text(res))
	}
	if r := call(t, b, "tool_search", `{"query":"regex:(unclosed"}`); !r.IsError {
		t.Fatal("a bad regex was accepted")
	}
}

func mapsKeys(m map[string]mcp.Tool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestLongNamesStayUniqueAndShort(t *testing.T) {
	e := newEnv(t, withUpstream(0))
	startUpstream(t, e)
	c := e.connect(t)
	var long []string
	for name := range listTools(t, c) {
		if len(name) > sources.MaxToolName {
			t.Errorf("name over %d characters: %s", sources.MaxToolName, name)
		}
		if strings.Contains(name, "very_long") {
			long = append(long, name)
		}
	}
	if len(long) != 2 || long[0] == long[1] {
		t.Fatalf("the two long names must stay distinct: %v", long)
	}
	for _, n := range long {
		if n != sources.ExposedName("up", strings.Repeat("very_long_tool_name_", 4)+"alpha") && n != sources.ExposedName("up", strings.Repeat("very_long_tool_name_", 4)+"omega") {
			t.Fatalf("name %s is not the stable ExposedName", n)
		}
	}
}

func TestUpstreamCrashRestartAndListChanged(t *testing.T) {
	e := newEnv(t, withUpstream(0))
	startUpstream(t, e)
	c := e.connect(t)
	call(t, c, "tool_search", `{"query":"select:mcp__up__crash,mcp__up__echo,mcp__up__grow"}`)
	res := call(t, c, "mcp__up__crash", `{}`)
	if !res.IsError {
		t.Fatalf("call to a crashing upstream: %s", text(res))
	}
	// Only the source's tools fail meanwhile; the server keeps serving.
	if r := call(t, c, "list_files", ""); r.IsError {
		t.Fatal("the server stopped serving when a source died")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := call(t, c, "mcp__up__echo", `{"text":"back"}`)
		if !r.IsError && strings.Contains(text(r), "echo: back") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream not back after a crash: %s %v", text(r), e.srv.SourceStates())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// list_changed from the upstream shows up as a new tool.
	call(t, c, "mcp__up__grow", `{}`)
	deadline = time.Now().Add(10 * time.Second)
	for listTools(t, c)["mcp__up__grown"].Name == "" {
		if time.Now().After(deadline) {
			t.Fatal("tool added upstream did not appear")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestToolSearchRanksAmongThousand(t *testing.T) {
	e := newEnv(t, withUpstream(1000))
	startUpstream(t, e)
	c := e.connect(t)
	if n := len(listTools(t, c)); n < 1000 {
		t.Fatalf("%d tools listed", n)
	}
	for _, q := range []string{"pubchem compound", "molecular formula SMILES", "compound by cid"} {
		res := call(t, c, "tool_search", fmt.Sprintf(`{"query":%q,"limit":3}`, q))
		var so ToolSearchOut
		structured(t, res, &so)
		if len(so.Tools) == 0 || so.Tools[0].Name != "mcp__up__get_compound_by_cid" {
			t.Errorf("query %q: %v", q, so.Tools)
		}
	}
}

func TestUpstreamProgressForwarded(t *testing.T) {
	e := newEnv(t, withUpstream(0))
	startUpstream(t, e)
	c := e.connect(t)
	var mu sync.Mutex
	var toks []any
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			toks = append(toks, n.Params.AdditionalFields["progressToken"])
			mu.Unlock()
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "mcp__up__slow"
	req.Params.Meta = &mcp.Meta{ProgressToken: "client-token-7"}
	if res, err := c.CallTool(context.Background(), req); err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(toks) < 3 || fmt.Sprint(toks[0]) != "client-token-7" {
		t.Fatalf("forwarded progress tokens: %v", toks)
	}
}

func TestDeferredOwnGroup(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Groups = append(o.Groups, "web")
		o.DeferredGroups = []toolkit.Group{"web"}
	}, fakeTool("web_probe", "web"))
	c := e.connect(t)
	tools := listTools(t, c)
	if tools["web_probe"].Meta == nil || tools["web_probe"].Meta.AdditionalFields[MetaDeferredKey] != true || tools["tool_search"].Name == "" {
		t.Fatalf("own deferred tool: %s", mustJSON(tools["web_probe"]))
	}
	if tools["read_file"].Meta != nil && tools["read_file"].Meta.AdditionalFields[MetaDeferredKey] == true {
		t.Fatal("a base tool was deferred")
	}
	res := call(t, c, "tool_search", `{"query":"select:web_probe"}`)
	var so ToolSearchOut
	structured(t, res, &so)
	if len(so.Tools) != 1 || so.Tools[0].Source != "scimcp" {
		t.Fatalf("tool_search over own tools: %s", text(res))
	}
	if d := listTools(t, c)["web_probe"]; d.Meta != nil && d.Meta.AdditionalFields[MetaDeferredKey] == true {
		t.Fatal("promotion did not replace the placeholder")
	}
	if r := call(t, c, "web_probe", ""); r.IsError {
		t.Fatalf("deferred own tool call: %s", text(r))
	}
}
