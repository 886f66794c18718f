// Package plans keeps each session's plan: the complete snapshot that
// update_plan last committed, the ordered plan.updated events that led to
// it, and planProgress telemetry.
//
// A plan is a lightweight progress record, not an approval gate: its shape
// is validated (at most MaxItems items, each a non-empty step and a known
// status) and nothing else is enforced. Nothing here forces another model
// turn, infers completion from tool output or blocks an answer while items
// remain open.
//
// # Calls that arrive together
//
// When one model step declares several update_plan calls, a client sends
// them at (nearly) the same time, over stdio through a worker pool and over
// HTTP as separate POSTs. Only the last declared is committed; the earlier
// ones complete successfully and say they were superseded. "Together" is
// defined by time, per session: a call that finds no open batch opens one;
// every call of that session that arrives while the batch is open joins it;
// the batch closes once Window has passed without a new arrival (at most
// MaxWait after it opened). Then the call that arrived last is committed,
// and every call of the batch returns. Calls sent one after another (the
// client waits for each result) each form their own batch and are all
// committed in order, which leaves the same final plan.
//
// "Last" is the order in which calls reach this package, not the JSON-RPC
// request id: ids may be strings, are chosen by the client, and are not
// ordered across HTTP connections; arrival is the one order every transport
// shares. Over stdio, mcp-go hands calls to a worker pool, so two calls
// written microseconds apart can reach us in either order; a client that
// needs a strict order sends its calls one at a time.
//
// # Events
//
// Each committed snapshot is stored in bbolt as a plan.updated event of its
// session (bucket "plans", one nested bucket per session, keys are the
// 1-based revision in big-endian order), so the latest plan and its
// history survive a restart. Sessions never share a plan: main sessions and
// subagents each have their own.
//
// # planProgress
//
// After each committed update the store counts, per session, the completed
// tool results other than update_plan's (ToolResult, which the MCP layer
// calls after every tool result) and the distinct model steps those results
// belonged to when the client names them. The counts are returned with the
// next update (as the progress of the plan it replaces) and with Get. They
// are kept in memory: after a restart, counting starts again at the
// restart, which Progress.Since says.
package plans

