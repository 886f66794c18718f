package runner_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

type execEnv struct {
	ex   *runner.Executions
	st   *store.Store
	data string
}

func newExecs(t *testing.T, limits runner.Limits) *execEnv {
	t.Helper()
	data := t.TempDir()
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newLocal(t, func(c *runner.LocalConfig) { c.Limits = limits })
	ex, err := runner.NewExecutions(runner.Config{Store: st, Runners: []runner.Runner{r}, CancelGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &execEnv{ex: ex, st: st, data: data}
}

func sh(owner, script string) runner.Request {
	return runner.Request{Owner: owner, Session: owner, Argv: []string{"/bin/bash", "-c", script}, Command: script}
}

func TestExecutionLifecycle(t *testing.T) {
	e := newExecs(t, runner.Limits{})
	ctx := context.Background()
	rec, err := e.ex.Start(ctx, sh("alice", "echo one; sleep 1; echo two >&2; exit 4"))
	if err != nil || rec.State != runner.Running {
		t.Fatalf("start: %v %+v", err, rec)
	}
	// A short wait expires without stopping the command.
	rec, _ = e.ex.Wait(ctx, "alice", rec.ID, 100*time.Millisecond)
	if rec.State != runner.Running {
		t.Fatalf("after a short wait: %s", rec.State)
	}
	rec, _ = e.ex.Wait(ctx, "alice", rec.ID, 30*time.Second)
	if rec.State != runner.Failed || rec.ExitCode == nil || *rec.ExitCode != 4 || rec.Ended == nil {
		t.Fatalf("end: %+v", rec)
	}
	c, err := e.ex.Logs(ctx, "alice", rec.ID, 0, 0, "", 0)
	if err != nil || c.Text != "one\ntwo\n" || c.More {
		t.Fatalf("logs: %v %+v", err, c)
	}
	c, _ = e.ex.Logs(ctx, "alice", rec.ID, 0, 0, "stderr", 0)
	if c.Text != "two\n" {
		t.Fatalf("stderr log: %q", c.Text)
	}
	// Other owners see nothing.
	if _, err := e.ex.Get("mallory", rec.ID); err == nil {
		t.Fatal("another owner can read the execution")
	}
	if _, _, err := e.ex.Cancel(ctx, "mallory", rec.ID); err == nil {
		t.Fatal("another owner can cancel the execution")
	}
	// Cancelling a finished execution says so and changes nothing.
	got, wasDone, err := e.ex.Cancel(ctx, "alice", rec.ID)
	if err != nil || !wasDone || got.State != runner.Failed {
		t.Fatalf("cancel after end: %v %v %+v", err, wasDone, got)
	}
	list, _ := e.ex.List("alice", 0)
	if len(list) != 1 || list[0].ID != rec.ID {
		t.Fatalf("list: %+v", list)
	}
	for _, bad := range []string{"", "exec_123", "../../state.db"} {
		if _, err := e.ex.Get("alice", bad); err == nil {
			t.Errorf("id %q accepted", bad)
		}
	}
	if _, err := e.ex.Start(ctx, runner.Request{Owner: "alice", Runner: "slurm", Argv: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "available: local") {
		t.Fatalf("unknown runner: %v", err)
	}
}

func TestExecutionLogsFollow(t *testing.T) {
	e := newExecs(t, runner.Limits{})
	ctx := context.Background()
	rec, err := e.ex.Start(ctx, sh("o", "for i in 1 2 3 4 5; do echo tick $i; sleep 0.4; done"))
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	var cursor int64
	chunks := 0
	for {
		c, err := e.ex.Logs(ctx, "o", rec.ID, cursor, 0, "", 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if c.Text != "" {
			chunks++
		}
		got.WriteString(c.Text)
		cursor = c.NextCursor
		if !c.More {
			break
		}
	}
	if got.String() != "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n" {
		t.Fatalf("followed log: %q", got.String())
	}
	if chunks < 3 {
		t.Fatalf("output arrived in %d chunk(s); it should stream while the command runs", chunks)
	}
}

func TestExecutionCancelAndTimeout(t *testing.T) {
	e := newExecs(t, runner.Limits{Wall: 1500 * time.Millisecond})
	ctx := context.Background()
	rec, _ := e.ex.Start(ctx, sh("o", "trap '' TERM; sleep 60"))
	got, wasDone, err := e.ex.Cancel(ctx, "o", rec.ID)
	if err != nil || wasDone || got.State != runner.Cancelled {
		t.Fatalf("cancel: %v %v %+v", err, wasDone, got)
	}
	again, wasDone, _ := e.ex.Cancel(ctx, "o", rec.ID)
	if !wasDone || again.State != runner.Cancelled {
		t.Fatalf("second cancel: %v %+v", wasDone, again)
	}
	rec, _ = e.ex.Start(ctx, sh("o", "sleep 60"))
	rec, _ = e.ex.Wait(ctx, "o", rec.ID, 20*time.Second)
	if rec.State != runner.TimedOut || !strings.Contains(rec.Reason, "wall-time") {
		t.Fatalf("timeout: %+v", rec)
	}
}

func TestExecutionOutputCap(t *testing.T) {
	e := newExecs(t, runner.Limits{OutputBytes: 256 << 10})
	ctx := context.Background()
	// 200 MB of output: capped, the tail kept, and the call stays quick to
	// answer while it runs.
	rec, _ := e.ex.Start(ctx, sh("o", "yes 0123456789 | head -c 200000000; echo; echo THE-END"))
	rec, _ = e.ex.Wait(ctx, "o", rec.ID, 120*time.Second)
	if rec.State != runner.Succeeded || rec.DroppedBytes == 0 {
		t.Fatalf("capped run: %+v", rec)
	}
	st, _ := os.Stat(e.ex.LogPath(rec.ID))
	if st.Size() > (256<<10)+(1<<20)+1024 {
		t.Fatalf("log is %d bytes, over cap + tail", st.Size())
	}
	c, _ := e.ex.Logs(ctx, "o", rec.ID, st.Size()-200, 0, "", 0)
	if !strings.Contains(c.Text, "THE-END") {
		t.Fatalf("the tail of the output was not kept: %q", c.Text)
	}
	all, _ := os.ReadFile(e.ex.LogPath(rec.ID))
	if !strings.Contains(string(all), "passed the log cap") {
		t.Fatal("the log does not say output was dropped")
	}
}

func TestManyConcurrentExecutions(t *testing.T) {
	e := newExecs(t, runner.Limits{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rec, err := e.ex.Start(ctx, sh("o", fmt.Sprintf("echo job %d", i)))
			if err != nil {
				errs <- err
				return
			}
			rec, _ = e.ex.Wait(ctx, "o", rec.ID, 60*time.Second)
			c, _ := e.ex.Logs(ctx, "o", rec.ID, 0, 0, "", 0)
			if rec.State != runner.Succeeded || c.Text != fmt.Sprintf("job %d\n", i) {
				errs <- fmt.Errorf("job %d: %s %q", i, rec.State, c.Text)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRunningExecutionsLostAfterRestart: a server that stops (here: its
// store closes without the executions ending) leaves records that the next
// start marks lost, with the log intact.
func TestRunningExecutionsLostAfterRestart(t *testing.T) {
	data := t.TempDir()
	st, _ := store.Open(data, store.Options{})
	r := newLocal(t, nil)
	ex, _ := runner.NewExecutions(runner.Config{Store: st, Runners: []runner.Runner{r}})
	rec, err := ex.Start(context.Background(), sh("o", "echo before-restart; sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	ex.Shutdown(5 * time.Second)
	st.Close()

	st, _ = store.Open(data, store.Options{})
	defer st.Close()
	ex, err = runner.NewExecutions(runner.Config{Store: st, Runners: []runner.Runner{r}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ex.Get("o", rec.ID)
	if err != nil || got.State != runner.Lost {
		t.Fatalf("after restart: %v %+v", err, got)
	}
	c, _ := ex.Logs(context.Background(), "o", rec.ID, 0, 0, "", 0)
	if !strings.HasPrefix(c.Text, "before-restart\n") || c.More {
		t.Fatalf("log after restart: %+v", c)
	}
}
