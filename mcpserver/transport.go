package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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
	mux := http.NewServeMux()
	mux.Handle(EndpointPath, guard(h, o))
	closeAll := func(ctx context.Context) {
		s.ids.shuttingDown.Store(true)
		h.CloseSessions(ctx)
	}
	return mux, closeAll
}

// guard enforces the bearer token and the body limit. It passes the
// ResponseWriter through untouched so SSE streaming (http.Flusher) still works.
func guard(next http.Handler, o HTTPOptions) http.Handler {
	want := []byte(o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(want) > 0 {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="scimcp"`)
				http.Error(w, "missing or wrong bearer token: send Authorization: Bearer <token from --token-file>", http.StatusUnauthorized)
				return
			}
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
