package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	// EndpointPath is where streamable HTTP is served.
	EndpointPath = "/mcp"
	// DefaultSessionIdleTTL reclaims HTTP sessions whose client went away
	// without a DELETE.
	DefaultSessionIdleTTL = 30 * time.Minute
	// DefaultMaxBodyBytes bounds one HTTP request body. A larger body is
	// refused with 413 before it is read into memory.
	DefaultMaxBodyBytes = 16 << 20
	// stdioWorkers is how many tools/call requests run at once over stdio
	// (mcp-go's default is 5, which serialises long calls).
	stdioWorkers = 32
	stdioQueue   = 256
)

// ServeStdio serves MCP over in/out until in ends or ctx is done. stdout
// carries MCP frames only; mcp-go's own errors go to the logger (stderr).
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	stdio := server.NewStdioServer(s.mcp)
	stdio.SetErrorLogger(s.log.Named("stdio").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}))
	server.WithWorkerPoolSize(stdioWorkers)(stdio)
	server.WithQueueSize(stdioQueue)(stdio)
	err := stdio.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// HTTPOptions configure streamable HTTP.
type HTTPOptions struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every request. It is mandatory when the listener is not on loopback.
	Token string
	// SessionIdleTTL reclaims idle sessions; default DefaultSessionIdleTTL.
	SessionIdleTTL time.Duration
	// MaxBodyBytes bounds a request body; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// AllowedOrigins lists browser origins ("https://app.example.org")
	// allowed besides loopback ones. A request whose Origin header names any
	// other origin gets 403, as the MCP transport specification requires.
	AllowedOrigins []string
}

// HTTPHandler returns the streamable HTTP handler, mounted at EndpointPath,
// with bearer-token auth and a body limit in front of mcp-go's handler, and a
// close function that ends every HTTP session.
//
// Sessions are stateful (Mcp-Session-Id; an unknown id gets 404 so clients
// re-initialize, and an id from an earlier run that never ended is resumed,
// see sessionIDs) and pinned to the handshake protocol versions
// (2024-11-05 … 2025-11-25): a 2026-07-28 client would have no session, and
// scimcp keys per-session state on sessions. mcp-go's DNS-rebinding guard stays
// on: a loopback request with a foreign Host header is refused.
func (s *Server) HTTPHandler(o HTTPOptions) (http.Handler, func(context.Context)) {
	if o.SessionIdleTTL <= 0 {
		o.SessionIdleTTL = DefaultSessionIdleTTL
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := server.NewStreamableHTTPServer(s.mcp,
		server.WithSessionIdManager(s.ids),
		server.WithSessionIdleTTL(o.SessionIdleTTL),
		server.WithStreamableHTTPProtocolVersions(mcp.LegacyProtocolVersions()...),
		server.WithStreamableHTTPLogger(newSlog(s.log.Named("http"))),
	)
	s.ids.ttl = o.SessionIdleTTL
	mux := http.NewServeMux()
	mux.Handle(EndpointPath, guard(track(s.ids, h), o))
	closeAll := func(ctx context.Context) {
		s.ids.shuttingDown.Store(true)
		h.CloseSessions(ctx)
	}
	return mux, closeAll
}

// guard enforces the Origin check, the bearer token, the session header on
// GET and DELETE, and the body limit, before mcp-go sees the request. It
// passes the ResponseWriter through untouched so SSE streaming (http.Flusher)
// still works.
func guard(next http.Handler, o HTTPOptions) http.Handler {
	want := []byte(o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !originAllowed(origin, o.AllowedOrigins) {
			http.Error(w, "origin "+origin+" is not allowed", http.StatusForbidden)
			return
		}
		if len(want) > 0 {
			scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
			if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="scimcp"`)
				http.Error(w, "missing or wrong bearer token: send Authorization: Bearer <token from --token-file>", http.StatusUnauthorized)
				return
			}
		}
		if (r.Method == http.MethodGet || r.Method == http.MethodDelete) && r.Header.Get("Mcp-Session-Id") == "" {
			http.Error(w, "Mcp-Session-Id header required: initialize with a POST first", http.StatusBadRequest)
			return
		}
		if r.ContentLength > o.MaxBodyBytes {
			http.Error(w, fmt.Sprintf("request body of %d bytes exceeds the limit of %d", r.ContentLength, o.MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, o.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// track brackets each request of a session for the idle sweeper.
func track(ids *sessionIDs, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" {
			next.ServeHTTP(w, r)
			return
		}
		ids.begin(id, r.Method == http.MethodDelete)
		defer ids.end(id)
		next.ServeHTTP(w, r)
	})
}

// originAllowed accepts loopback origins and the configured ones.
func originAllowed(origin string, allowed []string) bool {
	for _, a := range allowed {
		if strings.EqualFold(strings.TrimSuffix(a, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return IsLoopback(u.Hostname())
}

// HTTPServer serves streamable HTTP on a listener until Shutdown.
type HTTPServer struct {
	srv           *http.Server
	closeSessions func(context.Context)
	cancelBase    context.CancelFunc

	mu     sync.Mutex
	unused map[net.Conn]bool // connections that have not sent a request yet
}

// NewHTTPServer builds the HTTP server for s.
func (s *Server) NewHTTPServer(o HTTPOptions) *HTTPServer {
	handler, closeSessions := s.HTTPHandler(o)
	base, cancel := context.WithCancel(context.Background())
	h := &HTTPServer{unused: map[net.Conn]bool{}}
	h.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Every request's context derives from base, so Shutdown can end
		// long-lived SSE streams at once instead of waiting for clients
		// that dropped their connection.
		BaseContext: func(net.Listener) context.Context { return base },
		ErrorLog:    s.log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		ConnState:   h.track,
	}
	h.closeSessions, h.cancelBase = closeSessions, cancel
	return h
}

// track remembers connections that were opened but never used: net/http's
// Shutdown waits up to 5 s for them, though no request is in flight.
func (h *HTTPServer) track(c net.Conn, st http.ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st == http.StateNew {
		h.unused[c] = true
	} else {
		delete(h.unused, c)
	}
}

// Serve accepts connections on ln until Shutdown; it returns nil after a
// shutdown.
func (h *HTTPServer) Serve(ln net.Listener) error {
	if err := h.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdownDrain is how long Shutdown lets requests in flight finish before
// it closes what is left.
const shutdownDrain = time.Second

// Shutdown closes every session (without ending them: clients may resume
// after a restart), ends open streams, lets requests in flight finish for
// up to shutdownDrain, and closes what is left.
func (h *HTTPServer) Shutdown(ctx context.Context) error {
	h.closeSessions(ctx)
	h.cancelBase()
	h.mu.Lock()
	for c := range h.unused {
		c.Close()
	}
	h.mu.Unlock()
	drain, cancel := context.WithTimeout(ctx, shutdownDrain)
	defer cancel()
	if err := h.srv.Shutdown(drain); err != nil {
		return h.srv.Close()
	}
	return nil
}

// CheckListenAddr refuses to listen beyond loopback without a token.
func CheckListenAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w (use host:port, e.g. 127.0.0.1:8765)", addr, err)
	}
	if token != "" || IsLoopback(host) {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a bearer token: anyone who can reach it could run commands in the workspace. Pass --token-file FILE, or listen on 127.0.0.1", addr)
}

// IsLoopback reports whether host names only the loopback interface.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
