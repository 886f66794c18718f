package sources

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Supervision timings.
const (
	InitTimeout  = 30 * time.Second
	PingEvery    = 10 * time.Second
	PingTimeout  = 5 * time.Second
	BackoffFirst = time.Second
	BackoffMax   = 30 * time.Second
)

// States of a source.
const (
	StateStarting = "starting"
	StateReady    = "ready"
	StateBackoff  = "backoff"
	StateStopped  = "stopped"
)

// Tool is an upstream tool with its definition exactly as the source sent it.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema and Annotations are kept raw, keyword for keyword.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Options tune a Source.
type Options struct {
	Log hclog.Logger
	// OnTools is called, from the source's own goroutine, whenever the tool
	// list is (re)read.
	OnTools func(source string, tools []Tool)
	// OnProgress receives the source's progress notifications.
	OnProgress func(params map[string]any)
	// ServerEnv names variables of the server's environment a stdio source
	// inherits (default: PATH, HOME, LANG, TMPDIR). Nothing else of it is
	// passed, so the server's secrets stay with the server.
	ServerEnv []string
}

// Source is one supervised upstream server.
type Source struct {
	cfg  Config
	opts Options
	log  hclog.Logger

	mu       sync.Mutex
	state    string
	lastErr  error
	tr       transport.Interface
	tools    []Tool
	kick     chan struct{} // asks the supervisor to reconnect
	cancel   context.CancelFunc
	done     chan struct{}
	started  bool
	restarts int

	nextID atomic.Int64
}

// New returns a source; Start runs it.
func New(cfg Config, opts Options) *Source {
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.ServerEnv == nil {
		opts.ServerEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}
	}
	return &Source{cfg: cfg, opts: opts, log: opts.Log.Named(cfg.Name), state: StateStopped, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// Name returns the source's name.
func (s *Source) Name() string { return s.cfg.Name }

// Config returns the source's configuration.
func (s *Source) Config() Config { return s.cfg }

// Start runs the supervisor in the background.
func (s *Source) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.supervise(ctx)
}

// Stop ends the supervisor and the connection. It is idempotent.
func (s *Source) Stop() {
	s.mu.Lock()
	cancel, started := s.cancel, s.started
	s.mu.Unlock()
	if !started || cancel == nil {
		return
	}
	cancel()
	<-s.done
}

// State returns the source's state and the last error seen.
func (s *Source) State() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.lastErr
}

// Restarts counts reconnections after the first.
func (s *Source) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Tools returns the last tool list read from the source.
func (s *Source) Tools() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Tool(nil), s.tools...)
}

func (s *Source) set(state string, err error) {
	s.mu.Lock()
	s.state, s.lastErr = state, err
	s.mu.Unlock()
}

// supervise keeps the source connected until ctx ends.
func (s *Source) supervise(ctx context.Context) {
	defer close(s.done)
	backoff := BackoffFirst
	first := true
	for ctx.Err() == nil {
		if !first {
			s.mu.Lock()
			s.restarts++
			s.mu.Unlock()
		}
		first = false
		s.set(StateStarting, nil)
		connCtx, cancelConn := context.WithCancel(ctx)
		tr, err := s.connect(connCtx)
		if err != nil {
			cancelConn()
			s.log.Warn("source unavailable; retrying", "error", err, "in", backoff)
			s.set(StateBackoff, err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, BackoffMax)
			continue
		}
		backoff = BackoffFirst
		s.mu.Lock()
		s.tr = tr
		s.mu.Unlock()
		s.set(StateReady, nil)
		s.log.Info("source ready", "tools", len(s.Tools()))
		err = s.watch(connCtx, tr)
		s.mu.Lock()
		s.tr = nil
		s.mu.Unlock()
		tr.Close()
		cancelConn()
		if ctx.Err() != nil {
			break
		}
		s.log.Warn("source connection lost; reconnecting", "error", err)
		s.set(StateBackoff, err)
		select {
		case <-ctx.Done():
		case <-time.After(BackoffFirst):
		}
	}
	s.set(StateStopped, nil)
}

// watch pings the source until it fails or a reconnect is asked for.
func (s *Source) watch(ctx context.Context, tr transport.Interface) error {
	t := time.NewTicker(PingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.kick:
			return errors.New("connection failed during a call")
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, PingTimeout)
			_, err := s.request(pctx, tr, "ping", nil)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		}
	}
}

