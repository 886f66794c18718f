// Package timers keeps one-time reminders that wake the session that set
// them: after a delay, at a time, or when an execution ends (whichever of
// that and the deadline comes first).
//
// # States
//
//	pending ──(deadline, or the execution ends)──▶ fired ──▶ delivered
//	   │                                             └──▶ waiting ──▶ delivered
//	   │                                                      └──▶ suppressed
//	   └──(timer_cancel, or the session ends)──▶ cancelled
//
// A timer fires at most once, also across a restart: the transition from
// pending to fired is one bbolt transaction that first checks the timer is
// still pending, and it is committed before the reminder is handed to the
// session. A timer whose time passed while the server was down fires once
// on Start, marked late; one tied to an execution fires on Start as well,
// because executions do not outlive the server (they are marked lost).
//
// # Delivery
//
// A fired reminder goes through the injected Deliver func (in scimcp:
// mcpserver.Server.Deliver, a notifications/message now and the same text
// attached to the session's next tool result). It is offered first to the
// session that set it, then to any other session of the same owner that
// has been active in this process and has not ended. A stdio server keeps
// the owner "stdio" across restarts, so a reminder set before a crash
// reaches the next stdio session; an HTTP session's owner is its own id,
// which the client keeps across a restart. When no such session is live
// the reminder waits, recorded as fired and undelivered, and is delivered
// on the owner's next tool call (SessionActive). A crash between firing and
// recording the delivery can show the reminder once more after a restart;
// it is never lost.
//
// # Session end
//
// When a session ends (SessionEnded: stdio closes, HTTP DELETE, idle TTL)
// its pending timers are cancelled with reason "the session ended", and
// reminders of it still waiting for delivery are suppressed: a stopped
// session is not woken. Both stay on record. A session that vanished
// without ending (the server crashed) keeps its timers; the owner's next
// session in a later run adopts them.
package timers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Bounds.
const (
	// MaxDelay is how far ahead a timer may be set.
	MaxDelay = 7 * 24 * time.Hour
	// MaxPending is how many pending timers one owner (session) may have.
	MaxPending = 50
	// MaxMessageChars bounds a reminder's message, in characters.
	MaxMessageChars = 2000
	// RecentWindow is how long List keeps showing a fired or cancelled
	// timer; at most MaxRecentListed of them are shown, newest first.
	RecentWindow    = 24 * time.Hour
	MaxRecentListed = 50
	// RetainFor is how long fired and cancelled timers are kept on record;
	// older ones are removed when the service opens.
	RetainFor = 30 * 24 * time.Hour

	// pollEvery is how often a timer re-checks an execution it cannot wait
	// on directly.
	pollEvery = time.Second
)

// bucket holds one nested bucket per owner, keyed by timer id.
var bucket = []byte("timers")

var idPattern = regexp.MustCompile(`^timer_[0-9a-f]{16}$`)

// State is a timer's state.
type State string

const (
	Pending   State = "pending"
	Fired     State = "fired"
	Cancelled State = "cancelled"
)

// Trigger says why a timer fired.
type Trigger string

const (
	Deadline       Trigger = "deadline"  // its time came
	ExecutionEnded Trigger = "execution" // its execution reached a terminal state first
)

// Delivery is what became of a fired timer's reminder.
type Delivery string

const (
	// The empty Delivery of a fired timer is the moment between firing and
	// handing the reminder over.
	Delivered  Delivery = "delivered"  // handed to a live session
	Waiting    Delivery = "waiting"    // no live session yet; goes with the owner's next tool call
	Suppressed Delivery = "suppressed" // its session ended first
)

// Timer is the record of one timer.
type Timer struct {
	ID          string    `json:"id"`
	Owner       string    `json:"owner"`
	Session     string    `json:"session"` // the session that set it (or adopted it)
	Message     string    `json:"message"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Created     time.Time `json:"created"`
	Due         time.Time `json:"due"`
	State       State     `json:"state"`
	// ExecutionState is the execution's state when the timer last looked
	// at it: on creation, then when it fired.
	ExecutionState  string `json:"execution_state,omitempty"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	ExecutionReason string `json:"execution_reason,omitempty"`

	FiredAt     *time.Time `json:"fired_at,omitempty"`
	Trigger     Trigger    `json:"trigger,omitempty"`
	Late        bool       `json:"late,omitempty"` // fired on start: its moment passed while the server was down
	Delivery    Delivery   `json:"delivery,omitempty"`
	DeliveredTo string     `json:"delivered_to,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`

	CancelledAt *time.Time `json:"cancelled_at,omitempty"`
	Reason      string     `json:"reason,omitempty"` // why it was cancelled or its delivery suppressed
}