import (
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Limits and defaults. MaxItems is the seed's; the text caps only keep one
// snapshot small.
const (
	MaxItems            = 20
	MaxStepChars        = 1000
	MaxExplanationChars = 4000
	// DefaultWindow is how long a batch of update_plan calls stays open
	// after its latest arrival; DefaultMaxWait bounds a batch's life, so a
	// steady stream of calls still commits.
	DefaultWindow  = 50 * time.Millisecond
	DefaultMaxWait = 500 * time.Millisecond

	// ToolName is the plan tool; its own results are not counted as
	// progress.
	ToolName = "update_plan"
	// EventPlanUpdated is the type of a committed snapshot's event.
	EventPlanUpdated = "plan.updated"
	// URIPrefix starts the URI of a session's plan resource:
	// scimcp://sessions/<session>/plan.
	URIPrefix = "scimcp://sessions/"
	// URITemplate is the RFC 6570 template of the plan resource.
	URITemplate = "scimcp://sessions/{session}/plan"

	// maxTrackedSteps bounds the distinct model steps remembered since one
	// update; the count saturates there.
	maxTrackedSteps = 10_000
)

var bucket = []byte("plans")

// Status is a plan item's status.
type Status string

const (
	Pending    Status = "pending"
	InProgress Status = "in_progress"
	Completed  Status = "completed"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool { return s == Pending || s == InProgress || s == Completed }

// Item is one step of a plan.
type Item struct {
	Step   string `json:"step"`
	Status Status `json:"status"`
}

// Event is one committed snapshot in a session's event stream.
type Event struct {
	Type        string    `json:"type"` // EventPlanUpdated
	Session     string    `json:"session"`
	Revision    uint64    `json:"revision"` // 1, 2, ... per session
	Time        time.Time `json:"time"`
	Items       []Item    `json:"items"`
	Explanation string    `json:"explanation,omitempty"`
	// Superseded counts the calls of the same batch that this one
	// superseded.
	Superseded int `json:"superseded,omitempty"`
}

// Progress is planProgress: what followed the latest update.
type Progress struct {
	// ToolResults counts completed tool results other than update_plan's.
	ToolResults int `json:"tool_results"`
	// ModelSteps counts the distinct model steps those results belonged
	// to, not counting a step that itself called update_plan; nil when the
	// client named no step.
	ModelSteps *int `json:"model_steps,omitempty"`
	// Since is when counting started: the update, or this server's start
	// if the update is older.
	Since time.Time `json:"since"`
}

// Plan is a session's current plan.
type Plan struct {
	Session string `json:"session"`
	// Revision is the number of committed updates; 0 means the session
	// never had a plan.
	Revision    uint64    `json:"revision"`
	Updated     time.Time `json:"updated,omitzero"`
	Items       []Item    `json:"items"`
	Explanation string    `json:"explanation,omitempty"`
	// Progress is nil when the session never had a plan.
	Progress *Progress `json:"progress,omitempty"`
}

// Counts returns how many items have each status.
func (p Plan) Counts() (pending, inProgress, completed int) {
	for _, it := range p.Items {
		switch it.Status {
		case Pending:
			pending++
		case InProgress:
			inProgress++
		case Completed:
			completed++
		}
	}
	return
}

// Outcome is what one update_plan call did.
type Outcome struct {
	// Committed is false when a later call of the same batch was committed
	// instead.
	Committed bool
	// Plan is the plan as the batch committed it (the last arrival's).
	Plan Plan
	// Batch is how many calls arrived together, this one included.
	Batch int
	// Replaced is the progress of the plan this batch replaced, at the
	// moment of the update; nil if there was none.
	Replaced *Progress
}

// Error is a refusal the caller can act on.
type Error struct{ Msg string }

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

// Config configures a Store. Zero values take the defaults.
type Config struct {
	Window  time.Duration
	MaxWait time.Duration
	// OnChange, when set, is called after each committed update of a
	// session (the plan resource changed). It runs on the committing
	// call's goroutine and must not block for long.
	OnChange func(session string)
}

// Store holds the plans of one data folder.
type Store struct {
	db      *store.Store
	cfg     Config
	started time.Time

	mu      sync.Mutex
	batches map[string]*batch // by session: the open batch
	tallies map[string]*tally // by session: progress since the latest update
}

// batch is a set of update_plan calls of one session that arrived together.
type batch struct {
	opened, last time.Time
	n            int // calls so far; the n-th is the latest arrival
	items        []Item
	explanation  string

	// Set before done is closed.
	done     chan struct{}
	plan     Plan
	replaced *Progress
	err      error
}

type tally struct {
	revision    uint64 // 0: the session has no plan
	since       time.Time
	results     int
	steps       map[string]bool // model steps of counted results
	updateSteps map[string]bool // steps that carried an update_plan result
	// namesSteps is set once the client named a model step on any call of
	// the session; from then on ModelSteps is reported (0 included).
	namesSteps bool
}

// reset starts counting anew after the update with the given revision.
func (t *tally) reset(revision uint64, since time.Time) {
	*t = tally{revision: revision, since: since, namesSteps: t.namesSteps}
}

// New opens the plans of a data folder.
func New(db *store.Store, cfg Config) (*Store, error) {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.MaxWait < cfg.Window {
		cfg.MaxWait = cfg.Window
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return nil, err
	}
	return &Store{db: db, cfg: cfg, started: time.Now().UTC(), batches: map[string]*batch{}, tallies: map[string]*tally{}}, nil
}

// URI returns the URI of a session's plan resource.
func URI(session string) string { return URIPrefix + url.PathEscape(session) + "/plan" }

// SessionOfURI returns the session a plan resource URI names.
func SessionOfURI(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", false
	}
	esc, ok := strings.CutSuffix(rest, "/plan")
	if !ok || esc == "" || strings.Contains(esc, "/") {
		return "", false
	}
	s, err := url.PathUnescape(esc)
	return s, err == nil && s != ""
}

// Validate checks a snapshot's shape and names every bad item (its index,
// its field, and the start of its step) in one message.
func Validate(items []Item, explanation string) error {
	if len(items) > MaxItems {
		return &Error{Msg: fmt.Sprintf("the plan has %d items; at most %d are allowed. Merge related steps or drop finished ones, and send the whole plan again", len(items), MaxItems)}
	}
	var problems []string
	for i, it := range items {
		name := fmt.Sprintf("plan[%d]", i)
		if s := strings.TrimSpace(it.Step); s != "" {
			name += fmt.Sprintf(" (%q)", clip(s, 40))
		}
		switch n := utf8.RuneCountInString(it.Step); {
		case strings.TrimSpace(it.Step) == "":
			problems = append(problems, name+".step is empty; give the step's text")
		case n > MaxStepChars:
			problems = append(problems, fmt.Sprintf("%s.step has %d characters; at most %d", name, n, MaxStepChars))
		}
		switch {
		case it.Status == "":
			problems = append(problems, name+".status is missing; use pending, in_progress or completed")
		case !it.Status.Valid():
			problems = append(problems, fmt.Sprintf("%s.status %q is not one of pending, in_progress, completed", name, string(it.Status)))
		}
	}
	if n := utf8.RuneCountInString(explanation); n > MaxExplanationChars {
		problems = append(problems, fmt.Sprintf("explanation has %d characters; at most %d", n, MaxExplanationChars))
	}
	if len(problems) == 0 {
		return nil
	}
	const show = 5
	msg := "the plan was not updated: " + strings.Join(problems[:min(show, len(problems))], "; ")
	if len(problems) > show {
		msg += fmt.Sprintf("; and %d more problem(s)", len(problems)-show)
	}
	return &Error{Msg: msg + ". Fix them and send the whole plan again"}
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Update replaces a session's plan with a complete snapshot; an empty list
// clears it. It returns once the batch the call joined is settled (at least
// Window after the call), committed or superseded; see the package
// documentation.
func (s *Store) Update(session string, items []Item, explanation string) (Outcome, error) {
	if err := Validate(items, explanation); err != nil {
		return Outcome{}, err
	}
	snapshot := make([]Item, len(items))
	for i, it := range items {
		snapshot[i] = Item{Step: strings.TrimSpace(it.Step), Status: it.Status}
	}
	now := time.Now()
	s.mu.Lock()
	b := s.batches[session]
	leader := b == nil
	if leader {
		b = &batch{opened: now, done: make(chan struct{})}
		s.batches[session] = b
	}
	b.n++
	me := b.n
	b.last, b.items, b.explanation = now, snapshot, explanation
	s.mu.Unlock()

	if leader {
		s.settle(session, b)
	}
	<-b.done
	if b.err != nil {
		return Outcome{}, b.err
	}
	// b.n is final: the batch left s.batches before done was closed.
	out := Outcome{Committed: me == b.n, Plan: b.plan, Batch: b.n}
	if out.Committed {
		out.Replaced = b.replaced
	}
	return out, nil
}

// settle runs on the batch's first call: it waits until the batch closes,
// then commits the last arrival.
func (s *Store) settle(session string, b *batch) {
	for {
		s.mu.Lock()
		due := b.last.Add(s.cfg.Window)
		if limit := b.opened.Add(s.cfg.MaxWait); limit.Before(due) {
			due = limit
		}
		now := time.Now()
		if !now.Before(due) {
			delete(s.batches, session) // later calls open a new batch
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		time.Sleep(due.Sub(now))
	}
	ev := Event{
		Type: EventPlanUpdated, Session: session, Time: time.Now().UTC(),
		Items: b.items, Explanation: b.explanation, Superseded: b.n - 1,
	}
	var prev Event // the plan this update replaces, if any
	err := s.db.Update(func(tx *bolt.Tx) error {
		sb, err := tx.Bucket(bucket).CreateBucketIfNotExists([]byte(session))
		if err != nil {
			return err
		}
		if k, _ := sb.Cursor().Last(); k != nil {
			if _, err := store.GetJSON(sb, k, &prev); err != nil {
				return err
			}
		}
		seq, err := sb.NextSequence()
		if err != nil {
			return err
		}
		ev.Revision = seq
		return store.PutJSON(sb, revKey(seq), ev)
	})
	if err != nil {
		b.err = fmt.Errorf("record plan.updated: %w", err)
		close(b.done)
		return
	}
	s.mu.Lock()
	t := s.tallyLocked(session)
	if prev.Revision > t.revision {
		// Not counted here yet (a session resumed after a restart).
		t.reset(prev.Revision, s.sinceOf(prev.Time))
	}
	if t.revision > 0 {
		p := t.progress()
		b.replaced = &p
	}
	t.reset(ev.Revision, ev.Time)
	p := t.progress()
	s.mu.Unlock()
	b.plan = planOf(ev)
	b.plan.Progress = &p
	close(b.done)
	if s.cfg.OnChange != nil {
		s.cfg.OnChange(session)
	}
}

func revKey(rev uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], rev)
	return k[:]
}

func planOf(ev Event) Plan {
	items := ev.Items
	if items == nil {
		items = []Item{}
	}
	return Plan{Session: ev.Session, Revision: ev.Revision, Updated: ev.Time, Items: items, Explanation: ev.Explanation}
}

// Get returns a session's current plan with its progress; a session that
// never had a plan gets revision 0 and no items.
func (s *Store) Get(session string) (Plan, error) {
	ev, ok, err := s.latest(session)
	if err != nil {
		return Plan{}, err
	}
	if !ok {
		return Plan{Session: session, Items: []Item{}}, nil
	}
	p := planOf(ev)
	s.mu.Lock()
	t := s.tallyLocked(session)
	if t.revision < ev.Revision {
		// Not counted here yet: a restart, or a commit whose tally update
		// is still on its way.
		t.reset(ev.Revision, s.sinceOf(ev.Time))
	}
	prog := t.progress()
	s.mu.Unlock()
	p.Progress = &prog
	return p, nil
}

// Events returns a session's plan.updated events, oldest first.
func (s *Store) Events(session string) ([]Event, error) {
	var out []Event
	err := s.db.View(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucket).Bucket([]byte(session))
		if sb == nil {
			return nil
		}
		return sb.ForEach(func(k, v []byte) error {
			var ev Event
			if _, err := store.GetJSON(sb, k, &ev); err != nil {
				return err
			}
			out = append(out, ev)
			return nil
		})
	})
	return out, err
}