// connect starts the transport, initializes and lists the tools.
func (s *Source) connect(ctx context.Context) (transport.Interface, error) {
	var tr transport.Interface
	if s.cfg.IsHTTP() {
		h, err := s.cfg.headers()
		if err != nil {
			return nil, err
		}
		t, err := transport.NewStreamableHTTP(s.cfg.URL, transport.WithHTTPHeaders(h), transport.WithContinuousListening())
		if err != nil {
			return nil, err
		}
		tr = t
	} else {
		tr = transport.NewStdioWithOptions(s.cfg.Command, nil, s.cfg.Args, transport.WithCommandFunc(s.command))
	}
	if err := tr.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) { s.onNotification(ctx, n) })
	ictx, cancel := context.WithTimeout(ctx, InitTimeout)
	defer cancel()
	_, err := s.request(ictx, tr, "initialize", map[string]any{
		"protocolVersion": mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "scimcp", "version": "1"},
	})
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := tr.SendNotification(ictx, mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{Method: "notifications/initialized"}}); err != nil {
		tr.Close()
		return nil, fmt.Errorf("initialized: %w", err)
	}
	if err := s.list(ictx, tr); err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}

// command builds a stdio source's process: its configured environment plus
// a few harmless variables of the server's, never the rest.
func (s *Source) command(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, command, args...)
	var env []string
	for _, k := range s.opts.ServerEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range s.cfg.Env {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	cmd.Dir = s.cfg.Cwd
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.log.Info("stderr", "line", sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		<-ctx.Done()
		pw.Close()
	}()
	return cmd, nil
}

// list reads every page of tools/list, keeping each tool's raw definition.
func (s *Source) list(ctx context.Context, tr transport.Interface) error {
	var all []Tool
	cursor := ""
	for page := 0; page < 1000; page++ {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		raw, err := s.request(ctx, tr, "tools/list", params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		var res struct {
			Tools      []Tool `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	s.mu.Lock()
	s.tools = all
	s.mu.Unlock()
	if s.opts.OnTools != nil {
		s.opts.OnTools(s.cfg.Name, all)
	}
	return nil
}

func (s *Source) onNotification(ctx context.Context, n mcp.JSONRPCNotification) {
	switch n.Method {
	case "notifications/tools/list_changed":
		// Not on the transport's reader goroutine: a request from here
		// would wait for a response that goroutine must read.
		go func() {
			s.mu.Lock()
			tr := s.tr
			s.mu.Unlock()
			if tr == nil {
				return
			}
			lctx, cancel := context.WithTimeout(ctx, InitTimeout)
			defer cancel()
			if err := s.list(lctx, tr); err != nil {
				s.log.Warn("re-list after list_changed", "error", err)
			}
		}()
	case "notifications/progress":
		if s.opts.OnProgress != nil {
			s.opts.OnProgress(n.Params.AdditionalFields)
		}
	}
}

// RPCError is an error the source answered with.
type RPCError struct {
	Code    int
	Message string
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

func (s *Source) request(ctx context.Context, tr transport.Interface, method string, params any) (json.RawMessage, error) {
	id := s.nextID.Add(1)
	resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	return resp.Result, nil
}

// ErrUnavailable wraps every failure to reach a source.
var ErrUnavailable = errors.New("source unavailable")

// Call calls a tool of the source and returns its raw result. meta is sent
// as the request's _meta (progress token). Cancelling ctx sends
// notifications/cancelled to the source.
func (s *Source) Call(ctx context.Context, tool string, args json.RawMessage, meta map[string]any) (json.RawMessage, error) {
	params := map[string]any{"name": tool, "arguments": args}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	return s.Request(ctx, "tools/call", params)
}

// ReadResource reads one resource of the source (resources/read) and
// returns the raw result.
func (s *Source) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	return s.Request(ctx, "resources/read", map[string]any{"uri": uri})
}

// Request sends one request to the source while it is ready and returns the
// raw result. Cancelling ctx sends notifications/cancelled to the source; a
// transport failure has the source restarted.
func (s *Source) Request(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	s.mu.Lock()
	tr, state, lastErr := s.tr, s.state, s.lastErr
	s.mu.Unlock()
	if tr == nil || state != StateReady {
		why := state
		if lastErr != nil {
			why += ": " + lastErr.Error()
		}
		return nil, fmt.Errorf("%w: MCP source %q is %s; it is restarted automatically, try again shortly", ErrUnavailable, s.cfg.Name, why)
	}
	id := s.nextID.Add(1)
	resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params})
	if err != nil {
		if ctx.Err() != nil {
			tr.SendNotification(context.Background(), mcp.JSONRPCNotification{JSONRPC: "2.0", Notification: mcp.Notification{
				Method: "notifications/cancelled",
				Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": "cancelled by the client"}},
			}})
			return nil, ctx.Err()
		}
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return nil, fmt.Errorf("%w: MCP source %q: %v; it is being restarted, try again shortly", ErrUnavailable, s.cfg.Name, err)
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	return resp.Result, nil
}