// ended is when a fired or cancelled timer stopped being pending.
func (t Timer) ended() time.Time {
	switch {
	case t.FiredAt != nil:
		return *t.FiredAt
	case t.CancelledAt != nil:
		return *t.CancelledAt
	}
	return t.Created
}

// Spec asks for a timer: exactly one of AfterMS and At.
type Spec struct {
	AfterMS     *int64
	At          string // RFC 3339
	Message     string
	ExecutionID string
}

// Executions is what timers need of runner.Executions.
type Executions interface {
	Get(owner, id string) (runner.Execution, error)
	// Done returns a channel closed when the execution ends, nil if it is
	// not running here.
	Done(id string) <-chan struct{}
}

var _ Executions = (*runner.Executions)(nil)

// Config configures a Service.
type Config struct {
	Store *store.Store
	// Executions, when set, lets timers wait for an execution.
	Executions Executions
	// Deliver hands a fired reminder to a live session and reports whether
	// the session was live. It must not block for long.
	Deliver func(session, text string, data map[string]any) bool
	Log     hclog.Logger
}

// Error is a refusal the caller can act on.
type Error struct{ Msg string }

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

func refusef(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Service keeps the timers of one data folder.
type Service struct {
	cfg       Config
	startedAt time.Time

	mu       sync.Mutex
	started  bool
	closed   bool
	byOwner  map[string]map[string]*entry // pending timers
	reserved map[string]int               // creations under way, by owner
	waiting  map[string]map[string]string // owner → fired-undelivered timer id → its session
	active   map[string]map[string]bool   // owner → sessions active here, not ended
	ended    map[string]bool              // sessions that ended in this process
	closing  chan struct{}
	wg       sync.WaitGroup
}

// entry is a pending timer in memory.
type entry struct {
	id, owner, session, execID string
	due                        time.Time
	loaded                     bool // pending when the service opened
	stop                       chan struct{}
}

// New opens the timers of a data folder: it removes records older than
// RetainFor and loads the pending ones. Nothing fires before Start.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("timers: no store")
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	s := &Service{
		cfg: cfg, startedAt: time.Now().UTC(),
		byOwner: map[string]map[string]*entry{}, reserved: map[string]int{},
		waiting: map[string]map[string]string{}, active: map[string]map[string]bool{},
		ended: map[string]bool{}, closing: make(chan struct{}),
	}
	cutoff := s.startedAt.Add(-RetainFor)
	pruned := 0
	err := cfg.Store.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return root.ForEachBucket(func(owner []byte) error {
			b := root.Bucket(owner)
			var old [][]byte
			err := b.ForEach(func(k, v []byte) error {
				var t Timer
				if _, err := store.GetJSON(b, k, &t); err != nil {
					return fmt.Errorf("timer %s: %w", k, err)
				}
				switch {
				case t.State == Pending:
					s.add(&entry{id: t.ID, owner: t.Owner, session: t.Session, execID: t.ExecutionID, due: t.Due, loaded: true, stop: make(chan struct{})})
				case t.ended().Before(cutoff):
					old = append(old, append([]byte(nil), k...))
				case t.State == Fired && (t.Delivery == Waiting || t.Delivery == ""):
					s.addWaiting(t)
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, k := range old {
				if err := b.Delete(k); err != nil {
					return err
				}
				pruned++
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("open timers: %w", err)
	}
	if pruned > 0 {
		cfg.Log.Debug("removed old timers", "count", pruned)
	}
	return s, nil
}

// add and addWaiting index a timer in memory; s.mu must be held (or the
// service not yet shared).
func (s *Service) add(e *entry) {
	if s.byOwner[e.owner] == nil {
		s.byOwner[e.owner] = map[string]*entry{}
	}
	s.byOwner[e.owner][e.id] = e
}

func (s *Service) addWaiting(t Timer) {
	if s.waiting[t.Owner] == nil {
		s.waiting[t.Owner] = map[string]string{}
	}
	s.waiting[t.Owner][t.ID] = t.Session
}

// remove drops a pending timer from memory and reports whether it was
// there (the caller that removes it owns closing its stop channel).
func (s *Service) remove(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byOwner[e.owner][e.id] != e {
		return false
	}
	delete(s.byOwner[e.owner], e.id)
	if len(s.byOwner[e.owner]) == 0 {
		delete(s.byOwner, e.owner)
	}
	return true
}

// Start begins watching the pending timers; those whose moment passed while
// the server was down fire now, marked late. Call it once the delivery path
// is ready. Later calls do nothing.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	for _, es := range s.byOwner {
		for _, e := range es {
			s.wg.Add(1)
			go s.watch(e)
		}
	}
}

// Close stops watching (nothing fires after it returns); pending timers
// stay pending on record.
func (s *Service) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.wg.Wait()
}

func newID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "timer_" + hex.EncodeToString(b[:])
}

// due validates a spec's timing and returns when the timer is due.
func due(spec Spec, now time.Time) (time.Time, error) {
	maxMS := MaxDelay.Milliseconds()
	switch {
	case spec.AfterMS != nil && spec.At != "":
		return time.Time{}, refusef("give exactly one of after_ms (a delay in milliseconds) or at (an RFC 3339 time), not both")
	case spec.AfterMS == nil && spec.At == "":
		return time.Time{}, refusef("give one of after_ms (a delay in milliseconds, at most %d = 7 days) or at (an RFC 3339 time such as %s)", maxMS, now.Add(time.Hour).Truncate(time.Second).Format(time.RFC3339))
	case spec.AfterMS != nil && *spec.AfterMS < 0:
		return time.Time{}, refusef("after_ms is negative (%d); give a delay from 0 to %d ms (7 days)", *spec.AfterMS, maxMS)
	case spec.AfterMS != nil && *spec.AfterMS > maxMS:
		return time.Time{}, refusef("after_ms %d is beyond the maximum delay of 7 days (%d ms)", *spec.AfterMS, maxMS)
	case spec.AfterMS != nil:
		return now.Add(time.Duration(*spec.AfterMS) * time.Millisecond), nil
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(spec.At))
	if err != nil {
		return time.Time{}, refusef("at %q is not an RFC 3339 time; write it like %s", spec.At, now.Add(time.Hour).Truncate(time.Second).Format(time.RFC3339))
	}
	at = at.UTC()
	if !at.After(now) {
		return time.Time{}, refusef("at %s is in the past (the server's time is %s); give a later time, or a delay with after_ms", at.Format(time.RFC3339), now.Truncate(time.Second).Format(time.RFC3339))
	}
	if at.After(now.Add(MaxDelay)) {
		return time.Time{}, refusef("at %s is more than 7 days ahead; the latest allowed now is %s", at.Format(time.RFC3339), now.Add(MaxDelay).Truncate(time.Second).Format(time.RFC3339))
	}
	return at, nil
}

// Create sets a timer for owner's session. With an execution id it fires
// when the execution ends or at the deadline, whichever comes first; if the
// execution has already ended, it fires at once.
func (s *Service) Create(owner, session string, spec Spec) (Timer, error) {
	msg := strings.TrimSpace(spec.Message)
	if msg == "" {
		return Timer{}, refusef("message is empty; say what the reminder should tell you when it fires")
	}
	if n := utf8.RuneCountInString(spec.Message); n > MaxMessageChars {
		return Timer{}, refusef("message has %d characters; at most %d. Keep the reminder short and put details in a workspace file it names", n, MaxMessageChars)
	}
	now := time.Now().UTC()
	when, err := due(spec, now)
	if err != nil {
		return Timer{}, err
	}
	t := Timer{ID: newID(), Owner: owner, Session: session, Message: msg, ExecutionID: spec.ExecutionID, Created: now, Due: when, State: Pending}
	if spec.ExecutionID != "" {
		if s.cfg.Executions == nil {
			return Timer{}, refusef("execution_id cannot be used: this server runs no executions")
		}
		rec, err := s.cfg.Executions.Get(owner, spec.ExecutionID)
		var ip interface{ InputProblem() bool }
		if errors.As(err, &ip) && ip.InputProblem() {
			return Timer{}, refusef("execution_id: %v", err)
		}
		if err != nil {
			return Timer{}, fmt.Errorf("look up execution %s: %w", spec.ExecutionID, err)
		}
		t.ExecutionState, t.ExitCode = string(rec.State), rec.ExitCode
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Timer{}, errors.New("timers are shut down")
	}
	if n := len(s.byOwner[owner]) + s.reserved[owner]; n >= MaxPending {
		s.mu.Unlock()
		return Timer{}, refusef("this session already has %d pending timers, the maximum; cancel one with timer_cancel or wait for one to fire", n)
	}
	s.reserved[owner]++
	s.markActive(owner, session)
	s.mu.Unlock()

	err = s.cfg.Store.Update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucket).CreateBucketIfNotExists([]byte(owner))
		if err != nil {
			return err
		}
		return store.PutJSON(b, []byte(t.ID), t)
	})

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reserved[owner]--; s.reserved[owner] == 0 {
		delete(s.reserved, owner)
	}
	if err != nil {
		return Timer{}, fmt.Errorf("record timer: %w", err)
	}
	e := &entry{id: t.ID, owner: owner, session: session, execID: t.ExecutionID, due: when, stop: make(chan struct{})}
	s.add(e)
	if s.started && !s.closed {
		s.wg.Add(1)
		go s.watch(e)
	}
	return t, nil
}

