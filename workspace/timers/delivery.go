package timers

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// watch waits for a pending timer's moment and fires it.
func (s *Service) watch(e *entry) {
	defer s.wg.Done()
	var done <-chan struct{}
	var poll <-chan time.Time
	if e.execID != "" && s.cfg.Executions != nil {
		if done = s.cfg.Executions.Done(e.execID); done == nil {
			// Not running here: it ended (before this server started, or
			// between the lookup and now), or its record is gone.
			rec, err := s.cfg.Executions.Get(e.owner, e.execID)
			switch {
			case err == nil && rec.State.Terminal():
				trig := ExecutionEnded
				if rec.Ended != nil && rec.Ended.After(e.due) {
					trig = Deadline // the deadline came first
				}
				s.fire(e, trig, e.loaded)
				return
			case err == nil:
				t := time.NewTicker(pollEvery)
				defer t.Stop()
				poll = t.C
			}
		}
	}
	deadline := time.NewTimer(time.Until(e.due))
	defer deadline.Stop()
	for {
		select {
		case <-deadline.C:
			s.fire(e, Deadline, e.loaded && e.due.Before(s.startedAt))
			return
		case <-done:
			s.fire(e, ExecutionEnded, false)
			return
		case <-poll:
			if rec, err := s.cfg.Executions.Get(e.owner, e.execID); err == nil && rec.State.Terminal() {
				s.fire(e, ExecutionEnded, false)
				return
			}
		case <-e.stop:
			return
		case <-s.closing:
			return
		}
	}
}

// fire moves a pending timer to fired, once, and delivers its reminder.
func (s *Service) fire(e *entry, trig Trigger, late bool) {
	now := time.Now().UTC()
	var rec *runner.Execution
	if e.execID != "" && s.cfg.Executions != nil {
		if r, err := s.cfg.Executions.Get(e.owner, e.execID); err == nil {
			rec = &r
		}
	}
	var t Timer
	fired := false
	err := s.cfg.Store.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Bucket([]byte(e.owner))
		if b == nil {
			return nil
		}
		if ok, err := store.GetJSON(b, []byte(e.id), &t); err != nil || !ok || t.State != Pending {
			return err
		}
		// Delivery stays empty until the reminder is handed over (or
		// not): a crash in between leaves it empty, and New treats it as
		// waiting.
		t.State, t.FiredAt, t.Trigger, t.Late = Fired, &now, trig, late
		if rec != nil {
			t.ExecutionState, t.ExitCode, t.ExecutionReason = string(rec.State), rec.ExitCode, rec.Reason
		}
		fired = true
		return store.PutJSON(b, []byte(e.id), t)
	})
	s.remove(e)
	if err != nil {
		s.cfg.Log.Error("record timer firing", "timer", e.id, "error", err)
		return
	}
	if fired {
		s.deliver(t, "")
	}
}

// deliver offers a fired reminder to a live session: to, if given, else the
// session that set it and then the owner's other active sessions. If none
// is live it waits for the owner's next tool call; if its session has ended
// it is suppressed.
func (s *Service) deliver(t Timer, to string) {
	targets := []string{to}
	if to == "" {
		s.mu.Lock()
		targets = []string{t.Session}
		for sess := range s.active[t.Owner] {
			if sess != t.Session {
				targets = append(targets, sess)
			}
		}
		s.mu.Unlock()
	}
	text, data := Reminder(t)
	for _, sess := range targets {
		if s.cfg.Deliver != nil && s.cfg.Deliver(sess, text, data) {
			s.setDelivery(t, Delivered, sess, "")
			return
		}
	}
	s.mu.Lock()
	ended := s.ended[t.Session]
	s.mu.Unlock()
	if ended {
		s.setDelivery(t, Suppressed, "", "the session ended before the reminder could be delivered")
		return
	}
	// On record first, then in memory: whoever takes it from memory
	// finds it waiting. SessionEnded marks the session ended before it
	// looks at what waits, so a reminder is either seen by it or sees it.
	s.setDelivery(t, Waiting, "", "")
	s.mu.Lock()
	ended = s.ended[t.Session]
	if !ended {
		s.addWaiting(t)
	}
	s.mu.Unlock()
	if ended {
		s.setDelivery(t, Suppressed, "", "the session ended before the reminder could be delivered")
	}
}

func (s *Service) setDelivery(t Timer, d Delivery, to, reason string) {
	now := time.Now().UTC()
	err := s.cfg.Store.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Bucket([]byte(t.Owner))
		if b == nil {
			return nil
		}
		var cur Timer
		if ok, err := store.GetJSON(b, []byte(t.ID), &cur); err != nil || !ok {
			return err
		}
		cur.Delivery = d
		if d == Delivered {
			cur.DeliveredTo, cur.DeliveredAt = to, &now
		}
		if reason != "" {
			cur.Reason = reason
		}
		return store.PutJSON(b, []byte(t.ID), cur)
	})
	if err != nil {
		s.cfg.Log.Error("record timer delivery", "timer", t.ID, "error", err)
	}
}

