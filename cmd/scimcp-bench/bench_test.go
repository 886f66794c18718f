package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var smallShape = Shape{TreeGroups: 2, TreeSubs: 3, TreeFiles: 4, FlatFiles: 200, BigLines: 3000, SmallLines: 100}

func TestLine(t *testing.T) {
	l := Line(600001)
	if len(l) != LineBytes || l[LineBytes-1] != '\n' {
		t.Fatalf("line is %d bytes (%q), want %d ending in a newline", len(l), l, LineBytes)
	}
	if !bytes.HasPrefix(l, []byte("line 0600001 ")) {
		t.Fatalf("line 600001 = %q", l)
	}
	if !bytes.Equal(l, Line(600001)) {
		t.Fatal("Line is not deterministic")
	}
	if bytes.Equal(l[13:], Line(600002)[13:]) {
		t.Fatal("neighbouring lines have the same filler")
	}
}

// hashTree hashes every path and file content under root.
func hashTree(t *testing.T, root string) (string, int) {
	t.Helper()
	h := sha256.New()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		h.Write([]byte(rel + "\x00"))
		if !d.IsDir() {
			files++
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), files
}

func TestFixturesAreDeterministic(t *testing.T) {
	a, err := MakeFixtures(t.TempDir(), smallShape)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MakeFixtures(t.TempDir(), smallShape)
	if err != nil {
		t.Fatal(err)
	}
	ha, na := hashTree(t, a.Root)
	hb, nb := hashTree(t, b.Root)
	if ha != hb {
		t.Fatal("two fixture sets of the same shape differ")
	}
	want := smallShape.TreeFileCount() + smallShape.FlatFiles + 2
	if na != want || nb != want {
		t.Fatalf("%d and %d files, want %d", na, nb, want)
	}
	st, err := os.Stat(a.Big)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(smallShape.BigLines*LineBytes) {
		t.Fatalf("big.txt is %d bytes, want %d", st.Size(), smallShape.BigLines*LineBytes)
	}
	// Remaking in place replaces, not adds.
	c, err := MakeFixtures(filepath.Dir(a.Root), smallShape)
	if err != nil {
		t.Fatal(err)
	}
	if hc, _ := hashTree(t, c.Root); hc != ha {
		t.Fatal("remaking the fixtures in place changed them")
	}
	if FullShape.TreeFileCount() != 5000 || FullShape.BigLines*LineBytes != 50<<20 {
		t.Fatalf("the full shape is %d tree files and %d bytes, want 5,000 and 50 MiB", FullShape.TreeFileCount(), FullShape.BigLines*LineBytes)
	}
}

func page(first, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.Write(Line(first + i))
	}
	return b.String()
}

func TestCheckPage(t *testing.T) {
	right := page(600001, 640)
	tests := []struct {
		name  string
		text  string
		check PageCheck
		ok    bool
	}{
		{"right", right, PageCheck{First: 600001, Lines: 640}, true},
		{"right with a header and a footer", "[Reading 640 lines]\n\n" + right + "[big.txt: lines 600001–600640 of 819200]", PageCheck{First: 600001, Lines: 640}, true},
		{"CRLF", strings.ReplaceAll(right, "\n", "\r\n"), PageCheck{First: 600001, Lines: 640}, true},
		{"one line late", page(600002, 640), PageCheck{First: 600001, Lines: 640}, false},
		{"one line early", page(600000, 640), PageCheck{First: 600001, Lines: 640}, false},
		{"a line short", page(600001, 639), PageCheck{First: 600001, Lines: 640}, false},
		{"a line too many", page(600001, 641), PageCheck{First: 600001, Lines: 640}, false},
		{"a line missing in the middle", page(600001, 100) + page(600102, 540), PageCheck{First: 600001, Lines: 640}, false},
		{"a corrupted line", strings.Replace(right, "line 0600300 ", "line 0600300 X", 1)[:len(right)], PageCheck{First: 600001, Lines: 640}, false},
		{"wrong filler, right number", page(600001, 10) + "line 0600011 " + strings.Repeat("a", fillerLen) + "\n", PageCheck{First: 600001, Lines: 11}, false},
		{"empty", "", PageCheck{First: 1}, false},
		{"no count: any length", page(1, 5), PageCheck{First: 1}, true},
		{"head of a longer text", page(600001, 1000), PageCheck{First: 600001, Lines: 640, Take: "head"}, true},
		{"head, one line late", page(600002, 1000), PageCheck{First: 600001, Lines: 640, Take: "head"}, false},
		{"tail of a longer text", page(1, 1000), PageCheck{First: 361, Lines: 640, Take: "tail"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := CheckPage(tt.text, tt.check)
			if (why == "") != tt.ok {
				t.Fatalf("CheckPage = %q, want ok=%v", why, tt.ok)
			}
		})
	}
}