// Cancel cancels one of owner's timers. It is idempotent: a timer that
// already fired or was cancelled is returned unchanged with changed false.
// Another owner's timer is reported as unknown.
func (s *Service) Cancel(owner, id string) (t Timer, changed bool, err error) {
	if !idPattern.MatchString(id) {
		return Timer{}, false, refusef("%q is not a timer id; ids look like timer_0123456789abcdef, as timer_create returned them", id)
	}
	return s.cancel(owner, id, "cancelled with timer_cancel")
}

func (s *Service) cancel(owner, id, reason string) (Timer, bool, error) {
	now := time.Now().UTC()
	var t Timer
	var found, changed bool
	err := s.cfg.Store.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Bucket([]byte(owner))
		if b == nil {
			return nil
		}
		var err error
		if found, err = store.GetJSON(b, []byte(id), &t); err != nil || !found || t.State != Pending {
			return err
		}
		t.State, t.CancelledAt, t.Reason = Cancelled, &now, reason
		changed = true
		return store.PutJSON(b, []byte(id), t)
	})
	if err != nil {
		return Timer{}, false, err
	}
	if !found {
		return Timer{}, false, refusef("no timer %s in this session; timer_list shows this session's timers", id)
	}
	if changed {
		s.mu.Lock()
		e := s.byOwner[owner][id]
		s.mu.Unlock()
		if e != nil && s.remove(e) {
			close(e.stop)
		}
	}
	return t, changed, nil
}

