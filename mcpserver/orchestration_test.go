package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/timers"
)

// orchEnv is a test server with the orchestration tools wired the way
// cmd/scimcp wires them: timers deliver through Server.Deliver, session end
// cancels timers, every tool result reaches the orchestration hook, and the
// plan is a resource that announces its updates.
type orchEnv struct {
	*testEnv
	plans  *plans.Store
	timers *timers.Service
}

// lateExecs reaches the test env's executions once it exists.
type lateExecs struct{ e **testEnv }

func (l lateExecs) Get(owner, id string) (runner.Execution, error) {
	return (*l.e).execs.Get(owner, id)
}
func (l lateExecs) Done(id string) <-chan struct{} { return (*l.e).execs.Done(id) }

func newOrchEnv(t *testing.T, window time.Duration) *orchEnv {
	t.Helper()
	o := &orchEnv{}
	var env *testEnv
	env = newEnv(t, func(opts *Options) {
		var err error
		o.plans, err = plans.New(opts.Store, plans.Config{Window: window, MaxWait: 5 * time.Second, OnChange: func(session string) {
			for _, s := range env.srv.Sessions() {
				if s.ID == session {
					env.srv.MCP().SendNotificationToSpecificClient(s.MCPID, "notifications/resources/updated", map[string]any{"uri": plans.URI(session)})
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		o.timers, err = timers.New(timers.Config{Store: opts.Store, Executions: lateExecs{&env},
			Deliver: func(session, text string, data map[string]any) bool {
				return env.srv.Deliver(session, Notice{Kind: "timer", Text: text, Data: data})
			}})
		if err != nil {
			t.Fatal(err)
		}
		opts.Tools = append(opts.Tools, toolkit.Orchestration(o.plans, o.timers)...)
		opts.Groups = append(opts.Groups, toolkit.GroupOrchestration)
		// What callMiddleware will do once wired: the hook after every
		// tool result, before notices are attached.
		hook := toolkit.OrchestrationHook(o.plans, o.timers)
		for i := range opts.Tools {
			name, next := opts.Tools[i].Name(), opts.Tools[i].Handler
			opts.Tools[i].Handler = func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := next(ctx, req)
				hook(toolkit.CallerFrom(ctx), name, req.Params.Meta)
				return res, err
			}
		}
		opts.OnSessionEnd = func(id string) {
			o.timers.SessionEnded(id)
			o.plans.Forget(id)
		}
	})
	o.testEnv = env
	env.srv.MCP().AddResourceTemplate(toolkit.PlanResourceTemplate(), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		session := ""
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			for _, s := range env.srv.Sessions() {
				if s.MCPID == cs.SessionID() {
					session = s.ID
				}
			}
		}
		return toolkit.ReadPlanResource(o.plans, session, req.Params.URI)
	})
	o.timers.Start()
	t.Cleanup(o.timers.Close) // before the store closes
	return o
}

// inbox collects a client's notifications.
type inbox struct {
	mu  sync.Mutex
	got []mcp.JSONRPCNotification
}

func listen(c *client.Client) *inbox {
	in := &inbox{}
	c.OnNotification(func(n mcp.JSONRPCNotification) { in.mu.Lock(); in.got = append(in.got, n); in.mu.Unlock() })
	return in
}

// wait returns the first notification of method whose params, as JSON,
// contain want.
func (in *inbox) wait(t *testing.T, method, want string) mcp.JSONRPCNotification {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in.mu.Lock()
		for _, n := range in.got {
			if n.Method != method {
				continue
			}
			b, _ := json.Marshal(n.Params)
			if strings.Contains(string(b), want) {
				in.mu.Unlock()
				return n
			}
		}
		in.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s notification containing %q", method, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (in *inbox) count(method string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, x := range in.got {
		if x.Method == method {
			n++
		}
	}
	return n
}

// callStep calls a tool naming the model step in _meta.
func callStep(t *testing.T, c *client.Client, name, args string, step any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	if args != "" {
		req.Params.Arguments = json.RawMessage(args)
	}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{toolkit.ModelStepMeta: step}}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, args, err)
	}
	return res
}

