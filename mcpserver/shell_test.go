package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/toolkit"
)

func TestRunShellShortCommand(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect(t)
	res := call(t, c, "run_shell", `{"command":"echo hi; echo $1-$2 >&2; exit 2","arguments":["a b","c"]}`)
	var out toolkit.RunShellOut
	structured(t, res, &out)
	if res.IsError || out.State != "failed" || out.ExitCode == nil || *out.ExitCode != 2 {
		t.Fatalf("run_shell: %s", text(res))
	}
	// stdout (a terminal) and stderr (a pipe) arrive through different
	// channels: each is complete, their relative order is not guaranteed.
	if len(out.Output) != len("hi\na b-c\n") || !strings.Contains(out.Output, "hi\n") || !strings.Contains(out.Output, "a b-c\n") || !out.OutputComplete || !strings.Contains(text(res), "a b-c\n") {
		t.Fatalf("output %q / text %s", out.Output, text(res))
	}
	// No state carries over: cd and export do not persist.
	call(t, c, "run_shell", `{"command":"cd /tmp && export FOO=bar"}`)
	res = call(t, c, "run_shell", `{"command":"pwd; echo FOO=$FOO"}`)
	structured(t, res, &out)
	if out.Output != "/workspace\nFOO=\n" {
		t.Fatalf("state persisted between calls: %q", out.Output)
	}
}

func TestRunShellScript(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "tools/sum.py", "import sys\nprint(sum(int(a) for a in sys.argv[1:]))\n")
	e.write(t, "tools/hello.sh", "#!/bin/sh\necho hello from $0 with \"$@\"\n")
	os.Chmod(filepath.Join(e.dir, "tools/hello.sh"), 0o755)
	c := e.connect(t)
	res := call(t, c, "run_shell", `{"scriptPath":"tools/sum.py","arguments":["1","2","39"]}`)
	var out toolkit.RunShellOut
	structured(t, res, &out)
	if out.State != "succeeded" || out.Output != "42\n" {
		t.Fatalf("python script: %s", text(res))
	}
	res = call(t, c, "run_shell", `{"scriptPath":"/workspace/tools/hello.sh","arguments":["x; rm -rf /"]}`)
	structured(t, res, &out)
	if out.Output != "hello from /workspace/tools/hello.sh with x; rm -rf /\n" {
		t.Fatalf("arguments must be argv, never a shell string: %q", out.Output)
	}
}

func TestRunShellBadInput(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.txt", "x")
	c := e.connect(t)
	for _, tc := range []struct{ args, want string }{
		{`{}`, "exactly one of command"},
		{`{"command":"true","scriptPath":"a.txt"}`, "exactly one of command"},
		{`{"command":""}`, "exactly one of command"},
		{`{"scriptPath":"../outside.sh"}`, "leaves the workspace"},
		{`{"scriptPath":"/etc/passwd"}`, "outside the workspace"},
		{`{"scriptPath":"missing.py"}`, "does not exist"},
		{`{"command":"echo","arguments":["a\u0000b"]}`, "NUL"},
		{`{"command":"true","wait_ms":-1}`, "wait_ms must be at least 0"},
		{`{"command":"true","wait_ms":100000}`, "wait_ms must be at most 45000"},
		{`{"command":"true","runner_id":"slurm"}`, "unknown runner_id"},
		{`{"command":"true","arguments":"a"}`, "arguments must be of type array"},
	} {
		res := call(t, c, "run_shell", tc.args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("run_shell %s: %v %q (want %q)", tc.args, res.IsError, text(res), tc.want)
		}
	}
	for _, tc := range []struct{ tool, args, want string }{
		{"execution_status", `{"execution_id":"exec_0000000000000000"}`, "no execution"},
		{"execution_status", `{"wait_ms":10}`, "needs an execution_id"},
		{"execution_logs", `{"execution_id":"nope"}`, "not an execution id"},
		{"execution_logs", `{"execution_id":"exec_0000000000000000","cursor":-5}`, "cursor must be at least 0"},
		{"execution_cancel", `{"execution_id":"exec_0000000000000000"}`, "no execution"},
	} {
		res := call(t, c, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s %s: %q (want %q)", tc.tool, tc.args, text(res), tc.want)
		}
	}
}

