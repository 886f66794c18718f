package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "scimcp.json")
	if err := os.WriteFile(file, []byte(`{"workspace":"/from-file","log-level":"debug","session-ttl":"5m","http":"127.0.0.1:1","mcpServers":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SCIMCP_CONFIG": file, "SCIMCP_LOG_LEVEL": "warn", "SCIMCP_DATA": "/from-env"}
	cfg, err := parseServe([]string{"--log-level", "error"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workspace != "/from-file" || cfg.Data != "/from-env" || cfg.LogLevel != "error" || cfg.SessionTTL != 5*time.Minute || cfg.HTTP != "127.0.0.1:1" {
		t.Fatalf("precedence flags > env > file > defaults broken: %+v", cfg)
	}
	if _, err := parseServe([]string{"--session-ttl", "soon"}, func(string) string { return "" }); err == nil {
		t.Fatal("bad duration accepted")
	}
	env = map[string]string{"SCIMCP_LOG_JSON": "maybe"}
	if _, err := parseServe(nil, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "SCIMCP_LOG_JSON") {
		t.Fatalf("bad boolean in env: %v", err)
	}
	if _, err := parseServe([]string{"stray"}, func(string) string { return "" }); err == nil {
		t.Fatal("stray argument accepted")
	}
}

func TestDefaultDataDirPerWorkspace(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data-home")
	a, b := defaultDataDir("/work/projA"), defaultDataDir("/other/projA")
	if a == b || !strings.HasPrefix(a, "/data-home/scimcp/workspaces/projA-") {
		t.Fatalf("data dirs %q %q", a, b)
	}
}

// buildBinary builds scimcp once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SCIMCP_BIN"); p != "" {
		return p
	}
	bin := filepath.Join(t.TempDir(), "scimcp")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryStdioAndSecondProcess drives the built binary over stdio: stdout
// carries only JSON-RPC frames, and a second server on the same data folder
// exits non-zero, promptly, naming the folder and the owner's PID.
func TestBinaryStdioAndSecondProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	ws, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "x.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--workspace", ws, "--data", data, "--log-level", "debug")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	send := func(s string) { io.WriteString(stdin, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"x.txt"}}}`)
	send(`this is not json`)
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + strings.Repeat("a", 10<<20) + `"}}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)

	// While it runs, a second server on the same data folder must give up.
	start := time.Now()
	out, err := exec.Command(bin, "serve", "--workspace", ws, "--data", data).CombinedOutput()
	if err == nil {
		t.Fatalf("second server on the same data folder exited 0: %s", out)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("second server took %v to give up", took)
	}
	if !strings.Contains(string(out), data) || !strings.Contains(string(out), fmt.Sprintf("PID %d", cmd.Process.Pid)) {
		t.Fatalf("second server's message must name %s and PID %d: %s", data, cmd.Process.Pid, out)
	}

	seen := map[float64]string{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for len(seen) < 5 && sc.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Fatalf("stdout carried a non-JSON-RPC line: %.200q", sc.Text())
		}
		id, _ := msg["id"].(float64)
		seen[id] = sc.Text()
	}
	if !strings.Contains(seen[2], "hello") {
		t.Fatalf("read_file over stdio: %s", seen[2])
	}
	if !strings.Contains(seen[0], "error") {
		t.Fatalf("malformed JSON got no JSON-RPC error: %v", seen)
	}
	if !strings.Contains(seen[3], `"isError":true`) || !strings.Contains(seen[3], "path is") {
		t.Fatalf("10 MB path: %.300s", seen[3])
	}
	if _, ok := seen[4]; !ok {
		t.Fatalf("server stopped answering after bad input: %v", seen)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server exit after stdin closed: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit after stdin closed")
	}
	if _, err := os.Stat(filepath.Join(data, "state.db")); err != nil {
		t.Fatalf("no state.db: %v", err)
	}
	if !strings.Contains(stderr.String(), "serving") {
		t.Fatalf("logs did not go to stderr: %s", stderr.String())
	}
}

func TestRefusesPublicListenWithoutToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "serve", "--http", "0.0.0.0:0", "--workspace", t.TempDir(), "--data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without a bearer token") {
		t.Fatalf("listening on 0.0.0.0 without a token: err=%v %s", err, out)
	}
}

// TestEnvExampleListsEverySetting keeps .env.example complete: every
// setting's variable appears in it.
func TestEnvExampleListsEverySetting(t *testing.T) {
	data, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	var c config
	for _, s := range c.settings() {
		if !strings.Contains(string(data), "\n"+s.env+"=") {
			t.Errorf(".env.example lacks %s (--%s)", s.env, s.name)
		}
	}
}

// TestBinaryServesTheWholeCatalogue guards the wiring in serve: the built
// binary lists every tool the catalogue defines (each has a golden snapshot
// in toolkit/testdata/toolsnaps). paper_extract_pdf needs poppler, which CI
// installs.
func TestBinaryServesTheWholeCatalogue(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	snaps, _ := filepath.Glob("../../toolkit/testdata/toolsnaps/*.snap.json")
	if len(snaps) == 0 {
		t.Fatal("no tool snapshots found")
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "serve", "--workspace", t.TempDir(), "--data", t.TempDir(), "--log-level", "error")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.ID == 2 {
			for _, tl := range msg.Result.Tools {
				listed[tl.Name] = true
			}
		}
	}
	for _, s := range snaps {
		name := strings.TrimSuffix(filepath.Base(s), ".snap.json")
		if !listed[name] {
			t.Errorf("scimcp serve does not list %s", name)
		}
	}
}

// doctor starts each configured MCP source and says which answer: here a
// real one (this scimcp binary, serving over stdio) and one that cannot
// start.
func TestDoctorChecksSources(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	file := filepath.Join(dir, "sources.json")
	cfg := fmt.Sprintf(`{"mcpServers":{
		"self":   {"command": %q, "args": ["serve", "--workspace", %q, "--data", %q]},
		"broken": {"command": "/nonexistent/mcp-server"},
		"off":    {"command": "whatever", "disabled": true}}}`, bin, ws, filepath.Join(dir, "data"))
	os.WriteFile(file, []byte(cfg), 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"doctor", "--sources", file}, strings.NewReader(""), &out, &errb)
	o := out.String()
	if code != 1 || !regexp.MustCompile(`ok +self .*: \d+ tools`).MatchString(o) || !regexp.MustCompile(`failed +broken .*nonexistent`).MatchString(o) ||
		!regexp.MustCompile(`disabled +off`).MatchString(o) || !strings.Contains(o, "1 of 3 sources failed") {
		t.Fatalf("doctor exited %d:\n%s\n%s", code, o, errb.String())
	}
	// Without sources it only reports the machine.
	out.Reset()
	if code := run([]string{"doctor"}, strings.NewReader(""), &out, &errb); code != 0 || strings.Contains(out.String(), "MCP sources") {
		t.Fatalf("plain doctor exited %d:\n%s", code, out.String())
	}
}

// The example files in examples/ are read by the real loaders.
func TestExampleFilesLoad(t *testing.T) {
	cfg, err := parseServe([]string{"--config", "../../examples/scimcp.json", "--sources", "../../examples/sources.json"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP != "127.0.0.1:8765" || cfg.SessionTTL != 30*time.Minute {
		t.Fatalf("examples/scimcp.json: %+v", cfg)
	}
	srcs, err := cfg.sourceConfigs()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range srcs {
		got[s.Name] = s.IsHTTP()
	}
	if len(srcs) != 3 || got["papers"] || got["everything"] || !got["lab"] {
		t.Fatalf("examples/sources.json: %+v", srcs)
	}
	for _, f := range []string{"claude-code.mcp.json", "claude-desktop.json", "vscode.mcp.json"} {
		data, err := os.ReadFile(filepath.Join("../../examples", f))
		if err != nil || !json.Valid(data) {
			t.Errorf("%s: not valid JSON (%v)", f, err)
		}
	}
}
