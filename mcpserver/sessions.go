package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
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
}

func newSessionIDs(srv *Server) *sessionIDs {
	return &sessionIDs{srv: srv, live: map[string]bool{}, terminated: map[string]bool{}}
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
