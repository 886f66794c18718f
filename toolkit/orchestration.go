package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/timers"
)

// GroupOrchestration holds update_plan and the timer tools. Configuration
// turns it on; it belongs on by default for main sessions.
const GroupOrchestration Group = "orchestration"

// ModelStepMeta is the request _meta key through which a client names the
// model step a tool call belongs to (any string or number that is the same
// for every call of one step and differs between steps, e.g. a turn
// counter). It feeds planProgress's model_steps; without it only tool
// results are counted.
const ModelStepMeta = "scimcp/modelStep"

// ModelStep returns the model step a call's _meta names, or "".
func ModelStep(m *mcp.Meta) string {
	if m == nil {
		return ""
	}
	switch v := m.AdditionalFields[ModelStepMeta].(type) {
	case nil:
		return ""
	case string:
		return v
	case float64, int, int64, json.Number:
		return fmt.Sprint(v)
	}
	return ""
}

// Orchestration returns the orchestration tools over the services that are
// set: update_plan with plans, timer_create, timer_list and timer_cancel
// with timers.
func Orchestration(p *plans.Store, t *timers.Service) []Tool {
	var tools []Tool
	if p != nil {
		tools = append(tools, updatePlan(p))
	}
	if t != nil {
		tools = append(tools, timerCreate(t), timerList(t), timerCancel(t))
	}
	return tools
}

// OrchestrationHook returns what the MCP layer calls after every tool
// result, before notices are attached to it: it counts planProgress, and
// lets timers deliver reminders waiting for this session's owner, so they
// ride on this very result.
func OrchestrationHook(p *plans.Store, t *timers.Service) func(c Caller, tool string, meta *mcp.Meta) {
	return func(c Caller, tool string, meta *mcp.Meta) {
		if p != nil {
			p.ToolResult(c.Session, tool, ModelStep(meta))
		}
		if t != nil {
			t.SessionActive(c.Owner, c.Session)
		}
	}
}

// PlanItem is one step of a plan.
type PlanItem struct {
	Step   string `json:"step,omitempty" jsonschema:"the step, in a short sentence"`
	Status string `json:"status,omitempty" jsonschema:"pending, in_progress or completed"`
}

// UpdatePlanIn are update_plan's arguments.
type UpdatePlanIn struct {
	Plan        []PlanItem `json:"plan" jsonschema:"the complete plan in order, 0 to 20 items; an empty list clears it"`
	Explanation string     `json:"explanation,omitempty" jsonschema:"optional: why the plan changed"`
}

// PlanProgressView is planProgress as the tools report it.
type PlanProgressView struct {
	ToolResults int    `json:"tool_results" jsonschema:"completed tool results other than update_plan's since the update"`
	ModelSteps  *int   `json:"model_steps,omitempty" jsonschema:"model steps those results belonged to, when the client names steps"`
	Since       string `json:"since" jsonschema:"when counting started: the update, or the server's start if later"`
}

func progressView(p *plans.Progress) *PlanProgressView {
	if p == nil {
		return nil
	}
	return &PlanProgressView{ToolResults: p.ToolResults, ModelSteps: p.ModelSteps, Since: p.Since.Format(time.RFC3339Nano)}
}

// PlanView is a session's plan as update_plan and the plan resource show it.
type PlanView struct {
	Revision    uint64            `json:"revision" jsonschema:"committed updates of this session's plan so far; 0 if none"`
	Updated     string            `json:"updated,omitempty"`
	Plan        []PlanItem        `json:"plan"`
	Explanation string            `json:"explanation,omitempty"`
	Pending     int               `json:"pending"`
	InProgress  int               `json:"in_progress"`
	Completed   int               `json:"completed"`
	Progress    *PlanProgressView `json:"progress,omitempty" jsonschema:"planProgress: what followed the latest update"`
	ResourceURI string            `json:"resource_uri" jsonschema:"the plan as an MCP resource of this session"`
}

