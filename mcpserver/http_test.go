package mcpserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/toolkit"
)

const testToken = "0123456789abcdef0123456789abcdef"

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func httpEnv(t *testing.T, o HTTPOptions) (*testEnv, *httptest.Server) {
	t.Helper()
	e := newEnv(t, nil)
	h, closeSessions := e.srv.HTTPHandler(o)
	ts := httptest.NewServer(h)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	return e, ts
}

func post(t *testing.T, url, token, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestHTTPAuth(t *testing.T) {
	e, ts := httpEnv(t, HTTPOptions{Token: testToken})
	url := ts.URL + EndpointPath
	for _, tok := range []string{"", "wrong-token-wrong-token-wrong-token", testToken + "x"} {
		res := post(t, url, tok, initBody, nil)
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: status %d", tok, res.StatusCode)
		}
	}
	if n := len(e.srv.Sessions()); n != 0 {
		t.Fatalf("unauthorized requests created %d sessions", n)
	}
	res := post(t, url, testToken, initBody, nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("with token: status %d, session %q", res.StatusCode, res.Header.Get("Mcp-Session-Id"))
	}
}

func TestHTTPClientSessions(t *testing.T) {
	e, ts := httpEnv(t, HTTPOptions{Token: testToken})
	e.write(t, "hello.txt", "hello over http\n")
	connect := func() *client.Client {
		tr, err := transport.NewStreamableHTTP(ts.URL+EndpointPath, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + testToken}))
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
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := connect(), connect()
	if a.GetSessionId() == "" || a.GetSessionId() == b.GetSessionId() {
		t.Fatalf("session ids %q %q", a.GetSessionId(), b.GetSessionId())
	}
	if res := call(t, a, "read_file", `{"path":"hello.txt"}`); res.IsError || !strings.HasPrefix(text(res), "hello over http\n") {
		t.Fatalf("read over http: %s", text(res))
	}
	// A made-up session id is refused (404), so a client cannot ride on a
	// session it was not given.
	res := post(t, ts.URL+EndpointPath, testToken, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		map[string]string{"Mcp-Session-Id": "not-a-session", "Mcp-Protocol-Version": "2025-06-18"})
	if res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusBadRequest {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("unknown session id: status %d %s", res.StatusCode, body)
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	_, ts := httpEnv(t, HTTPOptions{MaxBodyBytes: 1 << 20})
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	res := post(t, ts.URL+EndpointPath, "", big, nil)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB body: status %d", res.StatusCode)
	}
	// A chunked body (no Content-Length) is cut by MaxBytesReader.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+EndpointPath, io.MultiReader(bytes.NewReader([]byte(big))))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode < 400 {
		t.Fatalf("chunked 2 MiB body: status %d", r2.StatusCode)
	}
	// The server still answers.
	if res := post(t, ts.URL+EndpointPath, "", initBody, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("after oversized bodies: status %d", res.StatusCode)
	}
}

func TestHTTPForeignHostRefused(t *testing.T) {
	_, ts := httpEnv(t, HTTPOptions{})
	req, _ := http.NewRequest(http.MethodPost, ts.URL+EndpointPath, strings.NewReader(initBody))
	req.Host = "attacker.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host on loopback: status %d, want 403", res.StatusCode)
	}
}

func TestHTTPOriginAndSchemeCase(t *testing.T) {
	_, ts := httpEnv(t, HTTPOptions{Token: testToken, AllowedOrigins: []string{"https://lab.example.org"}})
	url := ts.URL + EndpointPath
	for origin, want := range map[string]int{
		"http://evil.example.com":  http.StatusForbidden,
		"null":                     http.StatusForbidden,
		"http://localhost:3000":    http.StatusOK,
		"http://127.0.0.1:9":       http.StatusOK,
		"https://lab.example.org":  http.StatusOK,
		"https://lab.example.org2": http.StatusForbidden,
	} {
		if res := post(t, url, testToken, initBody, map[string]string{"Origin": origin}); res.StatusCode != want {
			t.Errorf("Origin %s: status %d, want %d", origin, res.StatusCode, want)
		}
	}
	// The auth scheme is case-insensitive (RFC 9110 §11.1).
	res := post(t, url, "", initBody, map[string]string{"Authorization": "bearer " + testToken})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("lower-case scheme: status %d", res.StatusCode)
	}
	// GET and DELETE need a session id.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, url, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Accept", "text/event-stream")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s without session id: status %d", m, r.StatusCode)
		}
	}
}

