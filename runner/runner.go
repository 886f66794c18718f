// Package runner starts commands in sandboxes and keeps their executions:
// the Runner interface with its adapters (the local bubblewrap sandbox now,
// Slurm later), and the Executions manager that owns execution records,
// logs, waiting and cancellation.
//
// # An execution's life
//
//	queued ──► running ──► succeeded   (exit code 0)
//	   │          ├──────► failed      (non-zero exit, killed by a signal, out of memory, start error)
//	   │          ├──────► cancelled   (execution_cancel)
//	   │          └──────► timed_out   (wall-time limit)
//	   └─────────────────► lost        (the server stopped while it was queued or running)
//
// The five states on the right are terminal: an execution that reached one
// never changes again, and its log stays readable.
//
// # Runner contract
//
// A Runner is named and stateless between calls. Start is called once per
// execution, from the Executions manager, never concurrently for the same
// Spec.ID. It returns as soon as the process is running (or failed to start);
// the ctx bounds only the start itself: cancelling it after Start returned
// does not stop the process (use the Handle). Output must reach Spec.Output
// from its first byte, in the order the process wrote it, while it runs.
//
// A Handle's Wait blocks until the whole process tree is gone and returns the
// same Exit to every caller, however often it is called. Terminate sends
// SIGTERM to every process of the tree and SIGKILL after the grace period;
// Kill sends SIGKILL at once. Both return immediately, are idempotent, and are
// safe to call after the process ended. Neither may leave a process of the
// tree running: daemonized and re-parented children included.
package runner

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Runner starts commands in a sandbox.
type Runner interface {
	// Name is the runner_id that selects this runner.
	Name() string
	// Describe says what the runner is and enforces, for people and models.
	Describe() Description
	// Start starts spec's command and returns its handle.
	Start(ctx context.Context, spec Spec) (Handle, error)
}

// Handle controls one started process tree.
type Handle interface {
	Wait() Exit
	Terminate(grace time.Duration)
	Kill()
}

// Stream names an output stream.
type Stream int

const (
	Stdout Stream = iota
	Stderr
)

// Output receives a process's output as it is produced.
type Output interface {
	Write(s Stream, p []byte)
}

// Spec is what to start.
type Spec struct {
	ID string
	// Argv is the command inside the sandbox; Argv[0] is looked up on the
	// sandbox's PATH when it has no slash.
	Argv []string
	// Env holds extra KEY=VALUE entries on top of the runner's clean
	// environment (never the server's own environment).
	Env []string
	// Dir is the working directory inside the sandbox; default the
	// workspace.
	Dir    string
	Output Output
	Limits Limits
}

// Limits bound one execution. Zero fields take the runner's defaults.
type Limits struct {
	Wall        time.Duration // wall-clock time before the tree is terminated (timed_out)
	MemoryBytes int64         // memory of the whole tree
	Procs       int           // processes and threads of the whole tree
	OutputBytes int64         // bytes of log kept per execution (head; a tail is kept beyond it)
}

// Exit is how a process tree ended.
type Exit struct {
	Code   int    // exit code; -1 when killed by a signal or never started
	Signal string // the signal that killed it, if any
	// OOM reports that the memory limit killed something in the tree.
	OOM bool
	// Err is a failure to run at all (bwrap missing, exec failed).
	Err error
}

// Description tells what a runner is.
type Description struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	Sandbox   string   `json:"sandbox"`
	Network   bool     `json:"network"`
	Limits    string   `json:"limits"`
	Workspace string   `json:"workspace"`
	Notes     []string `json:"notes,omitempty"`
}

// Captured is the output of a short command run with Capture.
type Captured struct {
	Stdout    []byte
	Stderr    []byte
	Truncated bool // stdout passed maxBytes; the rest was dropped
	Exit      Exit
}

// capture collects output in memory up to a cap.
type capture struct {
	mu        sync.Mutex
	out, err  []byte
	max       int
	truncated bool
}

func (c *capture) Write(s Stream, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == Stderr {
		if len(c.err) < 64<<10 {
			c.err = append(c.err, p[:min(len(p), 64<<10-len(c.err))]...)
		}
		return
	}
	if room := c.max - len(c.out); room < len(p) {
		c.out = append(c.out, p[:max(room, 0)]...)
		c.truncated = true
		return
	}
	c.out = append(c.out, p...)
}

// Capture runs a short helper command (pdftotext, pdfinfo) in r's sandbox
// and returns its output, at most maxBytes of stdout, killing it after
// timeout. It is not an execution: nothing is recorded.
func Capture(ctx context.Context, r Runner, argv []string, maxBytes int, timeout time.Duration) (Captured, error) {
	c := &capture{max: maxBytes}
	h, err := r.Start(ctx, Spec{ID: fmt.Sprintf("capture-%d", time.Now().UnixNano()), Argv: argv, Output: c, Limits: Limits{Wall: timeout}})
	if err != nil {
		return Captured{}, err
	}
	done := make(chan Exit, 1)
	go func() { done <- h.Wait() }()
	var e Exit
	select {
	case e = <-done:
	case <-time.After(timeout):
		h.Kill()
		e = <-done
		e.Err = fmt.Errorf("%s took longer than %s and was stopped", argv[0], timeout)
	case <-ctx.Done():
		h.Kill()
		e = <-done
		e.Err = ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Captured{Stdout: c.out, Stderr: c.err, Truncated: c.truncated, Exit: e}, nil
}
