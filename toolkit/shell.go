package toolkit

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace"
)

// Waiting bounds. run_shell returns within wait_ms, capped well below the
// 60 s after which MCP clients commonly give up on a tool call; the command
// keeps running either way.
const (
	DefaultWaitMS = 10_000
	MaxWaitMS     = 45_000
	// inlineOutputBytes is how much of a finished command's log run_shell
	// returns; more is read with execution_logs.
	inlineOutputBytes = 48 * 1024
	inlineHeadBytes   = 8 * 1024
	progressEvery     = time.Second
	listExecutions    = 50
)

// ExecutionView is an execution as the tools report it.
type ExecutionView struct {
	ExecutionID   string   `json:"execution_id"`
	State         string   `json:"state" jsonschema:"queued, running, succeeded, failed, cancelled, timed_out or lost"`
	Runner        string   `json:"runner"`
	Command       string   `json:"command,omitempty"`
	ScriptPath    string   `json:"scriptPath,omitempty"`
	Arguments     []string `json:"arguments,omitempty"`
	EnvironmentID string   `json:"environment_id,omitempty"`
	ExitCode      *int     `json:"exit_code,omitempty"`
	Signal        string   `json:"signal,omitempty"`
	Reason        string   `json:"reason,omitempty"`
	Created       string   `json:"created"`
	Started       string   `json:"started,omitempty"`
	Ended         string   `json:"ended,omitempty"`
	DurationMS    int64    `json:"duration_ms"`
	LogBytes      int64    `json:"log_bytes" jsonschema:"bytes in the execution's log so far"`
	DroppedBytes  int64    `json:"dropped_bytes,omitempty" jsonschema:"output past the log cap that was not kept"`
}

func view(r runner.Execution) ExecutionView {
	v := ExecutionView{
		ExecutionID: r.ID, State: string(r.State), Runner: r.Runner, Command: r.Command, ScriptPath: r.Script,
		Arguments: r.Args, EnvironmentID: r.EnvironmentID, ExitCode: r.ExitCode, Signal: r.Signal, Reason: r.Reason,
		Created: r.Created.Format(time.RFC3339Nano), LogBytes: r.LogBytes, DroppedBytes: r.DroppedBytes,
	}
	if r.Started != nil {
		v.Started = r.Started.Format(time.RFC3339Nano)
		end := time.Now()
		if r.Ended != nil {
			end = *r.Ended
		}
		v.DurationMS = end.Sub(*r.Started).Milliseconds()
	}
	if r.Ended != nil {
		v.Ended = r.Ended.Format(time.RFC3339Nano)
	}
	return v
}

// summary is one line about an execution.
func summary(v ExecutionView) string {
	what := v.Command
	if what == "" {
		what = strings.TrimSpace(v.ScriptPath + " " + strings.Join(v.Arguments, " "))
	}
	if len(what) > 120 {
		what = what[:117] + "..."
	}
	s := fmt.Sprintf("%s %s", v.ExecutionID, v.State)
	if v.ExitCode != nil {
		s += fmt.Sprintf(" (exit code %d)", *v.ExitCode)
	}
	if v.Signal != "" {
		s += " [" + v.Signal + "]"
	}
	s += fmt.Sprintf(" after %.1fs: %s", float64(v.DurationMS)/1000, what)
	if v.Reason != "" {
		s += " — " + v.Reason
	}
	return s
}

// RunShellIn are run_shell's arguments.
type RunShellIn struct {
	Command       string   `json:"command,omitempty" jsonschema:"a bash command line, run with bash -c in a fresh sandbox at /workspace; give this or scriptPath"`
	ScriptPath    string   `json:"scriptPath,omitempty" jsonschema:"a script in the workspace to run instead of a command: executed directly when executable, else by its extension (.py python3, .R Rscript, .sh bash, others sh)"`
	Arguments     []string `json:"arguments,omitempty" jsonschema:"arguments passed as separate argv entries (never through a shell string): after scriptPath, or as $1, $2, ... of command"`
	RunnerID      string   `json:"runner_id,omitempty" jsonschema:"runner to use (default: the local sandbox)"`
	EnvironmentID string   `json:"environment_id,omitempty" jsonschema:"named Python/R environment to run in (recorded with the execution)"`
	WaitMS        *int     `json:"wait_ms,omitempty" jsonschema:"how long to wait for the command to finish before returning, in ms (default 10000, at most 45000); the command keeps running after that"`
	Background    bool     `json:"background,omitempty" jsonschema:"return at once without waiting"`
}

