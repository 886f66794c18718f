package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// httpSessionPrefix starts every HTTP session id scimcp issues.
const httpSessionPrefix = "mcp-session-"

var httpSessionPattern = regexp.MustCompile(`^mcp-session-[0-9a-f]{32}$`)

// sessionIDs is the streamable HTTP session id manager. Unlike mcp-go's
// in-memory one it lets a client keep its session across a server restart:
// an id issued by an earlier run of this data folder, recorded in the store
// and never ended (by DELETE or the idle TTL), is accepted again, so the
// client's stored outputs, executions and timers stay its own. Unknown or
// ended ids get 404, and the client re-initializes.
type sessionIDs struct {
	srv *Server

	mu         sync.Mutex
	live       map[string]bool
	terminated map[string]bool
	// shuttingDown stops Terminate from recording an end: a graceful
	// shutdown closes connections, it does not end the clients' sessions.
	shuttingDown atomic.Bool

	// mcp-go's idle sweeper counts a session idle from the start of its last
	// request, so a long call (run_shell waiting 45 s) could see its session
	// swept under it. The HTTP guard tracks requests in flight and when the
	// last one ended; Terminate refuses the sweeper while a session is busy
	// or was busy within the TTL. A client's DELETE always ends it.
	ttl      time.Duration
	inflight map[string]int
	lastEnd  map[string]time.Time
	deleting map[string]bool
}

func newSessionIDs(srv *Server) *sessionIDs {
	return &sessionIDs{srv: srv, live: map[string]bool{}, terminated: map[string]bool{},
		inflight: map[string]int{}, lastEnd: map[string]time.Time{}, deleting: map[string]bool{}}
}

func (m *sessionIDs) Generate() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	id := httpSessionPrefix + hex.EncodeToString(b[:])
	m.mu.Lock()
	m.live[id] = true
	m.mu.Unlock()
	return id
}

func (m *sessionIDs) Validate(id string) (bool, error) {
	if !httpSessionPattern.MatchString(id) {
		return false, fmt.Errorf("invalid session id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.terminated[id] {
		return true, nil
	}
	if m.live[id] {
		return false, nil
	}
	if m.srv.resumable(id) {
		m.live[id] = true
		return false, nil
	}
	return false, fmt.Errorf("session not found")
}

func (m *sessionIDs) Terminate(id string) (bool, error) {
	m.mu.Lock()
	if !m.deleting[id] && !m.shuttingDown.Load() && (m.inflight[id] > 0 || time.Since(m.lastEnd[id]) < m.ttl) {
		m.mu.Unlock()
		return false, nil // busy: not idle, whatever the sweeper thinks
	}
	delete(m.deleting, id)
	delete(m.lastEnd, id)
	known := m.live[id]
	delete(m.live, id)
	if known {
		m.terminated[id] = true
	}
	m.mu.Unlock()
	if known && !m.shuttingDown.Load() {
		m.srv.endSession(id)
	}
	return false, nil
}

func (m *sessionIDs) isLive(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// begin and end bracket one HTTP request of a session (see ttl).
func (m *sessionIDs) begin(id string, deleting bool) {
	m.mu.Lock()
	m.inflight[id]++
	if deleting {
		m.deleting[id] = true
	}
	m.mu.Unlock()
}

func (m *sessionIDs) end(id string) {
	m.mu.Lock()
	if m.inflight[id]--; m.inflight[id] <= 0 {
		delete(m.inflight, id)
	}
	if m.live[id] {
		m.lastEnd[id] = time.Now()
	}
	m.mu.Unlock()
}