func readPlan(t *testing.T, c *client.Client, uri string) (toolkit.PlanView, error) {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(context.Background(), req)
	if err != nil {
		return toolkit.PlanView{}, err
	}
	var v toolkit.PlanView
	if len(res.Contents) != 1 {
		t.Fatalf("contents: %+v", res.Contents)
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok || tc.MIMEType != "application/json" {
		t.Fatalf("content %#v", res.Contents[0])
	}
	if err := json.Unmarshal([]byte(tc.Text), &v); err != nil {
		t.Fatal(err)
	}
	return v, nil
}

func TestPlanSetReplacedAndReadAsResource(t *testing.T) {
	e := newOrchEnv(t, plans.DefaultWindow)
	c := e.connect(t)
	notes := listen(c)
	if names := toolNames(t, c); !contains(names, "update_plan") || !contains(names, "timer_create") {
		t.Fatalf("tools: %v", names)
	}

	res := call(t, c, "update_plan", `{"plan":[{"step":"load the counts","status":"in_progress"},{"step":"fit the model","status":"pending"}],"explanation":"first cut"}`)
	var out toolkit.UpdatePlanOut
	structured(t, res, &out)
	if res.IsError || out.Status != "committed" || out.Revision != 1 || out.InProgress != 1 || out.Pending != 1 || out.ProgressSincePrevious != nil {
		t.Fatalf("set: %s", text(res))
	}
	uri := out.ResourceURI
	if !strings.HasPrefix(uri, "scimcp://sessions/") {
		t.Fatalf("resource uri %q", uri)
	}
	notes.wait(t, "notifications/resources/updated", uri)

	// Work follows: two model steps, three tool results.
	callStep(t, c, "list_files", "", 11)
	callStep(t, c, "list_files", "", 12)
	callStep(t, c, "timer_list", "", 12)
	v, err := readPlan(t, c, uri)
	if err != nil {
		t.Fatal(err)
	}
	if v.Revision != 1 || len(v.Plan) != 2 || v.Plan[0].Step != "load the counts" || v.Explanation != "first cut" ||
		v.Progress == nil || v.Progress.ToolResults != 3 || v.Progress.ModelSteps == nil || *v.Progress.ModelSteps != 2 {
		t.Fatalf("resource: %+v progress %+v", v, v.Progress)
	}

	res = callStep(t, c, "update_plan", `{"plan":[{"step":"load the counts","status":"completed"},{"step":"fit the model","status":"in_progress"},{"step":"plot residuals","status":"pending"}]}`, 13)
	structured(t, res, &out)
	if out.Status != "committed" || out.Revision != 2 || out.Completed != 1 || out.ProgressSincePrevious == nil ||
		out.ProgressSincePrevious.ToolResults != 3 || *out.ProgressSincePrevious.ModelSteps != 2 {
		t.Fatalf("replace: %s", text(res))
	}
	if !strings.Contains(text(res), "Since the previous update: 3 tool result(s) over 2 model step(s).") {
		t.Fatalf("replace text: %s", text(res))
	}
	if v, _ := readPlan(t, c, uri); v.Revision != 2 || len(v.Plan) != 3 || v.Progress.ToolResults != 0 {
		t.Fatalf("after replace: %+v", v)
	}
	deadline := time.Now().Add(5 * time.Second)
	for notes.count("notifications/resources/updated") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := notes.count("notifications/resources/updated"); n != 2 {
		t.Fatalf("%d resources/updated notifications, want 2", n)
	}

	// Bad snapshots are refused with the item named; the plan stays.
	for args, want := range map[string]string{
		`{"plan":[{"step":"a","status":"pending"},{"step":"b","status":"finished"}]}`:                              `plan[1] ("b").status "finished" is not one of pending, in_progress, completed`,
		`{"plan":[{"step":" ","status":"pending"}]}`:                                                               `plan[0].step is empty`,
		`{"plan":[` + strings.Repeat(`{"step":"s","status":"pending"},`, 20) + `{"step":"s","status":"pending"}]}`: "the plan has 21 items; at most 20",
	} {
		if r := call(t, c, "update_plan", args); !r.IsError || !strings.Contains(text(r), want) {
			t.Fatalf("%s: %s", args, text(r))
		}
	}

	// Another session has its own plan and cannot read this one.
	other := e.connect(t)
	if _, err := readPlan(t, other, uri); err == nil {
		t.Fatal("another session read this session's plan")
	}
	res = call(t, other, "update_plan", `{"plan":[]}`)
	var otherOut toolkit.UpdatePlanOut
	structured(t, res, &otherOut)
	if otherOut.Revision != 1 || otherOut.ResourceURI == uri {
		t.Fatalf("other session: %s", text(res))
	}
	if v, _ := readPlan(t, c, uri); v.Revision != 2 {
		t.Fatalf("this plan changed: %+v", v)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestPlanCallsArrivingTogetherCommitOnlyTheLast(t *testing.T) {
	// A wide window keeps 100 goroutines in one batch on a loaded machine;
	// the rule does not depend on its length.
	e := newOrchEnv(t, 250*time.Millisecond)
	c := e.connect(t)
	const n = 100
	outs := make([]toolkit.UpdatePlanOut, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := mcp.CallToolRequest{}
			req.Params.Name = "update_plan"
			req.Params.Arguments = json.RawMessage(fmt.Sprintf(`{"plan":[{"step":"variant %d","status":"pending"}],"explanation":"call %d"}`, i, i))
			res, err := c.CallTool(context.Background(), req)
			if err != nil || res.IsError {
				t.Errorf("call %d: %v %+v", i, err, res)
				return
			}
			structured(t, res, &outs[i])
		}()
	}
	close(start)
	wg.Wait()
	committed := -1
	for i, o := range outs {
		switch o.Status {
		case "committed":
			if committed >= 0 {
				t.Fatalf("calls %d and %d both committed", committed, i)
			}
			committed = i
		case "superseded":
		default:
			t.Fatalf("call %d: status %q", i, o.Status)
		}
		if o.Batch != n || o.Revision != 1 {
			t.Fatalf("call %d: batch %d revision %d", i, o.Batch, o.Revision)
		}
	}
	if committed < 0 {
		t.Fatal("nothing committed")
	}
	want := fmt.Sprintf("call %d", committed)
	for i, o := range outs {
		if o.Explanation != want {
			t.Fatalf("call %d reports %q, want the committed %q", i, o.Explanation, want)
		}
	}
	v, err := readPlan(t, c, outs[0].ResourceURI)
	if err != nil || v.Revision != 1 || v.Explanation != want || v.Plan[0].Step != fmt.Sprintf("variant %d", committed) {
		t.Fatalf("stored plan %+v %v, want %s", v, err, want)
	}
	session, _ := plans.SessionOfURI(outs[0].ResourceURI)
	evs, err := e.plans.Events(session)
	if err != nil || len(evs) != 1 || evs[0].Type != "plan.updated" || evs[0].Superseded != n-1 {
		t.Fatalf("events %+v %v", evs, err)
	}
}

func TestTimerFiresIntoTheSession(t *testing.T) {
	e := newOrchEnv(t, plans.DefaultWindow)
	c := e.connect(t)
	owner := e.srv.Sessions()[0].Owner
	notes := listen(c)
	other := e.connect(t)

	res := call(t, c, "timer_create", `{"after_ms":100,"message":"check the assay plates"}`)
	var tv toolkit.TimerView
	structured(t, res, &tv)
	if res.IsError || tv.State != "pending" || !strings.HasPrefix(tv.TimerID, "timer_") {
		t.Fatalf("create: %s", text(res))
	}
	// Another session neither sees nor cancels it.
	if r := call(t, other, "timer_cancel", fmt.Sprintf(`{"timer_id":%q}`, tv.TimerID)); !r.IsError || !strings.Contains(text(r), "no timer") {
		t.Fatalf("other session cancels: %s", text(r))
	}
	var list toolkit.TimerListOut
	structured(t, call(t, other, "timer_list", ""), &list)
	if len(list.Pending)+len(list.Recent) != 0 {
		t.Fatalf("other session lists %+v", list)
	}

	n := notes.wait(t, "notifications/message", "check the assay plates")
	b, _ := json.Marshal(n.Params)
	if !strings.Contains(string(b), `"logger":"scimcp.timer"`) || !strings.Contains(string(b), tv.TimerID) {
		t.Fatalf("notification %s", b)
	}
	// The next tool result carries the reminder too, once.
	deadline := time.Now().Add(5 * time.Second)
	for cur, _ := e.timers.Get(owner, tv.TimerID); cur.Delivery != timers.Delivered && time.Now().Before(deadline); cur, _ = e.timers.Get(owner, tv.TimerID) {
		time.Sleep(5 * time.Millisecond) // the record of the delivery follows the notification
	}
	res = call(t, c, "timer_list", "")
	if !strings.Contains(text(res), "[scimcp timer] Timer "+tv.TimerID+" fired (due ") || res.Meta == nil || res.Meta.AdditionalFields["scimcp/notices"] == nil {
		t.Fatalf("next result: %s", text(res))
	}
	structured(t, res, &list)
	if len(list.Pending) != 0 || len(list.Recent) != 1 || list.Recent[0].Delivery != "delivered" || list.Recent[0].Trigger != "deadline" {
		t.Fatalf("list: %+v", list)
	}
	if r := call(t, c, "timer_list", ""); strings.Contains(text(r), "[scimcp timer]") {
		t.Fatal("the reminder was attached twice")
	}
	// Cancelling it now changes nothing, and says so.
	res = call(t, c, "timer_cancel", fmt.Sprintf(`{"timer_id":%q}`, tv.TimerID))
	var cancelled toolkit.TimerCancelOut
	structured(t, res, &cancelled)
	if res.IsError || !cancelled.AlreadyDone || cancelled.State != "fired" {
		t.Fatalf("cancel after firing: %s", text(res))
	}
	// Bad input.
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for args, want := range map[string]string{
		`{"message":"m"}`: "give one of after_ms",
		`{"after_ms":5,"at":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `","message":"m"}`: "exactly one of after_ms",
		`{"after_ms":-1,"message":"m"}`:                                 "after_ms must be at least 0",
		`{"at":"` + past + `","message":"m"}`:                           "is in the past",
		`{"after_ms":10,"message":"` + strings.Repeat("x", 2001) + `"}`: "at most 2000 characters",
	} {
		if r := call(t, c, "timer_create", args); !r.IsError || !strings.Contains(text(r), want) {
			t.Fatalf("%s: %s", args, text(r))
		}
	}
}

func TestTimerTiedToABackgroundExecution(t *testing.T) {
	e := newOrchEnv(t, plans.DefaultWindow)
	c := e.connect(t)
	notes := listen(c)
	res := call(t, c, "run_shell", `{"command":"sleep 1; exit 3","background":true}`)
	var run toolkit.RunShellOut
	structured(t, res, &run)
	if run.State != "running" {
		t.Fatalf("run_shell: %s", text(res))
	}
	other := e.connect(t)
	for _, args := range []string{
		fmt.Sprintf(`{"after_ms":60000,"message":"m","execution_id":%q}`, run.ExecutionID),
		`{"after_ms":60000,"message":"m","execution_id":"exec_00000000000000ff"}`,
	} {
		if r := call(t, other, "timer_create", args); !r.IsError || !strings.Contains(text(r), "execution_id: no execution") {
			t.Fatalf("%s from another session: %s", args, text(r))
		}
	}
	res = call(t, c, "timer_create", fmt.Sprintf(`{"after_ms":60000,"message":"look at the fit","execution_id":%q}`, run.ExecutionID))
	// On a very slow machine the command may have ended already; the timer
	// then fires at once, which the rest of the test accepts as well.
	if res.IsError || !strings.Contains(text(res), "or as soon as execution "+run.ExecutionID+" (now running) ends") && !strings.Contains(text(res), "has already ended (failed)") {
		t.Fatalf("timer_create: %s", text(res))
	}
	notes.wait(t, "notifications/message", "execution "+run.ExecutionID+" ended: failed, exit code 3")
	res = call(t, c, "timer_list", "")
	var list toolkit.TimerListOut
	structured(t, res, &list)
	if len(list.Recent) != 1 || list.Recent[0].Trigger != "execution" || list.Recent[0].ExecutionState != "failed" || !strings.Contains(text(res), "look at the fit") {
		t.Fatalf("list: %s", text(res))
	}
}

func TestEndingTheSessionCancelsPendingTimers(t *testing.T) {
	e := newOrchEnv(t, plans.DefaultWindow)
	c := e.connect(t)
	var ids []string
	for _, ms := range []int{60_000, 120_000} {
		var tv toolkit.TimerView
		structured(t, call(t, c, "timer_create", fmt.Sprintf(`{"after_ms":%d,"message":"later"}`, ms)), &tv)
		ids = append(ids, tv.TimerID)
	}
	sessions := e.srv.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("sessions %+v", sessions)
	}
	owner := sessions[0].Owner
	c.Close()
	pending, recent, err := e.timers.List(owner)
	if err != nil || len(pending) != 0 || len(recent) != 2 {
		t.Fatalf("after the end: %d pending, %d recent, %v", len(pending), len(recent), err)
	}
	for _, tm := range recent {
		if tm.State != timers.Cancelled || tm.Reason != "the session ended" || !contains(ids, tm.ID) {
			t.Fatalf("%+v", tm)
		}
	}
}
