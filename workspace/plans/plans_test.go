package plans

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

func openStore(t *testing.T, dir string, cfg Config) (*Store, *store.Store) {
	t.Helper()
	db, err := store.Open(dir, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, cfg)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return s, db
}

func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, db := openStore(t, t.TempDir(), cfg)
	t.Cleanup(func() { db.Close() })
	return s
}

func items(n int, status Status) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{Step: fmt.Sprintf("step %d", i+1), Status: status}
	}
	return out
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		items []Item
		expl  string
		want  string // "" for valid; else substrings of the error, "|"-separated
	}{
		{"empty list clears", nil, "", ""},
		{"20 items", items(MaxItems, Pending), "", ""},
		{"21 items", items(MaxItems+1, Pending), "", "21 items|at most 20"},
		{"every status", []Item{{"a", Pending}, {"b", InProgress}, {"c", Completed}, {"d", InProgress}}, "", ""},
		{"unknown status", []Item{{"a", Pending}, {"run the assay", "done"}}, "", `plan[1] ("run the assay").status "done" is not one of pending, in_progress, completed`},
		{"missing status", []Item{{"a", ""}}, "", `plan[0] ("a").status is missing`},
		{"empty step", []Item{{"a", Pending}, {"", Completed}}, "", "plan[1].step is empty"},
		{"blank step", []Item{{" \t\n", Completed}}, "", "plan[0].step is empty"},
		{"step at the cap", []Item{{strings.Repeat("é", MaxStepChars), Pending}}, "", ""},
		{"step past the cap", []Item{{strings.Repeat("é", MaxStepChars+1), Pending}}, "", "step has 1001 characters; at most 1000"},
		{"explanation past the cap", nil, strings.Repeat("x", MaxExplanationChars+1), "explanation has 4001 characters"},
		{"several problems named at once", []Item{{"", "x"}, {"b", "y"}}, "", `plan[0].step is empty|plan[0].status "x"|plan[1] ("b").status "y"`},
		{"many problems summarised", []Item{{"", ""}, {"", ""}, {"", ""}, {"", ""}}, "", "and 3 more problem(s)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.items, c.expl)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if ip, ok := err.(interface{ InputProblem() bool }); !ok || !ip.InputProblem() {
				t.Fatalf("%T is not an input problem", err)
			}
			for _, w := range strings.Split(c.want, "|") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestUpdateReplaceClearAndEvents(t *testing.T) {
	dir := t.TempDir()
	var changes atomic.Int32
	s, db := openStore(t, dir, Config{Window: time.Millisecond, OnChange: func(string) { changes.Add(1) }})

	if p, err := s.Get("s1"); err != nil || p.Revision != 0 || len(p.Items) != 0 || p.Progress != nil {
		t.Fatalf("fresh session: %+v %v", p, err)
	}
	out, err := s.Update("s1", []Item{{"load data", InProgress}, {"  fit model ", Pending}}, "first cut")
	if err != nil || !out.Committed || out.Batch != 1 || out.Plan.Revision != 1 || out.Replaced != nil {
		t.Fatalf("first update: %+v %v", out, err)
	}
	if out.Plan.Items[1].Step != "fit model" {
		t.Fatalf("step not trimmed: %q", out.Plan.Items[1].Step)
	}
	out, err = s.Update("s1", []Item{{"load data", Completed}, {"fit model", InProgress}, {"plot", Pending}}, "")
	if err != nil || !out.Committed || out.Plan.Revision != 2 || out.Replaced == nil || out.Replaced.ToolResults != 0 {
		t.Fatalf("replace: %+v %v", out, err)
	}
	if pe, ip, co := out.Plan.Counts(); pe != 1 || ip != 1 || co != 1 {
		t.Fatalf("counts %d %d %d", pe, ip, co)
	}
	out, err = s.Update("s1", nil, "done with this")
	if err != nil || out.Plan.Revision != 3 || len(out.Plan.Items) != 0 {
		t.Fatalf("clear: %+v %v", out, err)
	}
	if _, err := s.Update("s1", items(MaxItems+1, Pending), ""); err == nil {
		t.Fatal("21 items accepted")
	}
	if changes.Load() != 3 {
		t.Fatalf("OnChange called %d times, want 3", changes.Load())
	}
	evs, err := s.Events("s1")
	if err != nil || len(evs) != 3 {
		t.Fatalf("events: %+v %v", evs, err)
	}
	for i, ev := range evs {
		if ev.Type != EventPlanUpdated || ev.Revision != uint64(i+1) || ev.Session != "s1" {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	if len(evs[1].Items) != 3 || evs[0].Explanation != "first cut" {
		t.Fatalf("events keep the snapshots: %+v", evs)
	}

	// The plan and its history survive a restart; counting restarts.
	db.Close()
	s, db = openStore(t, dir, Config{})
	defer db.Close()
	p, err := s.Get("s1")
	if err != nil || p.Revision != 3 || p.Explanation != "done with this" || p.Progress == nil || p.Progress.Since.Before(evs[2].Time) {
		t.Fatalf("after restart: %+v %v", p, err)
	}
	if evs, _ := s.Events("s1"); len(evs) != 3 {
		t.Fatalf("events after restart: %d", len(evs))
	}
	s.Forget("s1") // as if nothing of it were in memory yet
	out, err = s.Update("s1", items(1, Pending), "")
	if err != nil || out.Plan.Revision != 4 || out.Replaced == nil || out.Replaced.ToolResults != 0 {
		t.Fatalf("first update after a restart: %+v %v", out, err)
	}
}

func TestConcurrentCallsCommitOnlyTheLast(t *testing.T) {
	// A generous window: on a loaded test machine 100 goroutines may take a
	// while to all arrive. The semantics do not depend on its length.
	s := newStore(t, Config{Window: 250 * time.Millisecond, MaxWait: 5 * time.Second})
	const n = 100
	outs := make([]Outcome, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i], errs[i] = s.Update("s", []Item{{fmt.Sprintf("call %d", i), Pending}}, fmt.Sprint(i))
		}()
	}
	close(start)
	wg.Wait()
	committed := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if outs[i].Batch != n {
			t.Fatalf("call %d was in a batch of %d, want %d", i, outs[i].Batch, n)
		}
		if outs[i].Committed {
			if committed >= 0 {
				t.Fatalf("calls %d and %d both committed", committed, i)
			}
			committed = i
		}
	}
	if committed < 0 {
		t.Fatal("no call committed")
	}
	want := fmt.Sprint(committed)
	for i := range n {
		if outs[i].Plan.Revision != 1 || outs[i].Plan.Explanation != want {
			t.Fatalf("call %d reports plan %+v, want the committed call %d's", i, outs[i].Plan, committed)
		}
	}
	p, _ := s.Get("s")
	if p.Revision != 1 || p.Explanation != want || p.Items[0].Step != "call "+want {
		t.Fatalf("stored plan %+v, want call %d's", p, committed)
	}
	evs, _ := s.Events("s")
	if len(evs) != 1 || evs[0].Superseded != n-1 {
		t.Fatalf("events: %+v", evs)
	}
}