func planView(p plans.Plan) PlanView {
	v := PlanView{Revision: p.Revision, Plan: []PlanItem{}, Explanation: p.Explanation, Progress: progressView(p.Progress), ResourceURI: plans.URI(p.Session)}
	if !p.Updated.IsZero() {
		v.Updated = p.Updated.Format(time.RFC3339Nano)
	}
	for _, it := range p.Items {
		v.Plan = append(v.Plan, PlanItem{Step: it.Step, Status: string(it.Status)})
	}
	v.Pending, v.InProgress, v.Completed = p.Counts()
	return v
}

// UpdatePlanOut is update_plan's structured result.
type UpdatePlanOut struct {
	Status string `json:"status" jsonschema:"committed; or superseded: a later update_plan call that arrived together with this one was committed instead"`
	PlanView
	Batch                 int               `json:"batch" jsonschema:"update_plan calls that arrived together, this one included"`
	ProgressSincePrevious *PlanProgressView `json:"progress_since_previous_update,omitempty" jsonschema:"planProgress of the plan this update replaced"`
}

func updatePlan(p *plans.Store) Tool {
	t := Define(Spec{
		Name:  plans.ToolName,
		Title: "Update the plan",
		Description: "Replaces this session's plan with a complete snapshot: 0 to 20 items, each a step and its status (pending, in_progress or completed), with an optional explanation; an empty list clears it. " +
			"Every call sends the whole plan, so adding, removing, reordering and status changes are the same call. " +
			"Check the plan before substantive work; update it at semantic step boundaries, not after every tool call; mark steps completed as you finish them rather than in a late batch; revise it when evidence changes the approach; and close or explicitly revise unfinished items before your final answer. " +
			"It is a progress record, not a gate: nothing is blocked or enforced. " +
			"If several update_plan calls arrive together (one step declaring several), only the last is committed; the others succeed and say they were superseded. " +
			"The result reports the tool results and model steps that followed the previous update.",
		Group: GroupOrchestration,
	}, func(ctx context.Context, in UpdatePlanIn) (Result[UpdatePlanOut], error) {
		items := make([]plans.Item, len(in.Plan))
		for i, it := range in.Plan {
			items[i] = plans.Item{Step: it.Step, Status: plans.Status(it.Status)}
		}
		out, err := p.Update(CallerFrom(ctx).Session, items, in.Explanation)
		if err != nil {
			return Result[UpdatePlanOut]{}, err
		}
		res := UpdatePlanOut{Status: "committed", PlanView: planView(out.Plan), Batch: out.Batch, ProgressSincePrevious: progressView(out.Replaced)}
		var b strings.Builder
		switch {
		case !out.Committed:
			res.Status = "superseded"
			fmt.Fprintf(&b, "Superseded: %d update_plan calls arrived together and only the last was committed, as revision %d; this call's snapshot was not stored. Nothing to redo. The plan now:\n", out.Batch, out.Plan.Revision)
		case len(out.Plan.Items) == 0:
			fmt.Fprintf(&b, "Plan cleared (revision %d).\n", out.Plan.Revision)
		default:
			fmt.Fprintf(&b, "Plan updated (revision %d): %d completed, %d in progress, %d pending.\n", out.Plan.Revision, res.Completed, res.InProgress, res.Pending)
		}
		writePlan(&b, res.PlanView)
		if pr := res.ProgressSincePrevious; pr != nil {
			fmt.Fprintf(&b, "Since the previous update: %d tool result(s)", pr.ToolResults)
			if pr.ModelSteps != nil {
				fmt.Fprintf(&b, " over %d model step(s)", *pr.ModelSteps)
			}
			b.WriteString(".\n")
		}
		return Result[UpdatePlanOut]{Text: strings.TrimSuffix(b.String(), "\n"), Data: res}, nil
	})
	// Arguments are validated against the lenient schema inferred from
	// UpdatePlanIn, and the items by plans.Validate, so that an error names
	// the bad item by index and field (the schema validator's messages name
	// neither). The schema the model sees states the whole contract.
	t.Def.RawInputSchema = updatePlanSchema()
	return t
}

