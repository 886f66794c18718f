package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// long reports whether the long variants were asked for
// (SCIMCP_LONG=1 go test ./cmd/scimcp -run Reliability).
func long() bool { return os.Getenv("SCIMCP_LONG") == "1" }

type ack struct {
	ref    string
	sha256 string
	lines  int
}

type artAck struct {
	id      string
	version int
	content string
}

type dlAck struct {
	job, path, sha256 string
}

// paperSource builds examples/papers-source and a library of one PDF, and
// returns the serve flags that make it the source "papers" with downloads
// allowed by policy (the harness client cannot be asked).
func paperSource(t *testing.T) ([]string, []byte) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "papers-source")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/papers-source").CombinedOutput(); err != nil {
		t.Fatalf("go build papers-source: %v\n%s", err, out)
	}
	paper := []byte("%PDF-1.4\n% the crash harness never parses it\n" + strings.Repeat("0123456789", 4000) + "\n%%EOF\n")
	os.MkdirAll(filepath.Join(dir, "library"), 0o755)
	os.WriteFile(filepath.Join(dir, "library", "crash-paper.pdf"), paper, 0o644)
	file := filepath.Join(dir, "sources.json")
	os.WriteFile(file, []byte(fmt.Sprintf(`{"mcpServers":{"papers":{"command":%q,"args":["--dir",%q]}}}`, bin, filepath.Join(dir, "library"))), 0o644)
	return []string{"--sources", file, "--download-policy", "allow"}, paper
}

func stdioClient(t *testing.T, bin, ws, data string, extra ...string) (*client.Client, *exec.Cmd) {
	t.Helper()
	var cmd *exec.Cmd
	tr := transport.NewStdioWithOptions(bin, nil, append([]string{"serve", "--workspace", ws, "--data", data, "--log-level", "warn"}, extra...),
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd = exec.Command(command, args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
			return cmd, nil
		}))
	c := client.NewClient(tr)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize after restart: %v", err)
	}
	return c, cmd
}

