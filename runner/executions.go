package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

// State is an execution's state; see the package documentation.
type State string

const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	TimedOut  State = "timed_out"
	Lost      State = "lost"
)

// Terminal reports whether s never changes again.
func (s State) Terminal() bool { return s != Queued && s != Running }

// Defaults of the manager.
const (
	DefaultMaxRunning  = 64
	DefaultCancelGrace = 3 * time.Second
	// MaxLogChunk bounds one read of an execution's log.
	MaxLogChunk = 40 * 1024
	// DirName is the folder of execution logs under the data folder.
	DirName = "executions"
)

var bucket = []byte("executions")

// Execution is the record of one execution, kept in bbolt.
type Execution struct {
	ID            string     `json:"id"`
	Owner         string     `json:"owner"`
	Session       string     `json:"session"`
	Runner        string     `json:"runner"`
	Command       string     `json:"command,omitempty"`
	Script        string     `json:"script,omitempty"`
	Args          []string   `json:"args,omitempty"`
	EnvironmentID string     `json:"environment_id,omitempty"`
	State         State      `json:"state"`
	ExitCode      *int       `json:"exit_code,omitempty"`
	Signal        string     `json:"signal,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	Created       time.Time  `json:"created"`
	Started       *time.Time `json:"started,omitempty"`
	Ended         *time.Time `json:"ended,omitempty"`
	LogBytes      int64      `json:"log_bytes"`
	StderrBytes   int64      `json:"stderr_bytes"`
	DroppedBytes  int64      `json:"dropped_bytes,omitempty"`
	LogCap        int64      `json:"log_cap"`
	Limits        Limits     `json:"limits"`
}

// Request asks for an execution.
type Request struct {
	Owner, Session string
	Runner         string // "" for the default runner
	// Argv is the command inside the sandbox; Command, Script and Args are
	// what the caller asked for, kept for the record.
	Argv          []string
	Command       string
	Script        string
	Args          []string
	EnvironmentID string
	Env           []string
}

// Error is a refusal the caller can act on.
type Error struct{ Msg string }

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

func refusef(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Config configures Executions.
type Config struct {
	Store       *store.Store
	Runners     []Runner // the first is the default
	MaxRunning  int
	CancelGrace time.Duration
	Log         hclog.Logger
	// OnEnd, when set, is called once for every execution that ends (any
	// terminal state but lost-at-start), after its record is stored and
	// before waiters are released: provenance scans the workspace here.
	// It runs on the execution's own goroutine; it must not block for long.
	OnEnd func(Execution)
}

// Executions starts, follows and cancels executions, and keeps their records
// and logs after they end (and after the server restarts).
type Executions struct {
	cfg     Config
	dir     string
	runners map[string]Runner

	mu   sync.Mutex
	live map[string]*live
}

type live struct {
	mu     sync.Mutex
	rec    Execution
	handle Handle
	sink   *logSink
	done   chan struct{}
	stop   State // Cancelled or TimedOut once asked to stop
	timer  *time.Timer
}

// NewExecutions opens the execution records of a data folder. Executions
// that were queued or running when the server stopped are marked lost; their
// logs stay readable.
func NewExecutions(cfg Config) (*Executions, error) {
	if len(cfg.Runners) == 0 {
		return nil, errors.New("no runner")
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = DefaultMaxRunning
	}
	if cfg.CancelGrace <= 0 {
		cfg.CancelGrace = DefaultCancelGrace
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	e := &Executions{cfg: cfg, dir: filepath.Join(cfg.Store.Dir(), DirName), runners: map[string]Runner{}, live: map[string]*live{}}
	for _, r := range cfg.Runners {
		if _, dup := e.runners[r.Name()]; dup {
			return nil, fmt.Errorf("runner %q defined twice", r.Name())
		}
		e.runners[r.Name()] = r
	}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		return nil, err
	}
	if err := cfg.Store.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return nil, err
	}
	n, err := e.markLost()
	if err != nil {
		return nil, err
	}
	if n > 0 {
		cfg.Log.Warn("executions interrupted by the last stop were marked lost", "count", n)
	}
	return e, nil
}

// Runners lists the runners, the default first.
func (e *Executions) Runners() []Runner { return e.cfg.Runners }

func (e *Executions) markLost() (int, error) {
	n := 0
	now := time.Now().UTC()
	err := e.cfg.Store.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		return b.ForEach(func(k, v []byte) error {
			var rec Execution
			if _, err := store.GetJSON(b, k, &rec); err != nil || rec.State.Terminal() {
				return err
			}
			rec.State, rec.Ended = Lost, &now
			rec.Reason = "the server stopped while this execution ran; its process tree ended with the server"
			logPath := filepath.Join(e.dir, rec.ID, "output.log")
			if f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				f.WriteString("\n[scimcp: the server stopped while this execution ran; it is marked lost]\n")
				f.Close()
			}
			rec.LogBytes, rec.StderrBytes = fileSize(logPath), fileSize(filepath.Join(e.dir, rec.ID, "stderr.log"))
			n++
			return store.PutJSON(b, k, rec)
		})
	})
	return n, err
}

var idPattern = regexp.MustCompile(`^exec_[0-9a-f]{16}$`)

func newID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "exec_" + hex.EncodeToString(b[:])
}

// Start starts an execution and returns its record as soon as it runs.
func (e *Executions) Start(ctx context.Context, req Request) (Execution, error) {
	r, err := e.runner(req.Runner)
	if err != nil {
		return Execution{}, err
	}
	e.mu.Lock()
	running := len(e.live)
	e.mu.Unlock()
	if running >= e.cfg.MaxRunning {
		return Execution{}, refusef("%d executions are already running, the limit; wait for one to finish (execution_status) or cancel one (execution_cancel)", running)
	}
	now := time.Now().UTC()
	rec := Execution{
		ID: newID(), Owner: req.Owner, Session: req.Session, Runner: r.Name(),
		Command: req.Command, Script: req.Script, Args: req.Args, EnvironmentID: req.EnvironmentID,
		State: Queued, Created: now,
	}
	limits := Limits{}
	if l, ok := r.(interface{ defaultLimits() Limits }); ok {
		limits = l.defaultLimits()
	}
	rec.Limits, rec.LogCap = limits, limits.OutputBytes
	if rec.LogCap <= 0 {
		rec.LogCap = DefaultOutputBytes
	}
	dir := filepath.Join(e.dir, rec.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Execution{}, err
	}
	sink, err := newLogSink(dir, rec.LogCap)
	if err != nil {
		return Execution{}, err
	}
	if err := e.put(rec); err != nil {
		sink.close()
		return Execution{}, err
	}
	l := &live{rec: rec, sink: sink, done: make(chan struct{})}
	h, err := r.Start(ctx, Spec{ID: rec.ID, Argv: req.Argv, Env: req.Env, Output: sink, Limits: limits})
	if err != nil {
		sink.Write(Stderr, []byte("scimcp: "+err.Error()+"\n"))
		size, errSize, _, _ := sink.close()
		end := time.Now().UTC()
		rec.State, rec.Reason, rec.Ended, rec.LogBytes, rec.StderrBytes = Failed, err.Error(), &end, size, errSize
		if perr := e.put(rec); perr != nil {
			return Execution{}, perr
		}
		return rec, refusef("%s", err.Error())
	}
	started := time.Now().UTC()
	rec.State, rec.Started = Running, &started
	l.rec, l.handle = rec, h
	if err := e.put(rec); err != nil {
		h.Kill()
	}
	e.mu.Lock()
	e.live[rec.ID] = l
	e.mu.Unlock()
	if limits.Wall > 0 {
		l.timer = time.AfterFunc(limits.Wall, func() { e.stop(l, TimedOut) })
	}
	go e.follow(l)
	return rec, nil
}

func (e *Executions) runner(id string) (Runner, error) {
	if id == "" {
		return e.cfg.Runners[0], nil
	}
	if r, ok := e.runners[id]; ok {
		return r, nil
	}
	names := make([]string, 0, len(e.runners))
	for n := range e.runners {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, refusef("unknown runner_id %q; available: %s", id, strings.Join(names, ", "))
}

// follow waits for the process tree to end and records how it ended.
func (e *Executions) follow(l *live) {
	exit := l.handle.Wait()
	if l.timer != nil {
		l.timer.Stop()
	}
	size, errSize, dropped, serr := l.sink.close()
	end := time.Now().UTC()
	l.mu.Lock()
	rec := l.rec
	rec.Ended, rec.LogBytes, rec.StderrBytes, rec.DroppedBytes = &end, size, errSize, dropped
	if exit.Code >= 0 {
		code := exit.Code
		rec.ExitCode = &code
	}
	rec.Signal = exit.Signal
	switch {
	case l.stop == Cancelled:
		rec.State, rec.Reason = Cancelled, "cancelled by execution_cancel"
	case l.stop == Lost:
		rec.State, rec.Reason = Lost, "the server shut down while this execution ran; its process tree was killed"
	case l.stop == TimedOut:
		rec.State, rec.Reason = TimedOut, fmt.Sprintf("stopped after the wall-time limit of %s", rec.Limits.Wall)
	case exit.Err != nil:
		rec.State, rec.Reason = Failed, exit.Err.Error()
	case exit.OOM:
		rec.State, rec.Reason = Failed, fmt.Sprintf("a process was killed for exceeding the memory limit of %d MiB", rec.Limits.MemoryBytes>>20)
	case exit.Code == 0 && exit.Signal == "":
		rec.State = Succeeded
	default:
		rec.State = Failed
		if exit.Signal != "" {
			rec.Reason = "killed by signal " + exit.Signal
		}
	}
	if serr != nil {
		rec.Reason = strings.TrimSpace(rec.Reason + "; writing the log failed: " + serr.Error())
	}
	l.rec = rec
	l.mu.Unlock()
	if err := e.put(rec); err != nil {
		e.cfg.Log.Error("record execution end", "execution", rec.ID, "error", err)
	}
	if e.cfg.OnEnd != nil {
		e.cfg.OnEnd(rec)
	}
	e.mu.Lock()
	delete(e.live, rec.ID)
	e.mu.Unlock()
	close(l.done)
}

func (e *Executions) stop(l *live, why State) {
	l.mu.Lock()
	if l.stop == "" {
		l.stop = why
	}
	l.mu.Unlock()
	l.handle.Terminate(e.cfg.CancelGrace)
}

func (e *Executions) put(rec Execution) error {
	return e.cfg.Store.Update(func(tx *bolt.Tx) error {
		return store.PutJSON(tx.Bucket(bucket), []byte(rec.ID), rec)
	})
}

// Get returns the current record of an execution owned by owner.
func (e *Executions) Get(owner, id string) (Execution, error) {
	if !idPattern.MatchString(id) {
		return Execution{}, refusef("%q is not an execution id; ids look like exec_0123456789abcdef, as run_shell returned them", id)
	}
	e.mu.Lock()
	l, ok := e.live[id]
	e.mu.Unlock()
	if ok {
		l.mu.Lock()
		rec := l.rec
		l.mu.Unlock()
		if rec.Owner != owner {
			return Execution{}, refusef("no execution %s in this session", id)
		}
		rec.LogBytes, _ = l.sink.state()
		return rec, nil
	}
	var rec Execution
	var found bool
	err := e.cfg.Store.View(func(tx *bolt.Tx) error {
		var err error
		found, err = store.GetJSON(tx.Bucket(bucket), []byte(id), &rec)
		return err
	})
	if err != nil {
		return Execution{}, err
	}
	if !found || rec.Owner != owner {
		return Execution{}, refusef("no execution %s in this session", id)
	}
	return rec, nil
}

// Wait waits up to timeout for an execution to reach a terminal state and
// returns its record either way. ctx cancellation ends the wait early.
func (e *Executions) Wait(ctx context.Context, owner, id string, timeout time.Duration) (Execution, error) {
	if _, err := e.Get(owner, id); err != nil {
		return Execution{}, err
	}
	e.mu.Lock()
	l, ok := e.live[id]
	e.mu.Unlock()
	if ok && timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-l.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return e.Get(owner, id)
}

// Running returns the records of the executions running now.
func (e *Executions) Running() []Execution {
	e.mu.Lock()
	ls := make([]*live, 0, len(e.live))
	for _, l := range e.live {
		ls = append(ls, l)
	}
	e.mu.Unlock()
	out := make([]Execution, 0, len(ls))
	for _, l := range ls {
		l.mu.Lock()
		out = append(out, l.rec)
		l.mu.Unlock()
	}
	return out
}

// Done returns a channel closed when the execution ends (nil if it has
// already ended).
func (e *Executions) Done(id string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.live[id]; ok {
		return l.done
	}
	return nil
}

// List returns owner's executions, newest first, at most limit.
func (e *Executions) List(owner string, limit int) ([]Execution, error) {
	var out []Execution
	err := e.cfg.Store.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		return b.ForEach(func(k, v []byte) error {
			var rec Execution
			if _, err := store.GetJSON(b, k, &rec); err == nil && rec.Owner == owner {
				out = append(out, rec)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if !out[i].State.Terminal() {
			if cur, err := e.Get(owner, out[i].ID); err == nil {
				out[i] = cur
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Cancel stops a running execution: SIGTERM to its whole process tree, and
// SIGKILL after the grace period. It waits up to the grace period plus a
// second for the tree to end. Cancelling an ended execution changes nothing
// and reports so (wasDone).
func (e *Executions) Cancel(ctx context.Context, owner, id string) (rec Execution, wasDone bool, err error) {
	rec, err = e.Get(owner, id)
	if err != nil {
		return rec, false, err
	}
	e.mu.Lock()
	l, ok := e.live[id]
	e.mu.Unlock()
	if !ok {
		return rec, true, nil
	}
	e.stop(l, Cancelled)
	t := time.NewTimer(e.cfg.CancelGrace + time.Second)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	case <-ctx.Done():
	}
	rec, err = e.Get(owner, id)
	return rec, false, err
}

// LogChunk is one read of an execution's log.
type LogChunk struct {
	Text       string
	Cursor     int64 // where this chunk starts
	NextCursor int64
	// More reports that more output may come: the log has bytes past
	// NextCursor, or the execution is still running.
	More  bool
	State State
}

// Logs reads the log from cursor (a byte offset; 0 is the start), at most
// max bytes, ending at a character boundary. stream is "" (both streams, in
// order) or "stderr". With wait > 0 and nothing new yet, it waits that long
// for output or the end.
func (e *Executions) Logs(ctx context.Context, owner, id string, cursor int64, max int, stream string, wait time.Duration) (LogChunk, error) {
	rec, err := e.Get(owner, id)
	if err != nil {
		return LogChunk{}, err
	}
	if max <= 0 || max > MaxLogChunk {
		max = MaxLogChunk
	}
	file := "output.log"
	if stream == "stderr" {
		file = "stderr.log"
	} else if stream != "" {
		return LogChunk{}, refusef("stream %q: use \"stderr\" or omit it for the combined log", stream)
	}
	if cursor < 0 {
		return LogChunk{}, refusef("cursor %d is negative; start at 0", cursor)
	}
	path := filepath.Join(e.dir, rec.ID, file)
	size := fileSize(path)
	if cursor > size && rec.State.Terminal() {
		return LogChunk{}, refusef("cursor %d is past the end of the log (%d bytes)", cursor, size)
	}
	if cursor >= size && wait > 0 && !rec.State.Terminal() {
		e.mu.Lock()
		l, ok := e.live[id]
		e.mu.Unlock()
		if ok {
			_, changed := l.sink.state()
			t := time.NewTimer(wait)
			select {
			case <-changed:
			case <-l.done:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			if rec, err = e.Get(owner, id); err != nil {
				return LogChunk{}, err
			}
			size = fileSize(path)
		}
	}
	c := LogChunk{Cursor: cursor, NextCursor: cursor, State: rec.State}
	if cursor < size {
		f, err := os.Open(path)
		if err != nil {
			return LogChunk{}, err
		}
		defer f.Close()
		buf := make([]byte, min(int64(max), size-cursor))
		n, err := f.ReadAt(buf, cursor)
		if err != nil && !errors.Is(err, io.EOF) {
			return LogChunk{}, err
		}
		buf = buf[:n]
		// End at a character boundary unless this is the end of the log.
		if cursor+int64(n) < size {
			cut := len(buf)
			for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
				if utf8.RuneStart(buf[i]) {
					if !utf8.FullRune(buf[i:]) {
						cut = i
					}
					break
				}
			}
			if cut > 0 {
				buf = buf[:cut]
			}
		}
		c.Text = strings.ToValidUTF8(string(buf), "\uFFFD")
		c.NextCursor = cursor + int64(len(buf))
	}
	c.More = c.NextCursor < fileSize(path) || !rec.State.Terminal()
	return c, nil
}

// LogPath returns the path of an execution's combined log.
func (e *Executions) LogPath(id string) string { return filepath.Join(e.dir, id, "output.log") }

// Shutdown kills every running execution and records it as lost (the
// server is stopping); it waits up to timeout for the records.
func (e *Executions) Shutdown(timeout time.Duration) {
	e.mu.Lock()
	ls := make([]*live, 0, len(e.live))
	for _, l := range e.live {
		ls = append(ls, l)
	}
	e.mu.Unlock()
	deadline := time.After(timeout)
	for _, l := range ls {
		l.mu.Lock()
		l.stop = Lost
		l.mu.Unlock()
		l.handle.Kill()
	}
	for _, l := range ls {
		select {
		case <-l.done:
		case <-deadline:
			return
		}
	}
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}