// RunShellOut is run_shell's structured result.
type RunShellOut struct {
	ExecutionView
	Output         string `json:"output,omitempty" jsonschema:"the command's output (stdout and stderr in order) when it finished; up to 48 KiB, head and tail beyond that"`
	OutputComplete bool   `json:"output_complete" jsonschema:"true when output holds the whole log"`
	NextCursor     int64  `json:"next_cursor" jsonschema:"cursor for execution_logs to read on from what output shows"`
}

func runShell(ws *workspace.Workspace, ex *runner.Executions) Tool {
	return Define(Spec{
		Name:  "run_shell",
		Title: "Run a command in the sandbox",
		Description: "Runs a command (bash -c) or a workspace script in a fresh sandboxed process: the workspace read-write at /workspace, system folders read-only, a private /tmp, no network, no state kept between calls (no persistent interpreter, cd or export: chain steps with && in one command). " +
			"Returns within wait_ms (default 10 s, at most 45 s) with the execution id and state, and the exit code and output if it finished; waiting expires without stopping the command. " +
			"Follow a running command with execution_logs (cursor), execution_status (wait) and stop it with execution_cancel. Give exactly one of command or scriptPath.",
		Group:       GroupBase,
		Destructive: true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["wait_ms"].Minimum = ptr(0.0)
			s.Properties["wait_ms"].Maximum = ptr(float64(MaxWaitMS))
		},
	}, func(ctx context.Context, in RunShellIn) (Result[RunShellOut], error) {
		if (in.Command == "") == (in.ScriptPath == "") {
			return Result[RunShellOut]{}, Errorf("give exactly one of command (a bash command line) or scriptPath (a script in the workspace)")
		}
		for i, a := range append([]string{in.Command}, in.Arguments...) {
			if strings.IndexByte(a, 0) >= 0 {
				if i == 0 {
					return Result[RunShellOut]{}, Errorf("command contains a NUL byte")
				}
				return Result[RunShellOut]{}, Errorf("argument %d contains a NUL byte", i)
			}
		}
		var argv []string
		if in.Command != "" {
			argv = append([]string{"/bin/bash", "-c", in.Command, "run_shell"}, in.Arguments...)
		} else {
			fi, err := ws.Stat(in.ScriptPath)
			if err != nil {
				return Result[RunShellOut]{}, err
			}
			inside := workspace.SandboxDir + "/" + fi.Path
			argv = append(scriptArgv(inside, fi.Mode.Perm()&0o111 != 0), in.Arguments...)
		}
		c := CallerFrom(ctx)
		req := runner.Request{
			Owner: c.Owner, Session: c.Session, Runner: in.RunnerID, Argv: argv,
			Command: in.Command, Script: in.ScriptPath, Args: in.Arguments, EnvironmentID: in.EnvironmentID,
		}
		if in.EnvironmentID != "" {
			req.Env = []string{"SCIMCP_ENVIRONMENT_ID=" + in.EnvironmentID}
		}
		rec, err := ex.Start(ctx, req)
		if err != nil {
			return Result[RunShellOut]{}, err
		}
		wait := time.Duration(DefaultWaitMS) * time.Millisecond
		if in.WaitMS != nil {
			wait = time.Duration(*in.WaitMS) * time.Millisecond
		}
		if in.Background {
			wait = 0
		}
		rec = waitWithProgress(ctx, ex, c, rec, wait)
		return shellResult(ctx, ex, c.Owner, rec)
	})
}

// scriptArgv runs a script directly when it is executable, else with the
// interpreter its extension names.
func scriptArgv(p string, executable bool) []string {
	if executable {
		return []string{p}
	}
	switch strings.ToLower(path.Ext(p)) {
	case ".py":
		return []string{"python3", p}
	case ".r":
		return []string{"Rscript", p}
	case ".sh", ".bash":
		return []string{"/bin/bash", p}
	}
	return []string{"/bin/sh", p}
}

