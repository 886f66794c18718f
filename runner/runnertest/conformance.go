// Package runnertest is the conformance suite every runner.Runner adapter
// must pass: output from the first byte and while it runs, exit codes,
// separate stderr, a clean environment, and termination of the whole process
// tree, daemonized children included.
package runnertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/runner"
)

// Output collects a process's output in memory.
type Output struct {
	mu     sync.Mutex
	all    bytes.Buffer
	stderr bytes.Buffer
	first  map[string]time.Time
}

// Write implements runner.Output.
func (o *Output) Write(s runner.Stream, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all.Write(p)
	if s == runner.Stderr {
		o.stderr.Write(p)
	}
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all.String()
}

// Stderr returns what was written to stderr.
func (o *Output) Stderr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stderr.String()
}

// Run runs the suite against the runner newRunner returns. Commands are
// run with /bin/sh -c.
func Run(t *testing.T, newRunner func(t *testing.T) runner.Runner) {
	start := func(t *testing.T, r runner.Runner, script string, l runner.Limits) (runner.Handle, *Output) {
		t.Helper()
		out := &Output{}
		h, err := r.Start(context.Background(), runner.Spec{ID: fmt.Sprintf("t%d", time.Now().UnixNano()), Argv: []string{"/bin/sh", "-c", script}, Output: out, Limits: l})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		return h, out
	}
	waitFor := func(t *testing.T, h runner.Handle, d time.Duration) runner.Exit {
		t.Helper()
		ch := make(chan runner.Exit, 1)
		go func() { ch <- h.Wait() }()
		select {
		case e := <-ch:
			return e
		case <-time.After(d):
			h.Kill()
			t.Fatalf("process did not end within %v", d)
			return runner.Exit{}
		}
	}

	t.Run("output from the first byte and exit code", func(t *testing.T) {
		r := newRunner(t)
		h, out := start(t, r, "printf 'first'; echo ' line'; echo oops >&2; exit 3", runner.Limits{})
		e := waitFor(t, h, 30*time.Second)
		if e.Code != 3 || e.Err != nil {
			t.Fatalf("exit = %+v, want code 3", e)
		}
		// stdout and stderr may interleave at any byte; each must be whole.
		if got := out.String(); strings.Replace(got, "oops\n", "", 1) != "first line\n" {
			t.Fatalf("output %q", got)
		}
		if out.Stderr() != "oops\n" {
			t.Fatalf("stderr %q, want only the stderr line", out.Stderr())
		}
		// Wait is idempotent; Terminate and Kill after the end are no-ops.
		h.Terminate(time.Second)
		h.Kill()
		if e2 := h.Wait(); e2.Code != 3 {
			t.Fatalf("second Wait = %+v", e2)
		}
	})

	t.Run("output is live", func(t *testing.T) {
		r := newRunner(t)
		h, out := start(t, r, "echo early; sleep 3; echo late", runner.Limits{})
		deadline := time.Now().Add(2500 * time.Millisecond)
		for !strings.Contains(out.String(), "early") {
			if time.Now().After(deadline) {
				h.Kill()
				t.Fatalf("first line not seen while the command ran; output %q", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if strings.Contains(out.String(), "late") {
			t.Fatal("saw the late line before the command slept")
		}
		if e := waitFor(t, h, 30*time.Second); e.Code != 0 || !strings.Contains(out.String(), "late") {
			t.Fatalf("exit %+v output %q", e, out.String())
		}
	})

	t.Run("clean environment", func(t *testing.T) {
		os.Setenv("SCIMCP_TEST_SECRET", "hunter2")
		defer os.Unsetenv("SCIMCP_TEST_SECRET")
		r := newRunner(t)
		h, out := start(t, r, "env", runner.Limits{})
		waitFor(t, h, 30*time.Second)
		if strings.Contains(out.String(), "hunter2") || strings.Contains(out.String(), "PYTHONUNBUFFERED") {
			t.Fatalf("server environment leaked into the command:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "PATH=") {
			t.Fatalf("no PATH in the command's environment:\n%s", out.String())
		}
	})

	t.Run("terminate kills the whole tree", func(t *testing.T) {
		r := newRunner(t)
		token := fmt.Sprintf("%d.%d", 1000+time.Now().Nanosecond()%1000, time.Now().Nanosecond()%997)
		// A daemonized grandchild (new session, parent gone) and a child
		// that ignores SIGTERM.
		script := fmt.Sprintf("(setsid sh -c 'sleep %[1]s' &) ; sh -c 'trap \"\" TERM; sleep %[1]s' & echo started; wait", token)
		h, out := start(t, r, script, runner.Limits{})
		for !strings.Contains(out.String(), "started") {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if n := countProcs("sleep " + token); n < 2 {
			t.Fatalf("expected 2 sleepers running, found %d", n)
		}
		h.Terminate(500 * time.Millisecond)
		waitFor(t, h, 15*time.Second)
		deadline := time.Now().Add(5 * time.Second)
		for countProcs("sleep "+token) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d process(es) of the tree survived termination", countProcs("sleep "+token))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// countProcs counts host processes whose command line contains s.
func countProcs(s string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), s) && !strings.Contains(string(data), "sh\x00-c") {
			n++
		}
	}
	return n
}