func TestHTTPOtherPathsNotServed(t *testing.T) {
	_, ts := httpEnv(t, HTTPOptions{})
	for _, p := range []string{"/", "/mcp/extra", "/sse"} {
		res := post(t, ts.URL+p, "", initBody, nil)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d", p, res.StatusCode)
		}
	}
}

func TestCheckListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8765", "", true},
		{"localhost:8765", "", true},
		{"[::1]:8765", "", true},
		{"0.0.0.0:8765", "", false},
		{":8765", "", false},
		{"192.0.2.10:8765", "", false},
		{"0.0.0.0:8765", testToken, true},
		{"no-port", "", false},
	} {
		err := CheckListenAddr(tc.addr, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListenAddr(%q, token=%v) = %v", tc.addr, tc.token != "", err)
		}
	}
}

// serveHTTP serves e's current server over HTTP until stop; a restarted
// server needs a new one.
func serveHTTP(e *testEnv) (*httptest.Server, func()) {
	h, closeSessions := e.srv.HTTPHandler(HTTPOptions{})
	ts := httptest.NewServer(h)
	return ts, func() { closeSessions(context.Background()); ts.Close() }
}

// An HTTP client that resumes its session after a server restart does not
// initialize again; what its initialize declared (form elicitation, client
// name) is kept.
func TestHTTPResumedSessionKeepsItsInitialize(t *testing.T) {
	e := newEnv(t, nil)
	ts, stop := serveHTTP(e)
	res := post(t, ts.URL+EndpointPath, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"asking-client","version":"7"}}}`, nil)
	sid := res.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session id: %d", res.StatusCode)
	}
	io.ReadAll(res.Body)
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
	io.ReadAll(post(t, ts.URL+EndpointPath, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body)
	check := func(when string) {
		t.Helper()
		var found *Session
		for _, s := range e.srv.Sessions() {
			if s.ID == sid {
				found = &s
			}
		}
		if found == nil || !found.FormElicitation {
			t.Fatalf("%s: session %+v", when, found)
		}
		rec, ok, _ := e.store.GetSession(sid)
		if !ok || rec.ClientName != "asking-client" || !rec.FormElicitation || rec.ProtocolVersion != "2025-06-18" {
			t.Fatalf("%s: stored session %+v", when, rec)
		}
	}
	check("after initialize")
	stop()
	e.stop()
	e.start(t, nil)
	ts, stop = serveHTTP(e)
	defer stop()
	res = post(t, ts.URL+EndpointPath, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files","arguments":{}}}`, hdr)
	if body, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"result"`)) {
		t.Fatalf("resumed call: %d %s", res.StatusCode, body)
	}
	check("after the restart")
}

// The deferred tools a session loaded with tool_search stay loaded when its
// client resumes the session after a server restart.
func TestHTTPResumedSessionKeepsPromotions(t *testing.T) {
	deferPapers := func(o *Options) {
		o.Groups = append(o.Groups, toolkit.GroupPapers)
		o.DeferredGroups = []toolkit.Group{toolkit.GroupPapers}
	}
	e := newEnv(t, deferPapers)
	ts, stop := serveHTTP(e)
	res := post(t, ts.URL+EndpointPath, "", initBody, nil)
	sid := res.Header.Get("Mcp-Session-Id")
	io.ReadAll(res.Body)
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
	io.ReadAll(post(t, ts.URL+EndpointPath, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).Body)
	fullSchema := func(ts *httptest.Server) bool {
		t.Helper()
		body, _ := io.ReadAll(post(t, ts.URL+EndpointPath, "", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, hdr).Body)
		if !bytes.Contains(body, []byte(`"paper_extract_pdf"`)) {
			t.Fatalf("paper_extract_pdf not listed: %s", body)
		}
		return bytes.Contains(body, []byte(`artifactJobId`))
	}
	if fullSchema(ts) {
		t.Fatal("a deferred tool is listed with its parameters before tool_search")
	}
	io.ReadAll(post(t, ts.URL+EndpointPath, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tool_search","arguments":{"query":"select:paper_extract_pdf"}}}`, hdr).Body)
	if !fullSchema(ts) {
		t.Fatal("tool_search did not load paper_extract_pdf")
	}
	stop()
	e.stop()
	e.start(t, deferPapers)
	ts, stop = serveHTTP(e)
	defer stop()
	if !fullSchema(ts) {
		t.Fatal("the resumed session lost the tools it had loaded")
	}
}
