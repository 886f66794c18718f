package runner_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/runner/runnertest"
)

// run runs a shell script in the runner and returns its exit and output.
func run(t *testing.T, r runner.Runner, script string, l runner.Limits) (runner.Exit, string) {
	t.Helper()
	out := &runnertest.Output{}
	h, err := r.Start(context.Background(), runner.Spec{ID: fmt.Sprint(time.Now().UnixNano()), Argv: []string{"/bin/bash", "-c", script}, Output: out, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runner.Exit, 1)
	go func() { done <- h.Wait() }()
	select {
	case e := <-done:
		return e, out.String()
	case <-time.After(60 * time.Second):
		h.Kill()
		t.Fatalf("%q did not end", script)
	}
	return runner.Exit{}, ""
}

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		t.Fatal("bubblewrap is not installed (apt-get install -y bubblewrap); the sandbox tests must run")
	}
}

// TestSandboxHolds runs as whatever user CI is (root here): nothing a
// command does may reach outside the workspace.
func TestSandboxHolds(t *testing.T) {
	requireBwrap(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "server-secret.txt")
	os.WriteFile(secret, []byte("SERVER SECRET"), 0o600)
	os.WriteFile(filepath.Join(secretDir, "zz-seen-only-by-listing"), nil, 0o600)
	ws := t.TempDir()
	r := newLocal(t, func(c *runner.LocalConfig) { c.Workspace = ws })

	t.Run("workspace is writable at /workspace", func(t *testing.T) {
		e, out := run(t, r, "pwd; echo data > made.txt", runner.Limits{})
		if e.Code != 0 || strings.TrimSpace(out) != "/workspace" {
			t.Fatalf("exit %+v, output %q", e, out)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "made.txt")); string(b) != "data\n" {
			t.Fatalf("file written in the sandbox not in the workspace: %q", b)
		}
	})
	t.Run("only the workspace and /tmp are writable", func(t *testing.T) {
		e, out := run(t, r, `for d in / /etc /usr /var /home /opt; do echo x > $d/probe 2>/dev/null && echo "WROTE $d"; done; echo x > /tmp/probe && echo tmp-ok; echo x > /workspace/probe && echo ws-ok`, runner.Limits{})
		if e.Code != 0 || strings.Contains(out, "WROTE") || !strings.Contains(out, "tmp-ok") || !strings.Contains(out, "ws-ok") {
			t.Fatalf("writable places: %+v %q", e, out)
		}
	})
	t.Run("no writes outside the workspace, even by remounting", func(t *testing.T) {
		marker := "scimcp-escape-" + fmt.Sprint(time.Now().UnixNano())
		script := fmt.Sprintf(`touch /usr/%[1]s; mount -o remount,rw,bind /usr 2>/dev/null && touch /usr/%[1]s;
			mount -t tmpfs none /mnt 2>/dev/null; echo x > /etc/%[1]s; echo x > /%[1]s; true`, marker)
		run(t, r, script, runner.Limits{})
		for _, p := range []string{"/usr/" + marker, "/etc/" + marker, "/" + marker} {
			if _, err := os.Stat(p); err == nil {
				os.Remove(p)
				t.Fatalf("the sandbox wrote %s on the host", p)
			}
		}
		e, out := run(t, r, "grep CapEff /proc/self/status", runner.Limits{})
		if e.Code != 0 || !strings.Contains(out, "0000000000000000") {
			t.Fatalf("the command holds capabilities: %q", out)
		}
	})
	t.Run("server files and environment are not visible", func(t *testing.T) {
		os.Setenv("SCIMCP_TOKEN", "tok-should-not-leak")
		defer os.Unsetenv("SCIMCP_TOKEN")
		e, out := run(t, r, fmt.Sprintf("cat %s; ls %s; ls /root; cat /etc/shadow; env", secret, secretDir), runner.Limits{})
		if strings.Contains(out, "SERVER SECRET") || strings.Contains(out, "zz-seen-only-by-listing") || strings.Contains(out, "tok-should-not-leak") {
			t.Fatalf("leak (exit %+v):\n%s", e, out)
		}
	})
	t.Run("no network", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan bool, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Close()
				accepted <- true
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		e, out := run(t, r, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED", port), runner.Limits{})
		select {
		case <-accepted:
			t.Fatal("the host listener accepted a connection from the sandbox")
		case <-time.After(200 * time.Millisecond):
		}
		if e.Code == 0 || strings.Contains(out, "CONNECTED") {
			t.Fatalf("connection from the sandbox succeeded: %+v %q", e, out)
		}
	})
	t.Run("no nested user namespaces", func(t *testing.T) {
		e, _ := run(t, r, "unshare -Ur true", runner.Limits{})
		if e.Code == 0 {
			t.Fatal("a nested user namespace could be created")
		}
	})
}

func TestSandboxLimits(t *testing.T) {
	requireBwrap(t)
	r := newLocal(t, nil)
	t.Run("memory", func(t *testing.T) {
		e, out := run(t, r, `python3 -c "b = bytearray(400*1024*1024); print('allocated', len(b))"`, runner.Limits{MemoryBytes: 64 << 20})
		if e.Code == 0 || strings.Contains(out, "allocated") {
			t.Fatalf("a 400 MB allocation passed a 64 MiB limit: %+v %q", e, out)
		}
		e, out = run(t, r, `python3 -c "b = bytearray(8*1024*1024); print('allocated', len(b))"`, runner.Limits{MemoryBytes: 256 << 20})
		if e.Code != 0 || !strings.Contains(out, "allocated") {
			t.Fatalf("a small allocation failed under the limit: %+v %q", e, out)
		}
	})
	t.Run("processes", func(t *testing.T) {
		e, out := run(t, r, `for i in $(seq 1 200); do sleep 5 & done 2>&1 | tail -1; echo spawned; kill $(jobs -p) 2>/dev/null; true`, runner.Limits{Procs: 20})
		if !strings.Contains(out, "fork") && !strings.Contains(out, "Resource temporarily unavailable") {
			t.Fatalf("200 processes under a limit of 20 met no refusal: %+v %q", e, out)
		}
	})
	t.Run("wall time is the manager's", func(t *testing.T) {
		// The runner itself only starts; the Executions manager enforces
		// Limits.Wall (see executions_test.go).
	})
}

func TestMissingBwrapRefuses(t *testing.T) {
	r := newLocal(t, func(c *runner.LocalConfig) { c.Bwrap = "/nonexistent/bwrap" })
	_, err := r.Start(context.Background(), runner.Spec{ID: "x", Argv: []string{"true"}, Output: &runnertest.Output{}})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y bubblewrap") {
		t.Fatalf("missing bwrap: %v", err)
	}
	if d := r.Describe(); !strings.Contains(d.Sandbox, "unavailable") {
		t.Fatalf("Describe does not say the sandbox is unavailable: %+v", d)
	}
}