// updatePlanSchema is the input schema update_plan shows: the argument type's
// schema with the item contract spelled out.
func updatePlanSchema() json.RawMessage {
	s, err := jsonschema.For[UpdatePlanIn](nil)
	if err != nil {
		panic(err)
	}
	dropNull(s)
	plan := s.Properties["plan"]
	plan.MaxItems = ptr(plans.MaxItems)
	plan.Items.Required = []string{"step", "status"}
	plan.Items.Properties["step"].MinLength = ptr(1)
	plan.Items.Properties["step"].MaxLength = ptr(plans.MaxStepChars)
	plan.Items.Properties["status"].Enum = []any{string(plans.Pending), string(plans.InProgress), string(plans.Completed)}
	s.Properties["explanation"].MaxLength = ptr(plans.MaxExplanationChars)
	return mustMarshal(s)
}

func writePlan(b *strings.Builder, v PlanView) {
	for i, it := range v.Plan {
		fmt.Fprintf(b, "%d. [%s] %s\n", i+1, it.Status, it.Step)
	}
	if v.Explanation != "" {
		fmt.Fprintf(b, "Explanation: %s\n", v.Explanation)
	}
}

// PlanResourceTemplate is the per-session plan resource,
// scimcp://sessions/{session}/plan (application/json, a PlanView).
func PlanResourceTemplate() mcp.ResourceTemplate {
	return mcp.NewResourceTemplate(plans.URITemplate, "plan",
		mcp.WithTemplateTitle("Session plan"),
		mcp.WithTemplateDescription("This session's plan as update_plan last committed it, with planProgress (tool results and model steps since the latest update). Only a session's own plan can be read; notifications/resources/updated follows each committed update."),
		mcp.WithTemplateMIMEType("application/json"))
}

// ReadPlanResource answers resources/read of a plan URI for the calling
// session. Another session's plan is reported as not found.
func ReadPlanResource(p *plans.Store, session, uri string) ([]mcp.ResourceContents, error) {
	s, ok := plans.SessionOfURI(uri)
	if !ok || s != session {
		return nil, fmt.Errorf("resource not found: %s (a session can read only its own plan, %s)", uri, plans.URI(session))
	}
	pl, err := p.Get(session)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(planView(pl), "", "  ")
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(data)}}, nil
}