func toolCall(c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.CallTool(ctx, req)
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestReliabilityCrashSafety starts the binary, drives writes from several
// goroutines (stored outputs, executions that write files), kills it with
// SIGKILL at a random moment, restarts it, and checks that the store opens,
// every acknowledged stored output is served intact (its sha256 matches
// what the client was told), and executions that were running are lost.
func TestReliabilityCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	rounds := 6
	if long() {
		rounds = 60
	}
	bin := buildBinary(t)
	ws, data := t.TempDir(), t.TempDir()
	srcFlags, paper := paperSource(t)
	paperSum := sha256.Sum256(paper)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var acked []ack
	var arts []artAck
	var dls []dlAck
	var timerIDs []string
	var running []string
	checked, kills := 0, 0
	for round := 0; round < rounds; round++ {
		c, cmd := stdioClient(t, bin, ws, data, srcFlags...)
		// Verify everything acknowledged so far.
		for _, d := range dls {
			got, err := os.ReadFile(filepath.Join(ws, d.path))
			if sum := sha256.Sum256(got); err != nil || hex.EncodeToString(sum[:]) != d.sha256 {
				t.Fatalf("round %d: acknowledged download %s at %s is gone or differs: %v", round, d.job, d.path, err)
			}
			r, err := toolCall(c, "get_file_provenance", map[string]any{"path": d.path})
			if err != nil || r.IsError || !strings.Contains(resultText(r), d.job) {
				t.Fatalf("round %d: provenance of download %s lost: %v %s", round, d.job, err, resultText(r))
			}
			checked++
		}
		for _, a := range acked {
			r, err := toolCall(c, "read_tool_output", map[string]any{"ref": a.ref, "offset": 0, "limit": a.lines})
			if err != nil || r.IsError {
				t.Fatalf("round %d: acknowledged ref %s unreadable: %v %s", round, a.ref, err, resultText(r))
			}
			var out struct {
				Content string `json:"content"`
				EOF     bool   `json:"eof"`
			}
			b, _ := json.Marshal(r.StructuredContent)
			json.Unmarshal(b, &out)
			sum := sha256.Sum256([]byte(out.Content))
			if hex.EncodeToString(sum[:]) != a.sha256 || !out.EOF {
				t.Fatalf("round %d: ref %s served different bytes than acknowledged", round, a.ref)
			}
			checked++
		}
		for _, id := range running {
			r, err := toolCall(c, "execution_status", map[string]any{"execution_id": id})
			if err != nil || r.IsError {
				t.Fatalf("execution %s after restart: %v", id, err)
			}
			if st := fmt.Sprint(r.StructuredContent.(map[string]any)["execution"].(map[string]any)["state"]); st != "lost" && st != "succeeded" {
				t.Fatalf("execution %s was running at the kill; now %s", id, st)
			}
		}
		for _, a := range arts {
			r, err := toolCall(c, "read_artifact", map[string]any{"artifact_id": a.id, "version": a.version})
			if err != nil || r.IsError {
				t.Fatalf("round %d: acknowledged artifact %s v%d unreadable: %v %s", round, a.id, a.version, err, resultText(r))
			}
			if got := fmt.Sprint(r.StructuredContent.(map[string]any)["content"]); got != a.content {
				t.Fatalf("round %d: artifact %s v%d holds %q, acknowledged %q", round, a.id, a.version, got, a.content)
			}
			checked++
		}
		if len(timerIDs) > 0 {
			r, err := toolCall(c, "timer_list", nil)
			if err != nil || r.IsError {
				t.Fatalf("timer_list after restart: %v", err)
			}
			listed := fmt.Sprint(r.StructuredContent)
			for _, id := range timerIDs {
				if !strings.Contains(listed, id) {
					t.Fatalf("round %d: acknowledged timer %s is gone after the restart", round, id)
				}
				checked++
			}
		}
		running = nil
		// Drive writes until the kill.
		var mu sync.Mutex
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					n := 1500 + rand.Intn(3000) // the package-level source is safe for concurrent use
					r, err := toolCall(c, "run_shell", map[string]any{"command": fmt.Sprintf("seq 1 %d; echo g%d-%d > f%d.txt", n, g, i, g)})
					if err != nil || r == nil || r.IsError {
						return // the server died under us
					}
					if r.Meta != nil {
						if m, ok := r.Meta.AdditionalFields["scimcp/output"].(map[string]any); ok {
							mu.Lock()
							acked = append(acked, ack{ref: fmt.Sprint(m["ref"]), sha256: fmt.Sprint(m["sha256"]), lines: int(m["lines"].(float64))})
							mu.Unlock()
						}
					}
					if i%2 == 0 {
						r, err := toolCall(c, "declare_artifact", map[string]any{"path": fmt.Sprintf("f%d.txt", g), "name": fmt.Sprintf("crash/g%d", g)})
						if err == nil && r != nil && !r.IsError {
							e := r.StructuredContent.(map[string]any)["entries"].([]any)[0].(map[string]any)
							if e["ok"] == true {
								mu.Lock()
								arts = append(arts, artAck{id: fmt.Sprint(e["artifact_id"]), version: int(e["version"].(float64)), content: fmt.Sprintf("g%d-%d\n", g, i)})
								mu.Unlock()
							}
						}
						r, err = toolCall(c, "timer_create", map[string]any{"after_ms": 3_600_000, "message": fmt.Sprintf("crash check g%d-%d", g, i)})
						if err == nil && r != nil && !r.IsError {
							mu.Lock()
							timerIDs = append(timerIDs, fmt.Sprint(r.StructuredContent.(map[string]any)["timer_id"]))
							mu.Unlock()
						}
					}
					if i%3 == 0 {
						r, err := toolCall(c, "run_shell", map[string]any{"command": "sleep 30", "background": true})
						if err == nil && r != nil && !r.IsError {
							mu.Lock()
							running = append(running, fmt.Sprint(r.StructuredContent.(map[string]any)["execution_id"]))
							mu.Unlock()
						}
					}
				}
			}(g)
		}
		// Downloads from the paper source, once its tools are listed.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				r, err := toolCall(c, "tool_search", map[string]any{"query": "select:mcp__papers__search_papers"})
				if err != nil || r == nil || r.IsError {
					continue
				}
				r, err = toolCall(c, "mcp__papers__search_papers", map[string]any{"query": "crash"})
				if err != nil || r == nil || r.IsError || r.Meta == nil {
					continue // the source is still starting
				}
				m, ok := r.Meta.AdditionalFields["scimcp/untrusted"].(map[string]any)
				if !ok {
					t.Errorf("an upstream result without its untrusted marking: %v", r.Meta.AdditionalFields)
					return
				}
				inv := fmt.Sprint(m["mcpInvocationId"])
				dest := fmt.Sprintf("dl/r%d-%d.pdf", round, i)
				r, err = toolCall(c, "artifact_download", map[string]any{"mcpInvocationId": inv, "candidateId": "c1", "destinationPath": dest})
				if err != nil || r == nil || r.IsError {
					continue
				}
				out := r.StructuredContent.(map[string]any)
				if out["sha256"] != hex.EncodeToString(paperSum[:]) || out["path"] != dest {
					t.Errorf("download acknowledged with %v", out)
					return
				}
				mu.Lock()
				dls = append(dls, dlAck{job: fmt.Sprint(out["artifactJobId"]), path: dest, sha256: fmt.Sprint(out["sha256"])})
				mu.Unlock()
			}
		}()
		// Kill at a random moment once this round has had a write
		// acknowledged (a loaded machine may need a while for the first).
		mu.Lock()
		before := len(acked) + len(arts)
		mu.Unlock()
		for waited := 0; waited < 400; waited++ {
			mu.Lock()
			n := len(acked) + len(arts)
			mu.Unlock()
			if n > before {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Duration(100+rng.Intn(900)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		kills++
		close(stop)
		wg.Wait()
		c.Close()
		cmd.Wait()
	}
	t.Logf("crash safety: %d SIGKILLs survived; %d checks of acknowledged writes passed (%d stored outputs, %d artifact versions, %d timers, %d downloads)", kills, checked, len(acked), len(arts), len(timerIDs), len(dls))
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged; the harness tested nothing")
	}
}

