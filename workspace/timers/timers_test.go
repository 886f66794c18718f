package timers

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// fakeExecs stands in for runner.Executions.
type fakeExecs struct {
	mu    sync.Mutex
	execs map[string]*runner.Execution
	done  map[string]chan struct{}
}

func newFakeExecs() *fakeExecs {
	return &fakeExecs{execs: map[string]*runner.Execution{}, done: map[string]chan struct{}{}}
}

func (f *fakeExecs) start(owner, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs[id] = &runner.Execution{ID: id, Owner: owner, State: runner.Running}
	f.done[id] = make(chan struct{})
}

func (f *fakeExecs) end(id string, st runner.State, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().UTC()
	e := f.execs[id]
	e.State, e.ExitCode, e.Ended = st, &code, &now
	close(f.done[id])
	delete(f.done, id)
}

func (f *fakeExecs) Get(owner, id string) (runner.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.execs[id]
	if !ok || e.Owner != owner {
		return runner.Execution{}, &runner.Error{Msg: "no execution " + id + " in this session"}
	}
	return *e, nil
}

func (f *fakeExecs) Done(id string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.done[id]; ok {
		return ch
	}
	return nil
}

// inbox records deliveries; sessions in live accept them.
type inbox struct {
	mu   sync.Mutex
	live map[string]bool
	got  []delivery
}

type delivery struct {
	session, text string
	data          map[string]any
}

func newInbox(live ...string) *inbox {
	in := &inbox{live: map[string]bool{}}
	for _, s := range live {
		in.live[s] = true
	}
	return in
}

func (in *inbox) deliver(session, text string, data map[string]any) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.live[session] {
		return false
	}
	in.got = append(in.got, delivery{session, text, data})
	return true
}

func (in *inbox) setLive(session string, live bool) {
	in.mu.Lock()
	in.live[session] = live
	in.mu.Unlock()
}

func (in *inbox) all() []delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]delivery(nil), in.got...)
}

type env struct {
	dir   string
	db    *store.Store
	svc   *Service
	execs *fakeExecs
	in    *inbox
}

func newEnv(t *testing.T, live ...string) *env {
	t.Helper()
	e := &env{dir: t.TempDir(), execs: newFakeExecs(), in: newInbox(live...)}
	e.open(t)
	return e
}

// open opens the data folder and starts the service ("the server starts").
func (e *env) open(t *testing.T) {
	t.Helper()
	e.openService(t)
	e.svc.Start()
}

// openService opens the data folder and the service without starting it:
// nothing fires.
func (e *env) openService(t *testing.T) {
	t.Helper()
	db, err := store.Open(e.dir, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: db, Executions: e.execs, Deliver: e.in.deliver})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	e.db, e.svc = db, svc
	t.Cleanup(e.close)
}

// close stops the service and the store ("the server stops").
func (e *env) close() {
	if e.svc != nil {
		e.svc.Close()
		e.db.Close()
		e.svc, e.db = nil, nil
	}
}

func ms(n int64) *int64 { return &n }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func isInputProblem(err error) bool {
	ip, ok := err.(interface{ InputProblem() bool })
	return ok && ip.InputProblem()
}