// Reminder renders a fired timer as the text the model reads and the
// structured details that go with it.
func Reminder(t Timer) (string, map[string]any) {
	var why string
	switch {
	case t.Trigger == ExecutionEnded:
		why = fmt.Sprintf("execution %s ended: %s", t.ExecutionID, execStatus(t))
	case t.ExecutionID != "":
		why = fmt.Sprintf("deadline %s reached; execution %s is %s", t.Due.Format(time.RFC3339), t.ExecutionID, execStatus(t))
	default:
		why = "due " + t.Due.Format(time.RFC3339)
	}
	if t.Late {
		why += "; delivered late: the server was not running when it came due"
	}
	text := fmt.Sprintf("Timer %s fired (%s): %s", t.ID, why, t.Message)
	data := map[string]any{
		"timer_id": t.ID, "message": t.Message, "trigger": string(t.Trigger),
		"due": t.Due.Format(time.RFC3339Nano), "late": t.Late,
	}
	if t.FiredAt != nil {
		data["fired_at"] = t.FiredAt.Format(time.RFC3339Nano)
	}
	if t.ExecutionID != "" {
		data["execution_id"], data["execution_state"] = t.ExecutionID, t.ExecutionState
		if t.ExitCode != nil {
			data["exit_code"] = *t.ExitCode
		}
	}
	return text, data
}

func execStatus(t Timer) string {
	st := t.ExecutionState
	if st == "" {
		st = "of unknown state"
	}
	if t.ExitCode != nil {
		st += fmt.Sprintf(", exit code %d", *t.ExitCode)
	}
	if t.ExecutionReason != "" && t.Trigger == ExecutionEnded {
		st += " (" + t.ExecutionReason + ")"
	}
	return st
}

// markActive records a live session of owner; s.mu must be held.
func (s *Service) markActive(owner, session string) {
	if s.ended[session] {
		return
	}
	if s.active[owner] == nil {
		s.active[owner] = map[string]bool{}
	}
	s.active[owner][session] = true
}

// SessionActive is called on every tool call of a session (by the MCP
// layer, before the result is sent). It adopts the owner's pending timers
// whose session is not active here (set before a crash) and delivers the
// owner's reminders that are waiting, so they are attached to this call's
// result.
func (s *Service) SessionActive(owner, session string) {
	s.mu.Lock()
	if s.ended[session] {
		s.mu.Unlock()
		return
	}
	s.markActive(owner, session)
	var adopt []*entry
	for _, e := range s.byOwner[owner] {
		if e.session != session && !s.active[owner][e.session] {
			adopt = append(adopt, e)
			e.session = session
		}
	}
	waiting := s.waiting[owner]
	delete(s.waiting, owner)
	s.mu.Unlock()

	if len(adopt) > 0 {
		err := s.cfg.Store.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucket).Bucket([]byte(owner))
			for _, e := range adopt {
				var t Timer
				if ok, err := store.GetJSON(b, []byte(e.id), &t); err != nil || !ok || t.State != Pending {
					continue
				}
				t.Session = session
				if err := store.PutJSON(b, []byte(e.id), t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			s.cfg.Log.Error("adopt timers", "session", session, "error", err)
		}
	}
	for id := range waiting {
		t, err := s.get(owner, id)
		if err != nil || t.State != Fired || (t.Delivery != Waiting && t.Delivery != "") {
			continue
		}
		s.deliver(t, session)
	}
}

// SessionEnded cancels a session's pending timers (reason "the session
// ended") and suppresses its reminders that wait for delivery. Both stay on
// record.
func (s *Service) SessionEnded(session string) {
	s.mu.Lock()
	s.ended[session] = true
	for owner, set := range s.active {
		if delete(set, session); len(set) == 0 {
			delete(s.active, owner)
		}
	}
	var cancel []*entry
	for _, es := range s.byOwner {
		for _, e := range es {
			if e.session == session {
				cancel = append(cancel, e)
			}
		}
	}
	type ref struct{ owner, id string }
	var suppress []ref
	for owner, ids := range s.waiting {
		for id, sess := range ids {
			if sess == session {
				suppress = append(suppress, ref{owner, id})
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(s.waiting, owner)
		}
	}
	s.mu.Unlock()
	for _, e := range cancel {
		if _, _, err := s.cancel(e.owner, e.id, "the session ended"); err != nil {
			s.cfg.Log.Error("cancel timer at session end", "timer", e.id, "error", err)
		}
	}
	for _, r := range suppress {
		s.setDelivery(Timer{ID: r.id, Owner: r.owner}, Suppressed, "", "the session ended before the reminder could be delivered")
	}
}
