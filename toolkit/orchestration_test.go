package toolkit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/store"
	"github.com/sciencediscovery/scimcp/workspace/timers"
)

func orchestrationTools(t *testing.T) []Tool {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := plans.New(db, plans.Config{Window: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := timers.New(timers.Config{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tm.Close)
	return Orchestration(p, tm)
}

func callTool(t *testing.T, tools []Tool, name, args string) *mcp.CallToolResult {
	t.Helper()
	for _, tool := range tools {
		if tool.Name() == name {
			req := mcp.CallToolRequest{}
			req.Params.Name = name
			req.Params.Arguments = json.RawMessage(args)
			ctx := WithCaller(context.Background(), Caller{Session: "s1", Owner: "s1"})
			res, err := tool.Handler(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The update_plan schema shown to the model is strict, but the errors come
// from plans.Validate and name the bad item by index and field.
func TestUpdatePlanErrorsNameTheItem(t *testing.T) {
	tools := orchestrationTools(t)
	many := make([]string, plans.MaxItems+1)
	for i := range many {
		many[i] = `{"step":"s","status":"pending"}`
	}
	cases := []struct{ args, want string }{
		{`{"plan":[{"step":"a","status":"pending"},{"step":"b","status":"done"}]}`, `plan[1] ("b").status "done" is not one of pending, in_progress, completed`},
		{`{"plan":[{"step":"","status":"pending"}]}`, `plan[0].step is empty`},
		{`{"plan":[{"step":"a"}]}`, `plan[0] ("a").status is missing`},
		{`{"plan":[` + strings.Join(many, ",") + `]}`, `the plan has 21 items; at most 20`},
		{`{}`, `missing required argument(s) "plan"`},
	}
	for _, c := range cases {
		res := callTool(t, tools, "update_plan", c.args)
		if !res.IsError || !strings.Contains(resultText(res), c.want) {
			t.Errorf("%s: got %q, want an error containing %q", c.args, resultText(res), c.want)
		}
	}
	res := callTool(t, tools, "update_plan", `{"plan":[{"step":"a","status":"in_progress"}],"explanation":"start"}`)
	if res.IsError || !strings.Contains(resultText(res), "Plan updated (revision 1): 0 completed, 1 in progress, 0 pending.\n1. [in_progress] a") {
		t.Fatalf("update: %s", resultText(res))
	}
	res = callTool(t, tools, "update_plan", `{"plan":[]}`)
	if res.IsError || !strings.HasPrefix(resultText(res), "Plan cleared (revision 2).") {
		t.Fatalf("clear: %s", resultText(res))
	}
}

func TestTimerToolErrors(t *testing.T) {
	tools := orchestrationTools(t)
	cases := []struct{ tool, args, want string }{
		{"timer_create", `{"after_ms":-1,"message":"m"}`, "after_ms must be at least 0, got -1"},
		{"timer_create", `{"after_ms":604800001,"message":"m"}`, "after_ms 604800001 is beyond the maximum delay of 7 days (604800000 ms)"},
		{"timer_create", `{"message":"m"}`, "give one of after_ms"},
		{"timer_create", `{"after_ms":10,"at":"2030-01-01T00:00:00Z","message":"m"}`, "exactly one of after_ms"},
		{"timer_create", `{"at":"2001-01-01T00:00:00Z","message":"m"}`, "is in the past"},
		{"timer_create", `{"after_ms":10,"message":""}`, "message must not be empty"},
		{"timer_create", `{"after_ms":10,"message":"` + strings.Repeat("x", timers.MaxMessageChars+1) + `"}`, "message must be at most 2000 characters long"},
		{"timer_create", `{"after_ms":10,"message":"m","execution_id":"exec_0123456789abcdef"}`, "execution_id cannot be used"},
		{"timer_cancel", `{"timer_id":"timer_0123456789abcdef"}`, "no timer timer_0123456789abcdef in this session"},
		{"timer_cancel", `{"timer_id":"nope"}`, "does not have the expected form"},
	}
	for _, c := range cases {
		res := callTool(t, tools, c.tool, c.args)
		if !res.IsError || !strings.Contains(resultText(res), c.want) {
			t.Errorf("%s %s: got %q, want an error containing %q", c.tool, c.args, resultText(res), c.want)
		}
	}
}

func TestModelStep(t *testing.T) {
	cases := []struct {
		meta *mcp.Meta
		want string
	}{
		{nil, ""},
		{&mcp.Meta{}, ""},
		{&mcp.Meta{AdditionalFields: map[string]any{ModelStepMeta: "turn-3"}}, "turn-3"},
		{&mcp.Meta{AdditionalFields: map[string]any{ModelStepMeta: float64(7)}}, "7"},
		{&mcp.Meta{AdditionalFields: map[string]any{ModelStepMeta: map[string]any{}}}, ""},
	}
	for _, c := range cases {
		if got := ModelStep(c.meta); got != c.want {
			t.Errorf("%+v: %q, want %q", c.meta, got, c.want)
		}
	}
}