func TestCreateBounds(t *testing.T) {
	e := newEnv(t, "s")
	e.execs.start("s", "exec_0000000000000001")
	e.execs.start("other", "exec_0000000000000002")
	now := time.Now().UTC()
	maxMS := MaxDelay.Milliseconds()
	cases := []struct {
		name string
		spec Spec
		want string // "" for accepted
	}{
		{"after_ms", Spec{AfterMS: ms(60_000), Message: "m"}, ""},
		{"after_ms 0", Spec{AfterMS: ms(0), Message: "m"}, ""},
		{"after_ms at the maximum", Spec{AfterMS: ms(maxMS), Message: "m"}, ""},
		{"after_ms past the maximum", Spec{AfterMS: ms(maxMS + 1), Message: "m"}, "beyond the maximum delay of 7 days"},
		{"negative after_ms", Spec{AfterMS: ms(-5), Message: "m"}, "after_ms is negative (-5)"},
		{"both", Spec{AfterMS: ms(10), At: now.Add(time.Hour).Format(time.RFC3339), Message: "m"}, "exactly one of after_ms"},
		{"neither", Spec{Message: "m"}, "give one of after_ms"},
		{"at", Spec{At: now.Add(time.Hour).Format(time.RFC3339), Message: "m"}, ""},
		{"at with fraction and offset", Spec{At: now.Add(time.Hour).In(time.FixedZone("x", 3600)).Format(time.RFC3339Nano), Message: "m"}, ""},
		{"at in the past", Spec{At: now.Add(-time.Minute).Format(time.RFC3339), Message: "m"}, "is in the past"},
		{"at beyond the maximum", Spec{At: now.Add(MaxDelay + time.Hour).Format(time.RFC3339), Message: "m"}, "more than 7 days ahead"},
		{"at not RFC 3339", Spec{At: "tomorrow 9am", Message: "m"}, "not an RFC 3339 time"},
		{"empty message", Spec{AfterMS: ms(10)}, "message is empty"},
		{"blank message", Spec{AfterMS: ms(10), Message: " \n\t"}, "message is empty"},
		{"message at the cap", Spec{AfterMS: ms(60_000), Message: strings.Repeat("ü", MaxMessageChars)}, ""},
		{"message past the cap", Spec{AfterMS: ms(10), Message: strings.Repeat("ü", MaxMessageChars+1)}, "message has 2001 characters; at most 2000"},
		{"own execution", Spec{AfterMS: ms(60_000), Message: "m", ExecutionID: "exec_0000000000000001"}, ""},
		{"unknown execution", Spec{AfterMS: ms(10), Message: "m", ExecutionID: "exec_00000000000000ff"}, "execution_id: no execution exec_00000000000000ff in this session"},
		{"another session's execution", Spec{AfterMS: ms(10), Message: "m", ExecutionID: "exec_0000000000000002"}, "execution_id: no execution exec_0000000000000002 in this session"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, err := e.svc.Create("s", "s", c.spec)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tm.State != Pending || !idPattern.MatchString(tm.ID) {
					t.Fatalf("created %+v", tm)
				}
				return
			}
			if err == nil || !isInputProblem(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an input problem containing %q", err, c.want)
			}
		})
	}
	// Without executions, execution_id is refused plainly.
	svc, err := New(Config{Store: e.db})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.Create("s", "s", Spec{AfterMS: ms(10), Message: "m", ExecutionID: "exec_0000000000000001"}); err == nil || !isInputProblem(err) {
		t.Fatalf("execution_id without executions: %v", err)
	}
}