// waitWithProgress waits up to d for the execution to end, reporting
// progress every second when the client asked for it.
func waitWithProgress(ctx context.Context, ex *runner.Executions, c Caller, rec runner.Execution, d time.Duration) runner.Execution {
	if d <= 0 {
		return rec
	}
	done := ex.Done(rec.ID)
	if done == nil {
		cur, err := ex.Get(c.Owner, rec.ID)
		if err == nil {
			return cur
		}
		return rec
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
		case <-deadline.C:
		case <-ctx.Done():
		case <-tick.C:
			if c.Progress != nil {
				cur, _ := ex.Get(c.Owner, rec.ID)
				el := time.Since(start)
				c.Progress(el.Seconds(), d.Seconds(), fmt.Sprintf("%s running for %.0fs, %d bytes of output", rec.ID, el.Seconds(), cur.LogBytes))
			}
			continue
		}
		break
	}
	cur, err := ex.Get(c.Owner, rec.ID)
	if err != nil {
		return rec
	}
	return cur
}

func shellResult(ctx context.Context, ex *runner.Executions, owner string, rec runner.Execution) (Result[RunShellOut], error) {
	out := RunShellOut{ExecutionView: view(rec), NextCursor: 0}
	var b strings.Builder
	b.WriteString(summary(out.ExecutionView))
	b.WriteByte('\n')
	if !rec.State.Terminal() {
		fmt.Fprintf(&b, "Still running; nothing was stopped. Follow it with execution_logs {\"execution_id\":%q,\"cursor\":0,\"wait_ms\":10000}, wait with execution_status {\"execution_id\":%q,\"wait_ms\":30000}, or stop it with execution_cancel.", rec.ID, rec.ID)
		return Result[RunShellOut]{Text: b.String(), Data: out}, nil
	}
	text, complete, next, err := inlineOutput(ctx, ex, owner, rec)
	if err != nil {
		return Result[RunShellOut]{}, err
	}
	out.Output, out.OutputComplete, out.NextCursor = text, complete, next
	if rec.LogBytes == 0 {
		b.WriteString("(no output)")
	} else {
		b.WriteString("--- output ---\n")
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
		if !complete {
			fmt.Fprintf(&b, "--- the log has %d bytes; shown: the first and last part. Read it whole with execution_logs {\"execution_id\":%q,\"cursor\":%d} ---", rec.LogBytes, rec.ID, next)
		} else {
			b.WriteString("--- end of output ---")
		}
	}
	if rec.DroppedBytes > 0 {
		fmt.Fprintf(&b, "\n%d bytes of output passed the log cap of %d bytes and were not kept (the last 1 MiB was).", rec.DroppedBytes, rec.LogCap)
	}
	return Result[RunShellOut]{Text: b.String(), Data: out}, nil
}

// inlineOutput returns the log of a finished execution, or its head and
// tail when it is longer than inlineOutputBytes.
func inlineOutput(ctx context.Context, ex *runner.Executions, owner string, rec runner.Execution) (string, bool, int64, error) {
	if rec.LogBytes <= inlineOutputBytes {
		var b strings.Builder
		var cur int64
		for {
			c, err := ex.Logs(ctx, owner, rec.ID, cur, runner.MaxLogChunk, "", 0)
			if err != nil {
				return "", false, 0, err
			}
			b.WriteString(c.Text)
			if c.NextCursor == cur || c.NextCursor >= rec.LogBytes {
				return b.String(), true, c.NextCursor, nil
			}
			cur = c.NextCursor
		}
	}
	head, err := ex.Logs(ctx, owner, rec.ID, 0, inlineHeadBytes, "", 0)
	if err != nil {
		return "", false, 0, err
	}
	// The marker between head and tail comes out of the tail's share, so
	// the whole stays within inlineOutputBytes.
	const markerRoom = 128
	tailFrom := rec.LogBytes - (inlineOutputBytes - inlineHeadBytes - markerRoom)
	tail, err := ex.Logs(ctx, owner, rec.ID, tailFrom, runner.MaxLogChunk, "", 0)
	if err != nil {
		return "", false, 0, err
	}
	text := head.Text + fmt.Sprintf("\n[… %d bytes of the log not shown (cursor %d to %d) …]\n", tailFrom-head.NextCursor, head.NextCursor, tailFrom) + tail.Text
	return text, false, head.NextCursor, nil
}