func TestCallsOneAfterAnotherAllCommit(t *testing.T) {
	s := newStore(t, Config{Window: 5 * time.Millisecond})
	for i := 1; i <= 3; i++ {
		out, err := s.Update("s", items(i, Pending), "")
		if err != nil || !out.Committed || out.Batch != 1 || out.Plan.Revision != uint64(i) {
			t.Fatalf("call %d: %+v %v", i, out, err)
		}
	}
}

func TestProgress(t *testing.T) {
	s := newStore(t, Config{Window: time.Millisecond})
	// No plan yet: nothing is counted.
	s.ToolResult("s", "list_files", "")
	if _, err := s.Update("s", items(2, Pending), ""); err != nil {
		t.Fatal(err)
	}
	s.ToolResult("s", ToolName, "") // the update's own result
	s.ToolResult("s", "read_file", "")
	s.ToolResult("s", "run_shell", "")
	p, _ := s.Get("s")
	if p.Progress.ToolResults != 2 || p.Progress.ModelSteps != nil {
		t.Fatalf("progress without steps: %+v", p.Progress)
	}
	// The client names model steps from now on.
	s.ToolResult("s", ToolName, "7")
	s.ToolResult("s", "read_file", "7") // same step as the update
	s.ToolResult("s", "read_file", "8")
	s.ToolResult("s", "run_shell", "8")
	s.ToolResult("s", "run_shell", "9")
	p, _ = s.Get("s")
	if p.Progress.ToolResults != 6 || p.Progress.ModelSteps == nil || *p.Progress.ModelSteps != 2 {
		t.Fatalf("progress with steps: %+v", p.Progress)
	}
	out, err := s.Update("s", items(2, Completed), "")
	if err != nil || out.Replaced == nil || out.Replaced.ToolResults != 6 || *out.Replaced.ModelSteps != 2 {
		t.Fatalf("replaced progress: %+v %v", out.Replaced, err)
	}
	if out.Plan.Progress.ToolResults != 0 || out.Plan.Progress.ModelSteps == nil || *out.Plan.Progress.ModelSteps != 0 {
		t.Fatalf("counting restarts at the update: %+v", out.Plan.Progress)
	}
	// Another session's results do not count here.
	s.ToolResult("other", "read_file", "1")
	if p, _ := s.Get("s"); p.Progress.ToolResults != 0 {
		t.Fatalf("another session's results counted: %+v", p.Progress)
	}
	s.Forget("s")
	if p, _ := s.Get("s"); p.Revision != 2 || p.Progress == nil {
		t.Fatalf("after Forget: %+v", p)
	}
}

func TestSessionsAreIndependent(t *testing.T) {
	s := newStore(t, Config{Window: time.Millisecond})
	var wg sync.WaitGroup
	for _, sess := range []string{"main", "subagent-1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := s.Update(sess, []Item{{sess, Pending}}, ""); err != nil || !out.Committed {
				t.Errorf("%s: %+v %v", sess, out, err)
			}
		}()
	}
	wg.Wait()
	for _, sess := range []string{"main", "subagent-1"} {
		p, _ := s.Get(sess)
		if p.Revision != 1 || p.Items[0].Step != sess {
			t.Fatalf("%s: %+v", sess, p)
		}
	}
}

func TestURI(t *testing.T) {
	for _, id := range []string{"stdio-0123456789abcdef", "mcp-session-00ff", "a b/c"} {
		u := URI(id)
		got, ok := SessionOfURI(u)
		if !ok || got != id {
			t.Fatalf("%q -> %q -> %q %v", id, u, got, ok)
		}
	}
	if URI("stdio-1") != "scimcp://sessions/stdio-1/plan" {
		t.Fatal(URI("stdio-1"))
	}
	for _, bad := range []string{"scimcp://sessions//plan", "scimcp://sessions/x/y/plan", "scimcp://other/x/plan", "scimcp://sessions/x/plans"} {
		if _, ok := SessionOfURI(bad); ok {
			t.Fatalf("%q accepted", bad)
		}
	}
}