func TestFrameScanner(t *testing.T) {
	stream := strings.Join([]string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"{\"id\":99, \"method\":\"x\"}\n"}],"structuredContent":{"id":5}}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`,
		`{"result":{"tools":[]},"jsonrpc":"2.0","id":8}`,
		`{"jsonrpc":"2.0","id":"abc","method":"roots/list"}`,
		`{"jsonrpc": "2.0", "id" : "s-1" , "error":{"code":-32601,"message":"no"}}`,
		``,
	}, "\n")
	for _, chunk := range []int{1, 3, 17, len(stream)} {
		var s frameScanner
		var got []string
		for i := 0; i < len(stream); i += chunk {
			s.feed([]byte(stream[i:min(i+chunk, len(stream))]), func(id string) { got = append(got, id) })
		}
		want := []string{`7`, `8`, `"s-1"`}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("chunks of %d: responses %v, want %v", chunk, got, want)
		}
	}
}

func TestWireTimesRequests(t *testing.T) {
	var w wire
	t0 := time.Now()
	w.sending([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}`+"\n"), t0)
	w.sending([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"), t0)
	w.scan.feed([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`+"\n"), func(id string) { w.received(id, t0.Add(time.Millisecond)) })
	d := w.take("tools/call")
	if len(d) != 1 || d[0] != time.Millisecond {
		t.Fatalf("latencies %v, want [1ms]", d)
	}
	if len(w.take("tools/call")) != 0 {
		t.Fatal("take did not forget")
	}
}

func TestSplitWords(t *testing.T) {
	got, err := splitWords(`bin/scimcp serve --workspace '{fixtures}' --data "a b" c\ d`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bin/scimcp", "serve", "--workspace", "{fixtures}", "--data", "a b", "c d"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := splitWords(`a "b`); err == nil {
		t.Fatal("an unterminated quote was accepted")
	}
}

func TestParseServerFlag(t *testing.T) {
	s, err := parseServerFlag("scimcp=bin/scimcp serve --workspace {fixtures}")
	if err != nil || len(s.Command) != 4 || s.Scenarios[scFarPage] == nil {
		t.Fatalf("scimcp: %+v, %v", s, err)
	}
	s, err = parseServerFlag("fs-http=http://127.0.0.1:1/mcp")
	if err != nil || s.URL == "" || s.Scenarios[scListTree].Tool != "directory_tree" {
		t.Fatalf("fs-http: %+v, %v", s, err)
	}
	if _, err := parseServerFlag("noequals"); err == nil {
		t.Fatal("a flag without = was accepted")
	}
}

func TestPresetsAreValid(t *testing.T) {
	c := &Config{Servers: []ServerConfig{
		{Name: "scimcp", Command: []string{"x"}, Scenarios: scimcpPreset()},
		{Name: "filesystem", Command: []string{"x"}, Scenarios: filesystemPreset()},
		{Name: "desktop-commander", Command: []string{"x"}, Scenarios: desktopCommanderPreset()},
	}}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"servers":[{"name":"scimcp","command":["x"],"scenarios":{"far_page":{"tool":"read_file","args":{"path":"big.txt","offset":5}}}}]}`), 0o644)
	lc, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Servers[0].Scenarios[scFarPage].Args["offset"] != float64(5) || lc.Servers[0].Scenarios[scList500] == nil {
		t.Fatalf("an override did not lay over the preset: %+v", lc.Servers[0].Scenarios)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if percentile(d, 50) != 50 || percentile(d, 95) != 95 || percentile(d, 99) != 99 || percentile(d[:1], 99) != 1 {
		t.Fatal("nearest-rank percentiles are off")
	}
}

// TestAgainstScimcp runs the harness on small fixtures against the built
// scimcp (SCIMCP_BIN), with a right page check, a deliberately wrong one
// (the page one line early, as an off-by-one server would return) and a tool
// that does not exist.
func TestAgainstScimcp(t *testing.T) {
	bin := os.Getenv("SCIMCP_BIN")
	if bin == "" {
		t.Skip("SCIMCP_BIN is not set")
	}
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	fx, err := MakeFixtures(dir, smallShape)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "tmp"), 0o755)
	sc := scimcpPreset()
	sc[scFarPage] = &Mapping{Tool: "read_file", Args: map[string]any{"path": "big.txt", "offset": 1000}, Page: &PageCheck{First: 1001, Lines: farPageLines}}
	sc[scList500] = &Mapping{Tool: "read_file", Args: map[string]any{"path": "big.txt", "offset": 1000}, Page: &PageCheck{First: 1000, Lines: farPageLines}}
	sc[scListTree] = &Mapping{Tool: "no_such_tool", Args: map[string]any{}}
	cfg := &Config{Baseline: "scimcp", Servers: []ServerConfig{{
		Name: "scimcp", Command: []string{bin, "serve", "--workspace", "{fixtures}", "--data", "{tmp}", "--log-level", "warn"}, Scenarios: sc,
	}}}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	rp := &Report{Baseline: "scimcp", Servers: []ServerReport{{Name: "scimcp"}}}
	b := &Bench{
		h:   &Harness{scratch: dir, exp: fixtureExpander(fx), timeout: 10 * time.Second, logf: t.Logf},
		cfg: cfg, report: rp, runs: 5, coldRuns: 1, warmup: 1, rounds: 1, duration: 200 * time.Millisecond,
		inflight: 8, clients: 2,
		only: map[string]bool{scColdStart: true, scFarPage: true, scList500: true, scListTree: true, scInflight1: true, scInflight8: true, scStoredRead: true},
	}
	// A safety net only: the run takes a few seconds on an idle machine.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.Run(ctx)
	rp.checkTargets()
	get := func(id string) *Result {
		r := rp.result(id, "scimcp")
		if r == nil {
			t.Fatalf("no result for %s", id)
		}
		return r
	}
	for _, id := range []string{scColdStart, scListFirst, scFarPage, scInflight1, scInflight8, scStoredRead} {
		r := get(id)
		if r.Status != statusOK || r.Errors != 0 || r.Wrong != 0 || r.P50Ms <= 0 {
			t.Errorf("%s: status %q, %d errors, %d wrong, p50 %.3f ms: %s", id, r.Status, r.Errors, r.Wrong, r.P50Ms, r.FirstProblem)
		}
		if id != scColdStart && id != scListFirst && r.Latency != "wire" {
			t.Errorf("%s: latency measured at %q, want wire", id, r.Latency)
		}
	}
	if r := get(scFarPage); r.PeakRSSKiB <= 0 || r.WireBytesPerCall < float64(farPageLines*LineBytes) {
		t.Errorf("far_page: peak RSS %d KiB, %.0f bytes per call on the wire", r.PeakRSSKiB, r.WireBytesPerCall)
	}
	if r := get(scInflight8); r.Processes != 2 || r.CallsPerSec <= 0 {
		t.Errorf("inflight_8_clients: %d processes, %.0f calls/s", r.Processes, r.CallsPerSec)
	}
	if r := get(scList500); r.Wrong != r.Calls || r.Calls == 0 || !strings.Contains(r.FirstProblem, "want line 1000") {
		t.Errorf("the page one line off was not flagged on every call: %d wrong of %d (%s)", r.Wrong, r.Calls, r.FirstProblem)
	}
	if r := get(scListTree); r.Status != statusToolMissing {
		t.Errorf("a missing tool gave status %q", r.Status)
	}
	var buf bytes.Buffer
	rp.WriteText(&buf)
	rp.WriteMarkdown(&buf)
	if !strings.Contains(buf.String(), "far_page") {
		t.Error("the table has no far_page row")
	}
	if t.Failed() {
		t.Log(buf.String())
	}
}

func TestFakeUpstream(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	go func() {
		serveFakeUpstream(1000, sr, sw)
		sw.Close()
	}()
	c := client.NewClient(transport.NewIO(cr, cw, nil), client.WithProtocolVersion(protocolVersion))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, initRequest()); err != nil {
		t.Fatal(err)
	}
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tl := range res.Tools {
		seen[tl.Name] = true
	}
	if len(res.Tools) != 1000 || len(seen) != 1000 || !seen["fit_spectrum"] {
		t.Fatalf("%d tools, %d distinct names, fit_spectrum listed: %v", len(res.Tools), len(seen), seen["fit_spectrum"])
	}
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = "fit_spectrum", map[string]any{"text": "hi"}
	out, err := c.CallTool(ctx, req)
	if err != nil || textOf(out) != "fit_spectrum: hi" {
		t.Fatalf("tools/call: %q, %v", textOf(out), err)
	}
}

func TestOnly(t *testing.T) {
	s := ServerConfig{Name: "x", Command: []string{"x"}, Only: []string{scColdStart, scToolSearch}}
	if !s.runs(scColdStart) || !s.runs(scListFirst) || !s.runs(scToolSearch) || s.runs(scFarPage) {
		t.Fatal("only does not select the right scenarios")
	}
	c := &Config{Servers: []ServerConfig{{Name: "x", Command: []string{"x"}, Only: []string{"nope"}}}}
	if c.validate() == nil {
		t.Fatal("an unknown scenario in only was accepted")
	}
}