// ExecutionStatusIn are execution_status's arguments.
type ExecutionStatusIn struct {
	ExecutionID string `json:"execution_id,omitempty" jsonschema:"the execution to inspect; omit to list this session's executions"`
	WaitMS      int    `json:"wait_ms,omitempty" jsonschema:"with execution_id: wait up to this many ms for it to finish (at most 45000)"`
}

// ExecutionStatusOut is execution_status's structured result.
type ExecutionStatusOut struct {
	Execution  *ExecutionView  `json:"execution,omitempty"`
	Executions []ExecutionView `json:"executions,omitempty"`
}

func executionStatus(ex *runner.Executions) Tool {
	return Define(Spec{
		Name:  "execution_status",
		Title: "Execution status",
		Description: "With execution_id: the state of one execution of this session (running, succeeded, failed, cancelled, timed_out, lost), exit code, times and log size; wait_ms waits for it to finish (bounded, the command is never stopped). " +
			"Without: lists this session's executions, newest first (at most 50).",
		Group:      GroupBase,
		ReadOnly:   true,
		Idempotent: true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["wait_ms"].Minimum = ptr(0.0)
			s.Properties["wait_ms"].Maximum = ptr(float64(MaxWaitMS))
		},
	}, func(ctx context.Context, in ExecutionStatusIn) (Result[ExecutionStatusOut], error) {
		c := CallerFrom(ctx)
		if in.ExecutionID == "" {
			if in.WaitMS != 0 {
				return Result[ExecutionStatusOut]{}, Errorf("wait_ms needs an execution_id")
			}
			list, err := ex.List(c.Owner, listExecutions)
			if err != nil {
				return Result[ExecutionStatusOut]{}, err
			}
			out := ExecutionStatusOut{Executions: []ExecutionView{}}
			var b strings.Builder
			fmt.Fprintf(&b, "%d execution(s) in this session (newest first, at most %d):\n", len(list), listExecutions)
			for _, r := range list {
				v := view(r)
				out.Executions = append(out.Executions, v)
				b.WriteString(summary(v) + "\n")
			}
			return Result[ExecutionStatusOut]{Text: b.String(), Data: out}, nil
		}
		rec, err := ex.Get(c.Owner, in.ExecutionID)
		if err != nil {
			return Result[ExecutionStatusOut]{}, err
		}
		rec = waitWithProgress(ctx, ex, c, rec, time.Duration(in.WaitMS)*time.Millisecond)
		v := view(rec)
		text := summary(v)
		if !rec.State.Terminal() {
			text += fmt.Sprintf("\nStill running (%d bytes of output so far).", rec.LogBytes)
		} else {
			text += fmt.Sprintf("\nLog: %d bytes; read it with execution_logs.", rec.LogBytes)
		}
		return Result[ExecutionStatusOut]{Text: text, Data: ExecutionStatusOut{Execution: &v}}, nil
	})
}

// ExecutionLogsIn are execution_logs' arguments.
type ExecutionLogsIn struct {
	ExecutionID string `json:"execution_id"`
	Cursor      int64  `json:"cursor,omitempty" jsonschema:"byte offset to read from: 0 for the start, then next_cursor of the previous call"`
	MaxBytes    int    `json:"max_bytes,omitempty" jsonschema:"at most this many bytes (default and maximum 40960)"`
	Stream      string `json:"stream,omitempty" jsonschema:"omit for stdout and stderr in order; stderr for stderr alone"`
	WaitMS      int    `json:"wait_ms,omitempty" jsonschema:"when nothing new is there yet, wait up to this many ms for output (at most 45000)"`
}

// ExecutionLogsOut is execution_logs' structured result.
type ExecutionLogsOut struct {
	ExecutionID string `json:"execution_id"`
	State       string `json:"state"`
	Text        string `json:"text"`
	Cursor      int64  `json:"cursor"`
	NextCursor  int64  `json:"next_cursor"`
	More        bool   `json:"more" jsonschema:"true when more output may come: the log goes on past next_cursor, or the command still runs"`
}