func TestMaxPending(t *testing.T) {
	e := newEnv(t, "s")
	var ids []string
	for i := range MaxPending {
		tm, err := e.svc.Create("s", "s", Spec{AfterMS: ms(3_600_000), Message: fmt.Sprint(i)})
		if err != nil {
			t.Fatalf("timer %d: %v", i+1, err)
		}
		ids = append(ids, tm.ID)
	}
	if _, err := e.svc.Create("s", "s", Spec{AfterMS: ms(3_600_000), Message: "one too many"}); err == nil || !strings.Contains(err.Error(), "50 pending timers, the maximum") {
		t.Fatalf("51st timer: %v", err)
	}
	if _, err := e.svc.Create("other", "other", Spec{AfterMS: ms(3_600_000), Message: "another session"}); err != nil {
		t.Fatalf("another session is not limited by this one: %v", err)
	}
	if _, _, err := e.svc.Cancel("s", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create("s", "s", Spec{AfterMS: ms(3_600_000), Message: "room again"}); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	pending, _, _ := e.svc.List("s")
	if len(pending) != MaxPending {
		t.Fatalf("%d pending", len(pending))
	}
}

func TestConcurrentCreatesRespectTheLimit(t *testing.T) {
	e := newEnv(t, "s")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range MaxPending + 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.svc.Create("s", "s", Spec{AfterMS: ms(3_600_000), Message: "x"}); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != MaxPending {
		t.Fatalf("%d created, want %d", ok, MaxPending)
	}
}

func TestFiresOnceAndDelivers(t *testing.T) {
	e := newEnv(t, "s")
	tm, err := e.svc.Create("s", "s", Spec{AfterMS: ms(30), Message: "check the assay plates"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "delivery", func() bool { return len(e.in.all()) == 1 })
	got := e.in.all()[0]
	if got.session != "s" || !strings.Contains(got.text, "check the assay plates") || !strings.Contains(got.text, tm.ID) || got.data["trigger"] != "deadline" || got.data["late"] != false {
		t.Fatalf("delivery %+v", got)
	}
	eventually(t, "delivery recorded", func() bool { cur, _ := e.svc.Get("s", tm.ID); return cur.Delivery == Delivered })
	cur, _ := e.svc.Get("s", tm.ID)
	if cur.State != Fired || cur.Trigger != Deadline || cur.Late || cur.DeliveredTo != "s" || cur.FiredAt == nil || cur.FiredAt.Before(tm.Due) {
		t.Fatalf("record %+v", cur)
	}
	// Cancelling a fired timer changes nothing and is not an error.
	after, changed, err := e.svc.Cancel("s", tm.ID)
	if err != nil || changed || after.State != Fired {
		t.Fatalf("cancel after firing: %+v %v %v", after, changed, err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(e.in.all()); n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}

func TestCancelIdempotentAndOtherOwnersInvisible(t *testing.T) {
	// Not started until the end, so the timer cannot fire before the
	// cancel however slow the machine.
	e := &env{dir: t.TempDir(), execs: newFakeExecs(), in: newInbox("a", "b")}
	e.openService(t)
	tm, err := e.svc.Create("a", "a", Spec{AfterMS: ms(50), Message: "a's reminder"})
	if err != nil {
		t.Fatal(err)
	}
	// Another owner sees nothing of it.
	if _, _, err := e.svc.Cancel("b", tm.ID); err == nil || !strings.Contains(err.Error(), "no timer "+tm.ID+" in this session") {
		t.Fatalf("b cancels a's timer: %v", err)
	}
	if _, err := e.svc.Get("b", tm.ID); err == nil {
		t.Fatal("b reads a's timer")
	}
	if p, r, _ := e.svc.List("b"); len(p)+len(r) != 0 {
		t.Fatalf("b lists %v %v", p, r)
	}
	for _, bad := range []string{"", "timer_1", "exec_0123456789abcdef"} {
		if _, _, err := e.svc.Cancel("a", bad); err == nil || !isInputProblem(err) {
			t.Fatalf("cancel %q: %v", bad, err)
		}
	}
	got, changed, err := e.svc.Cancel("a", tm.ID)
	if err != nil || !changed || got.State != Cancelled || got.Reason != "cancelled with timer_cancel" {
		t.Fatalf("cancel: %+v %v %v", got, changed, err)
	}
	got, changed, err = e.svc.Cancel("a", tm.ID)
	if err != nil || changed || got.State != Cancelled {
		t.Fatalf("second cancel: %+v %v %v", got, changed, err)
	}
	e.svc.Start()
	time.Sleep(150 * time.Millisecond)
	if len(e.in.all()) != 0 {
		t.Fatal("a cancelled timer fired")
	}
	p, r, _ := e.svc.List("a")
	if len(p) != 0 || len(r) != 1 || r[0].ID != tm.ID {
		t.Fatalf("list: %v %v", p, r)
	}
}

func TestRestartFiresLateTimerOnce(t *testing.T) {
	// The server runs without firing (not started), so the timer is
	// certainly still pending when it stops; no live session at first.
	e := &env{dir: t.TempDir(), execs: newFakeExecs(), in: newInbox()}
	e.openService(t)
	late, err := e.svc.Create("stdio", "stdio-1", Spec{AfterMS: ms(80), Message: "missed while down"})
	if err != nil {
		t.Fatal(err)
	}
	later, err := e.svc.Create("stdio", "stdio-1", Spec{AfterMS: ms(3_600_000), Message: "an hour on"})
	if err != nil {
		t.Fatal(err)
	}
	e.close() // the server stops (crash: the session never ended)
	time.Sleep(150 * time.Millisecond)

	e.open(t) // the server starts again
	eventually(t, "the late timer to fire", func() bool { cur, _ := e.svc.Get("stdio", late.ID); return cur.Delivery == Waiting })
	cur, _ := e.svc.Get("stdio", late.ID)
	if !cur.Late || cur.Trigger != Deadline || cur.Delivery != Waiting {
		t.Fatalf("late timer %+v", cur)
	}
	if cur, _ := e.svc.Get("stdio", later.ID); cur.State != Pending {
		t.Fatalf("the later timer: %+v", cur)
	}
	// The owner's next session makes a tool call: the waiting reminder is
	// delivered to it, and it adopts the pending timer.
	e.in.setLive("stdio-2", true)
	e.svc.SessionActive("stdio", "stdio-2")
	got := e.in.all()
	if len(got) != 1 || got[0].session != "stdio-2" || !strings.Contains(got[0].text, "delivered late") || got[0].data["late"] != true {
		t.Fatalf("deliveries %+v", got)
	}
	if cur, _ := e.svc.Get("stdio", later.ID); cur.Session != "stdio-2" {
		t.Fatalf("pending timer not adopted: %+v", cur)
	}
	e.svc.SessionActive("stdio", "stdio-2")
	if len(e.in.all()) != 1 {
		t.Fatal("delivered twice")
	}

	// Another restart: it does not fire again.
	e.close()
	e.open(t)
	e.in.setLive("stdio-3", true)
	e.svc.SessionActive("stdio", "stdio-3")
	time.Sleep(50 * time.Millisecond)
	if n := len(e.in.all()); n != 1 {
		t.Fatalf("fired again after a restart: %d deliveries", n)
	}
	if cur, _ := e.svc.Get("stdio", late.ID); cur.Delivery != Delivered || cur.DeliveredTo != "stdio-2" {
		t.Fatalf("after restart %+v", cur)
	}
}

func TestExecutionTimers(t *testing.T) {
	e := newEnv(t, "s")
	t.Run("the execution ends first", func(t *testing.T) {
		e.execs.start("s", "exec_00000000000000a1")
		tm, err := e.svc.Create("s", "s", Spec{AfterMS: ms(60_000), Message: "look at the fit", ExecutionID: "exec_00000000000000a1"})
		if err != nil || tm.ExecutionState != "running" {
			t.Fatalf("%+v %v", tm, err)
		}
		e.execs.end("exec_00000000000000a1", runner.Failed, 3)
		eventually(t, "firing", func() bool { cur, _ := e.svc.Get("s", tm.ID); return cur.Delivery == Delivered })
		cur, _ := e.svc.Get("s", tm.ID)
		if cur.Trigger != ExecutionEnded || cur.ExecutionState != "failed" || *cur.ExitCode != 3 {
			t.Fatalf("%+v", cur)
		}
		text, _ := Reminder(cur)
		if !strings.Contains(text, "execution exec_00000000000000a1 ended: failed, exit code 3") || !strings.Contains(text, "look at the fit") {
			t.Fatalf("text %q", text)
		}
	})
	t.Run("the deadline comes first", func(t *testing.T) {
		e.execs.start("s", "exec_00000000000000a2")
		tm, err := e.svc.Create("s", "s", Spec{AfterMS: ms(30), Message: "still going?", ExecutionID: "exec_00000000000000a2"})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "firing", func() bool { cur, _ := e.svc.Get("s", tm.ID); return cur.Delivery == Delivered })
		cur, _ := e.svc.Get("s", tm.ID)
		text, _ := Reminder(cur)
		if cur.Trigger != Deadline || cur.ExecutionState != "running" || !strings.Contains(text, "execution exec_00000000000000a2 is running") {
			t.Fatalf("%+v %q", cur, text)
		}
		e.execs.end("exec_00000000000000a2", runner.Succeeded, 0)
	})
	t.Run("the execution had already ended", func(t *testing.T) {
		tm, err := e.svc.Create("s", "s", Spec{AfterMS: ms(60_000), Message: "done already", ExecutionID: "exec_00000000000000a2"})
		if err != nil || tm.ExecutionState != "succeeded" {
			t.Fatalf("%+v %v", tm, err)
		}
		eventually(t, "firing", func() bool { cur, _ := e.svc.Get("s", tm.ID); return cur.State == Fired })
		if cur, _ := e.svc.Get("s", tm.ID); cur.Trigger != ExecutionEnded || cur.Late {
			t.Fatalf("%+v", cur)
		}
	})
}

func TestSessionEndCancelsAndSuppresses(t *testing.T) {
	e := newEnv(t, "a", "b")
	a1, _ := e.svc.Create("a", "a", Spec{AfterMS: ms(60_000), Message: "a1"})
	a2, _ := e.svc.Create("a", "a", Spec{AfterMS: ms(3_600_000), Message: "a2"})
	b1, _ := e.svc.Create("b", "b", Spec{AfterMS: ms(3_600_000), Message: "b1"})
	// A reminder of a that fired while a was not reachable waits...
	e.in.setLive("a", false)
	w, _ := e.svc.Create("a", "a", Spec{AfterMS: ms(0), Message: "waiting"})
	eventually(t, "waiting", func() bool { cur, _ := e.svc.Get("a", w.ID); return cur.Delivery == Waiting })

	e.svc.SessionEnded("a")
	for _, id := range []string{a1.ID, a2.ID} {
		cur, _ := e.svc.Get("a", id)
		if cur.State != Cancelled || cur.Reason != "the session ended" || cur.CancelledAt == nil {
			t.Fatalf("%s: %+v", id, cur)
		}
	}
	// ... and is suppressed, kept on record.
	if cur, _ := e.svc.Get("a", w.ID); cur.State != Fired || cur.Delivery != Suppressed {
		t.Fatalf("waiting reminder: %+v", cur)
	}
	if cur, _ := e.svc.Get("b", b1.ID); cur.State != Pending {
		t.Fatalf("b's timer: %+v", cur)
	}
	// A tool call reported after the end wakes nothing.
	e.in.setLive("a", true)
	e.svc.SessionActive("a", "a")
	if got := e.in.all(); len(got) != 0 {
		t.Fatalf("an ended session was woken: %+v", got)
	}
	p, r, _ := e.svc.List("a")
	if len(p) != 0 || len(r) != 3 {
		t.Fatalf("list after end: %d pending, %d recent", len(p), len(r))
	}
}

func TestListOrder(t *testing.T) {
	e := newEnv(t, "s")
	late, _ := e.svc.Create("s", "s", Spec{AfterMS: ms(3_600_000), Message: "later"})
	soon, _ := e.svc.Create("s", "s", Spec{AfterMS: ms(60_000), Message: "sooner"})
	fired, _ := e.svc.Create("s", "s", Spec{AfterMS: ms(0), Message: "now"})
	eventually(t, "firing", func() bool { cur, _ := e.svc.Get("s", fired.ID); return cur.State == Fired })
	p, r, err := e.svc.List("s")
	if err != nil || len(p) != 2 || p[0].ID != soon.ID || p[1].ID != late.ID || len(r) != 1 || r[0].ID != fired.ID {
		t.Fatalf("list: %v %v %v", p, r, err)
	}
}