// TimerView is a timer as the tools report it.
type TimerView struct {
	TimerID        string `json:"timer_id"`
	State          string `json:"state" jsonschema:"pending, fired or cancelled"`
	Message        string `json:"message"`
	Due            string `json:"due" jsonschema:"when it fires at the latest (RFC 3339, UTC)"`
	Created        string `json:"created"`
	ExecutionID    string `json:"execution_id,omitempty"`
	ExecutionState string `json:"execution_state,omitempty" jsonschema:"the execution's state when the timer was created, or when it fired"`
	ExitCode       *int   `json:"exit_code,omitempty"`
	FiredAt        string `json:"fired_at,omitempty"`
	Trigger        string `json:"trigger,omitempty" jsonschema:"why it fired: deadline, or execution (the execution ended first)"`
	Late           bool   `json:"late,omitempty" jsonschema:"it came due while the server was not running and fired when the server started"`
	Delivery       string `json:"delivery,omitempty" jsonschema:"delivered; waiting (goes with this session's next tool call); suppressed (the session ended first); empty for the moment it is being handed over"`
	CancelledAt    string `json:"cancelled_at,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

func timerView(t timers.Timer) TimerView {
	v := TimerView{
		TimerID: t.ID, State: string(t.State), Message: t.Message, Due: t.Due.Format(time.RFC3339Nano), Created: t.Created.Format(time.RFC3339Nano),
		ExecutionID: t.ExecutionID, ExecutionState: t.ExecutionState, ExitCode: t.ExitCode, Trigger: string(t.Trigger), Late: t.Late,
		Delivery: string(t.Delivery), Reason: t.Reason,
	}
	if t.FiredAt != nil {
		v.FiredAt = t.FiredAt.Format(time.RFC3339Nano)
	}
	if t.CancelledAt != nil {
		v.CancelledAt = t.CancelledAt.Format(time.RFC3339Nano)
	}
	return v
}

// timerLine is one line about a timer.
func timerLine(t timers.Timer) string {
	msg := t.Message
	if r := []rune(msg); len(r) > 80 {
		msg = string(r[:77]) + "..."
	}
	s := fmt.Sprintf("%s %s", t.ID, t.State)
	switch t.State {
	case timers.Pending:
		s += fmt.Sprintf(", due %s (in %s)", t.Due.Format(time.RFC3339), time.Until(t.Due).Round(time.Second))
		if t.ExecutionID != "" {
			s += ", or when " + t.ExecutionID + " ends"
		}
	case timers.Fired:
		s += fmt.Sprintf(" at %s (%s", t.FiredAt.Format(time.RFC3339), t.Trigger)
		if t.Late {
			s += ", late"
		}
		s += fmt.Sprintf("; %s)", t.Delivery)
	case timers.Cancelled:
		s += fmt.Sprintf(" at %s (%s)", t.CancelledAt.Format(time.RFC3339), t.Reason)
	}
	return s + ": " + msg
}

// TimerCreateIn are timer_create's arguments.
type TimerCreateIn struct {
	AfterMS     *int64 `json:"after_ms,omitempty" jsonschema:"fire after this many milliseconds (at most 604800000 = 7 days); give this or at"`
	At          string `json:"at,omitempty" jsonschema:"fire at this RFC 3339 time, e.g. 2026-03-01T14:30:00Z, at most 7 days ahead; give this or after_ms"`
	Message     string `json:"message" jsonschema:"what the reminder tells you when it fires"`
	ExecutionID string `json:"execution_id,omitempty" jsonschema:"an execution of this session (from run_shell): fire as soon as it ends, or at the deadline, whichever comes first"`
}

func timerCreate(svc *timers.Service) Tool {
	return Define(Spec{
		Name:  "timer_create",
		Title: "Set a reminder",
		Description: fmt.Sprintf("Sets a one-time reminder for this session: after after_ms milliseconds or at an RFC 3339 time at (exactly one of them, at most 7 days ahead), with a message of at most %d characters that comes back to you when it fires. "+
			"With execution_id it fires as soon as that execution of this session ends, or at the deadline, whichever comes first, and says which and the execution's status. "+
			"The reminder arrives as a notification and is attached to your next tool result. At most %d pending timers per session; timer_list shows them and timer_cancel cancels one. Ending the session cancels its pending timers.",
			timers.MaxMessageChars, timers.MaxPending),
		Group: GroupOrchestration,
		Input: func(s *jsonschema.Schema) {
			// No maximum here: the validator would print it as 6.048e+08;
			// timers.Create refuses with the number written out.
			s.Properties["after_ms"].Minimum = ptr(0.0)
			s.Properties["message"].MinLength = ptr(1)
			s.Properties["message"].MaxLength = ptr(timers.MaxMessageChars)
		},
	}, func(ctx context.Context, in TimerCreateIn) (Result[TimerView], error) {
		c := CallerFrom(ctx)
		t, err := svc.Create(c.Owner, c.Session, timers.Spec{AfterMS: in.AfterMS, At: in.At, Message: in.Message, ExecutionID: in.ExecutionID})
		if err != nil {
			return Result[TimerView]{}, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Timer %s set: fires at %s (in %s)", t.ID, t.Due.Format(time.RFC3339), time.Until(t.Due).Round(time.Millisecond))
		if t.ExecutionID != "" {
			if terminal(t.ExecutionState) {
				fmt.Fprintf(&b, "; execution %s has already ended (%s), so it fires now", t.ExecutionID, t.ExecutionState)
			} else {
				fmt.Fprintf(&b, ", or as soon as execution %s (now %s) ends, whichever comes first", t.ExecutionID, t.ExecutionState)
			}
		}
		fmt.Fprintf(&b, ". The reminder arrives as a notification and with your next tool result; cancel it with timer_cancel {\"timer_id\":%q}.", t.ID)
		return Result[TimerView]{Text: b.String(), Data: timerView(t)}, nil
	})
}

// terminal reports whether an execution state never changes again.
func terminal(state string) bool {
	return state != "" && state != "queued" && state != "running"
}

// TimerListOut is timer_list's structured result.
type TimerListOut struct {
	Pending    []TimerView `json:"pending" jsonschema:"pending timers, soonest first"`
	Recent     []TimerView `json:"recent" jsonschema:"timers that fired or were cancelled in the last 24 hours, newest first (at most 50)"`
	MaxPending int         `json:"max_pending"`
}

func timerList(svc *timers.Service) Tool {
	return Define(Spec{
		Name:        "timer_list",
		Title:       "List reminders",
		Description: "Lists this session's pending timers (soonest first) and those that fired or were cancelled in the last 24 hours (newest first), with when and why they fired and whether the reminder was delivered.",
		Group:       GroupOrchestration,
		ReadOnly:    true,
		Idempotent:  true,
	}, func(ctx context.Context, _ struct{}) (Result[TimerListOut], error) {
		c := CallerFrom(ctx)
		// Hand over reminders waiting for this session first, so the list
		// shows them delivered (they are attached to this result).
		svc.SessionActive(c.Owner, c.Session)
		pending, recent, err := svc.List(c.Owner)
		if err != nil {
			return Result[TimerListOut]{}, err
		}
		out := TimerListOut{Pending: []TimerView{}, Recent: []TimerView{}, MaxPending: timers.MaxPending}
		var b strings.Builder
		fmt.Fprintf(&b, "%d pending timer(s) (at most %d):\n", len(pending), timers.MaxPending)
		for _, t := range pending {
			out.Pending = append(out.Pending, timerView(t))
			b.WriteString(timerLine(t) + "\n")
		}
		if len(recent) > 0 {
			fmt.Fprintf(&b, "Fired or cancelled in the last 24 hours (%d):\n", len(recent))
			for _, t := range recent {
				out.Recent = append(out.Recent, timerView(t))
				b.WriteString(timerLine(t) + "\n")
			}
		}
		return Result[TimerListOut]{Text: strings.TrimSuffix(b.String(), "\n"), Data: out}, nil
	})
}

// TimerCancelIn are timer_cancel's arguments.
type TimerCancelIn struct {
	TimerID string `json:"timer_id" jsonschema:"the timer, as timer_create or timer_list named it"`
}

// TimerCancelOut is timer_cancel's structured result.
type TimerCancelOut struct {
	TimerView
	AlreadyDone bool `json:"already_done" jsonschema:"true when the timer had already fired or been cancelled; nothing was changed"`
}

func timerCancel(svc *timers.Service) Tool {
	return Define(Spec{
		Name:        "timer_cancel",
		Title:       "Cancel a reminder",
		Description: "Cancels a pending timer of this session so it never fires. Idempotent: cancelling a timer that already fired or was cancelled changes nothing and says so.",
		Group:       GroupOrchestration,
		Destructive: true,
		Idempotent:  true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["timer_id"].Pattern = `^timer_[0-9a-f]{16}$`
		},
	}, func(ctx context.Context, in TimerCancelIn) (Result[TimerCancelOut], error) {
		t, changed, err := svc.Cancel(CallerFrom(ctx).Owner, in.TimerID)
		if err != nil {
			return Result[TimerCancelOut]{}, err
		}
		text := fmt.Sprintf("Timer %s cancelled; it will not fire.", t.ID)
		if !changed {
			text = "Nothing to cancel: " + timerLine(t)
		}
		return Result[TimerCancelOut]{Text: text, Data: TimerCancelOut{TimerView: timerView(t), AlreadyDone: !changed}}, nil
	})
}