func executionLogs(ex *runner.Executions) Tool {
	return Define(Spec{
		Name:  "execution_logs",
		Title: "Read an execution's output",
		Description: "Reads the output log of an execution of this session from a cursor (a byte offset; 0 is the start): the next chunk (at most 40 KiB), the next_cursor to continue from, and whether more may come. " +
			"Output is kept from the first byte and after the command ends. With wait_ms it waits for new output of a running command.",
		Group:       GroupBase,
		SelfBounded: true,
		ReadOnly:    true,
		Idempotent:  true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["cursor"].Minimum = ptr(0.0)
			s.Properties["max_bytes"].Minimum = ptr(1.0)
			s.Properties["max_bytes"].Maximum = ptr(float64(runner.MaxLogChunk))
			s.Properties["stream"].Enum = []any{"stderr"}
			s.Properties["wait_ms"].Minimum = ptr(0.0)
			s.Properties["wait_ms"].Maximum = ptr(float64(MaxWaitMS))
		},
	}, func(ctx context.Context, in ExecutionLogsIn) (Result[ExecutionLogsOut], error) {
		c := CallerFrom(ctx)
		ch, err := ex.Logs(ctx, c.Owner, in.ExecutionID, in.Cursor, in.MaxBytes, in.Stream, time.Duration(in.WaitMS)*time.Millisecond)
		if err != nil {
			return Result[ExecutionLogsOut]{}, err
		}
		out := ExecutionLogsOut{ExecutionID: in.ExecutionID, State: string(ch.State), Text: ch.Text, Cursor: ch.Cursor, NextCursor: ch.NextCursor, More: ch.More}
		var b strings.Builder
		b.WriteString(ch.Text)
		if ch.Text != "" && !strings.HasSuffix(ch.Text, "\n") {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s %s: bytes %d–%d of the log.", in.ExecutionID, ch.State, ch.Cursor, ch.NextCursor)
		switch {
		case ch.More && ch.State.Terminal():
			fmt.Fprintf(&b, " More: execution_logs {\"execution_id\":%q,\"cursor\":%d}]", in.ExecutionID, ch.NextCursor)
		case ch.More:
			fmt.Fprintf(&b, " Still running; continue with cursor %d (wait_ms waits for new output).]", ch.NextCursor)
		default:
			b.WriteString(" End of the log; the execution has ended.]")
		}
		return Result[ExecutionLogsOut]{Text: b.String(), Data: out}, nil
	})
}

// ExecutionCancelIn are execution_cancel's arguments.
type ExecutionCancelIn struct {
	ExecutionID string `json:"execution_id"`
}

// ExecutionCancelOut is execution_cancel's structured result.
type ExecutionCancelOut struct {
	ExecutionView
	AlreadyFinished bool `json:"already_finished" jsonschema:"true when the execution had ended before the call; nothing was changed"`
}

func executionCancel(ex *runner.Executions) Tool {
	return Define(Spec{
		Name:  "execution_cancel",
		Title: "Cancel an execution",
		Description: "Stops a running execution of this session: SIGTERM to its whole process tree (children and daemons included), SIGKILL after a 3 s grace period. " +
			"Idempotent: cancelling an execution that already ended changes nothing and says so. The log stays readable.",
		Group:       GroupBase,
		Destructive: true,
		Idempotent:  true,
	}, func(ctx context.Context, in ExecutionCancelIn) (Result[ExecutionCancelOut], error) {
		c := CallerFrom(ctx)
		rec, wasDone, err := ex.Cancel(ctx, c.Owner, in.ExecutionID)
		if err != nil {
			return Result[ExecutionCancelOut]{}, err
		}
		v := view(rec)
		text := summary(v)
		if wasDone {
			text = "Already finished; nothing to cancel. " + text
		}
		return Result[ExecutionCancelOut]{Text: text, Data: ExecutionCancelOut{ExecutionView: v, AlreadyFinished: wasDone}}, nil
	})
}
