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