func (s *Store) latest(session string) (Event, bool, error) {
	var ev Event
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		sb := tx.Bucket(bucket).Bucket([]byte(session))
		if sb == nil {
			return nil
		}
		k, _ := sb.Cursor().Last()
		if k == nil {
			return nil
		}
		var err error
		ok, err = store.GetJSON(sb, k, &ev)
		return err
	})
	return ev, ok, err
}

// ToolResult is the planProgress hook: the MCP layer calls it after every
// completed tool result of a session, with the tool's name and the model
// step the client named for the call ("" if none). It never blocks on the
// database after a session's first call.
func (s *Store) ToolResult(session, tool, step string) {
	s.mu.Lock()
	t, ok := s.tallies[session]
	s.mu.Unlock()
	if !ok {
		// First result of this session here: learn whether it has a plan
		// (an HTTP session resumed after a restart may).
		ev, found, err := s.latest(session)
		s.mu.Lock()
		t = s.tallyLocked(session)
		if err == nil && found && t.revision < ev.Revision {
			t.reset(ev.Revision, s.sinceOf(ev.Time))
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if step != "" {
		t.namesSteps = true
	}
	if t.revision == 0 {
		return
	}
	if tool == ToolName {
		if step != "" {
			if t.updateSteps == nil {
				t.updateSteps = map[string]bool{}
			}
			t.updateSteps[step] = true
		}
		return
	}
	t.results++
	if step != "" {
		if t.steps == nil {
			t.steps = map[string]bool{}
		}
		if len(t.steps) < maxTrackedSteps {
			t.steps[step] = true
		}
	}
}

// Forget drops what the store keeps in memory about a session (its
// progress counts); call it when the session ends. The plan and its events
// stay in the database.
func (s *Store) Forget(session string) {
	s.mu.Lock()
	delete(s.tallies, session)
	s.mu.Unlock()
}

// tallyLocked returns the session's tally, creating an empty one (no
// plan). s.mu must be held; a tally created here has revision 0 and is
// filled in by the caller when the database says otherwise.
func (s *Store) tallyLocked(session string) *tally {
	t, ok := s.tallies[session]
	if !ok {
		t = &tally{}
		s.tallies[session] = t
	}
	return t
}

// sinceOf is when counting can have started for an update made at t: this
// server counts nothing from before its start.
func (s *Store) sinceOf(t time.Time) time.Time {
	if t.Before(s.started) {
		return s.started
	}
	return t
}

func (t *tally) progress() Progress {
	p := Progress{ToolResults: t.results, Since: t.since}
	if t.namesSteps {
		n := 0
		for st := range t.steps {
			if !t.updateSteps[st] {
				n++
			}
		}
		p.ModelSteps = &n
	}
	return p
}