// Get returns one of owner's timers.
func (s *Service) Get(owner, id string) (Timer, error) {
	if !idPattern.MatchString(id) {
		return Timer{}, refusef("%q is not a timer id; ids look like timer_0123456789abcdef, as timer_create returned them", id)
	}
	return s.get(owner, id)
}

func (s *Service) get(owner, id string) (Timer, error) {
	var t Timer
	var ok bool
	err := s.cfg.Store.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Bucket([]byte(owner))
		if b == nil {
			return nil
		}
		var err error
		ok, err = store.GetJSON(b, []byte(id), &t)
		return err
	})
	if err != nil {
		return Timer{}, err
	}
	if !ok {
		return Timer{}, refusef("no timer %s in this session; timer_list shows this session's timers", id)
	}
	return t, nil
}

// List returns owner's pending timers, soonest first, then those that
// fired or were cancelled within RecentWindow, newest first (at most
// MaxRecentListed).
func (s *Service) List(owner string) (pending, recent []Timer, err error) {
	since := time.Now().Add(-RecentWindow)
	err = s.cfg.Store.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Bucket([]byte(owner))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var t Timer
			if _, err := store.GetJSON(b, k, &t); err != nil {
				return err
			}
			switch {
			case t.State == Pending:
				pending = append(pending, t)
			case t.ended().After(since):
				recent = append(recent, t)
			}
			return nil
		})
	})
	sort.Slice(pending, func(i, j int) bool { return pending[i].Due.Before(pending[j].Due) })
	sort.Slice(recent, func(i, j int) bool { return recent[i].ended().After(recent[j].ended()) })
	if len(recent) > MaxRecentListed {
		recent = recent[:MaxRecentListed]
	}
	return pending, recent, err
}