// TestReliabilityHTTPLoad holds 64 concurrent HTTP sessions doing a mix of
// calls for a bounded time: no errors, p99 reported, memory flat afterwards,
// idle sessions reclaimed by the TTL.
func TestReliabilityHTTPLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dur := 8 * time.Second
	if long() {
		dur = 60 * time.Second
	}
	bin := buildBinary(t)
	ws, data := t.TempDir(), t.TempDir()
	for i := 0; i < 200; i++ {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%03d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("row %d\n", i), 300)), 0o644)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--http", addr, "--workspace", ws, "--data", data, "--session-ttl", "3s", "--log-level", "debug")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var logMu sync.Mutex
	var logLines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logLines = append(logLines, sc.Text())
			logMu.Unlock()
		}
	}()
	url := "http://" + addr + "/mcp"
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatal("server did not listen")
		}
		time.Sleep(50 * time.Millisecond)
	}
	rss := func() int {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				n, _ := strconv.Atoi(strings.Fields(l)[1])
				return n
			}
		}
		return 0
	}
	var calls, errors atomic.Int64
	var latMu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	var rssDuring int
	for s := 0; s < 64; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			tr, _ := transport.NewStreamableHTTP(url)
			c := client.NewClient(tr)
			if err := c.Start(context.Background()); err != nil {
				errors.Add(1)
				return
			}
			req := mcp.InitializeRequest{}
			req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
			if _, err := c.Initialize(context.Background(), req); err != nil {
				errors.Add(1)
				return
			}
			// No Close: the client goes away without DELETE, as hosts do;
			// the TTL must reclaim the session.
			for i := 0; time.Now().Before(deadline); i++ {
				var name string
				var args map[string]any
				switch i % 10 {
				case 0:
					name, args = "list_files", nil
				case 1:
					name, args = "run_shell", map[string]any{"command": "echo hi"}
				default:
					name, args = "read_file", map[string]any{"path": fmt.Sprintf("f%03d.txt", (s*7+i)%200), "offset": i % 200, "limit": 50}
				}
				start := time.Now()
				r, err := toolCall(c, name, args)
				d := time.Since(start)
				calls.Add(1)
				if err != nil || r.IsError {
					if errors.Add(1) <= 3 {
						if err != nil {
							t.Logf("%s: %v", name, err)
						} else {
							t.Logf("%s: %.300s", name, resultText(r))
						}
					}
					continue
				}
				latMu.Lock()
				lat = append(lat, d)
				latMu.Unlock()
			}
		}(s)
	}
	go func() {
		time.Sleep(dur / 2)
		rssDuring = rss()
	}()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if errors.Load() > 0 || len(lat) == 0 {
		t.Fatalf("%d errors in %d calls", errors.Load(), calls.Load())
	}
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	// Idle sessions are reclaimed by the TTL (3 s; the sweeper runs every
	// 1.5 s).
	time.Sleep(6 * time.Second)
	logMu.Lock()
	closed := 0
	for _, l := range logLines {
		if strings.Contains(l, "session closed") || strings.Contains(l, "Sweeping expired session") {
			closed++
		}
	}
	logMu.Unlock()
	after := rss()
	t.Logf("load: 64 HTTP sessions, %s, %d calls (%.0f/s), 0 errors, p50 %v, p99 %v; RSS %d KiB during, %d KiB after; %d session-end log lines",
		dur, calls.Load(), float64(calls.Load())/dur.Seconds(), p50, p99, rssDuring, after, closed)
	if closed < 64 {
		t.Fatalf("only %d of 64 idle sessions were reclaimed by the TTL", closed)
	}
	if after > 2*rssDuring+64*1024 {
		t.Fatalf("RSS grew after the load: %d KiB during, %d KiB after", rssDuring, after)
	}
}