// TestLongCommandFollowedAndCancelled: a long command returns within
// wait_ms; its lines arrive through execution_logs while it runs; another
// session can neither see nor cancel it; cancel kills it; a second cancel
// says it already finished.
func TestLongCommandFollowedAndCancelled(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect(t)
	start := time.Now()
	res := call(t, c, "run_shell", `{"command":"for i in $(seq 1 100); do echo step $i; sleep 0.2; done","wait_ms":500}`)
	var out toolkit.RunShellOut
	structured(t, res, &out)
	if out.State != "running" || time.Since(start) > 10*time.Second {
		t.Fatalf("long command: %s", text(res))
	}
	id := out.ExecutionID
	var seen strings.Builder
	cursor := int64(0)
	for i := 0; i < 20 && !strings.Contains(seen.String(), "step 4\n"); i++ {
		r := call(t, c, "execution_logs", fmt.Sprintf(`{"execution_id":%q,"cursor":%d,"wait_ms":2000}`, id, cursor))
		var lo toolkit.ExecutionLogsOut
		structured(t, r, &lo)
		if lo.State != "running" || !lo.More {
			t.Fatalf("logs while running: %+v", lo)
		}
		seen.WriteString(lo.Text)
		cursor = lo.NextCursor
	}
	if !strings.HasPrefix(seen.String(), "step 1\nstep 2\n") {
		t.Fatalf("streamed log: %q", seen.String())
	}

	other := e.connect(t)
	if r := call(t, other, "execution_cancel", fmt.Sprintf(`{"execution_id":%q}`, id)); !r.IsError {
		t.Fatal("another session cancelled the execution")
	}
	if r := call(t, other, "execution_status", ""); strings.Contains(text(r), id) {
		t.Fatal("another session lists the execution")
	}

	r := call(t, c, "execution_cancel", fmt.Sprintf(`{"execution_id":%q}`, id))
	var co toolkit.ExecutionCancelOut
	structured(t, r, &co)
	if co.State != "cancelled" || co.AlreadyFinished {
		t.Fatalf("cancel: %s", text(r))
	}
	r = call(t, c, "execution_cancel", fmt.Sprintf(`{"execution_id":%q}`, id))
	structured(t, r, &co)
	if !co.AlreadyFinished || !strings.Contains(text(r), "Already finished") {
		t.Fatalf("second cancel: %s", text(r))
	}
	r = call(t, c, "execution_status", "")
	var so toolkit.ExecutionStatusOut
	structured(t, r, &so)
	if len(so.Executions) != 1 || so.Executions[0].State != "cancelled" {
		t.Fatalf("status list: %s", text(r))
	}
}

func TestRunShellProgress(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect(t)
	var mu sync.Mutex
	var got []mcp.JSONRPCNotification
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_shell"
	req.Params.Arguments = map[string]any{"command": "sleep 2.5; echo done"}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, x := range got {
		if x.Method == "notifications/progress" && fmt.Sprint(x.Params.AdditionalFields["progressToken"]) == "tok-1" {
			n++
		}
	}
	if n < 2 {
		t.Fatalf("%d progress notifications for a 2.5 s command, want ≥ 2 (got %+v)", n, got)
	}
}

func TestRunShellLargeOutputBounded(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect(t)
	res := call(t, c, "run_shell", `{"command":"seq 1 200000"}`)
	var out toolkit.RunShellOut
	structured(t, res, &out)
	if out.State != "succeeded" || out.OutputComplete || len(text(res)) > 60*1024 {
		t.Fatalf("large output: complete=%v, %d bytes of text", out.OutputComplete, len(text(res)))
	}
	if !strings.Contains(text(res), "200000\n") || !strings.Contains(text(res), "execution_logs") {
		t.Fatalf("large output must show the tail and how to read the rest")
	}
	// The whole log is readable page by page.
	var all strings.Builder
	cursor := int64(0)
	for {
		r := call(t, c, "execution_logs", fmt.Sprintf(`{"execution_id":%q,"cursor":%d}`, out.ExecutionID, cursor))
		var lo toolkit.ExecutionLogsOut
		structured(t, r, &lo)
		all.WriteString(lo.Text)
		cursor = lo.NextCursor
		if !lo.More {
			break
		}
	}
	lines := strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n")
	if len(lines) != 200000 || lines[0] != "1" || lines[199999] != "200000" {
		t.Fatalf("paged log: %d lines", len(lines))
	}
}
