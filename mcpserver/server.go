// Package mcpserver wires scimcp's tool catalogue to the MCP protocol with
// mcp-go: transports (stdio, streamable HTTP), sessions, visibility (groups and
// toolPolicy), middleware and notifications. It holds no business logic.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sciencediscovery/scimcp/mcpserver/sources"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace/downloads"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Options configure a Server. Every field but Tools has a working zero value.
type Options struct {
	Name    string // server name in initialize; default "scimcp"
	Version string
	Logger  hclog.Logger
	// Store records sessions; nil keeps them in memory only (tests).
	Store *store.Store
	// Outputs, when set, bounds every result of a tool that is not
	// self-bounded (see bound.go).
	Outputs *outputs.Store
	// Tools is the catalogue; which tools a session sees is decided by
	// Groups and ToolPolicy.
	Tools []toolkit.Tool
	// Groups lists the optional tool groups that are on. GroupBase is always
	// on.
	Groups []toolkit.Group
	// ToolPolicy, when non-empty, is a whitelist of tool names for every
	// session; SetSessionPolicy narrows one session further.
	ToolPolicy   []string
	Instructions string
	// DeferredGroups lists scimcp's own optional groups whose tools are
	// deferred like upstream ones: listed by name until tool_search loads
	// them, so a deployment with many tools keeps the model's context small.
	DeferredGroups []toolkit.Group
	// Sources are the upstream MCP servers whose tools are served as
	// deferred mcp__<source>__<tool> tools behind tool_search.
	Sources []sources.Config
	// AfterToolCall, when set, is called after every tool result of a
	// session, before notices are attached to it (planProgress, waiting
	// timer reminders).
	AfterToolCall func(c toolkit.Caller, tool string, meta *mcp.Meta)
	// ReadPlan, when set, serves each session its own plan as
	// scimcp://sessions/{session}/plan.
	ReadPlan func(session, uri string) ([]mcp.ResourceContents, error)
	// ArtifactResources and ReadArtifact, when both set, serve the Project
	// Artifacts as resources (scimcp://artifacts/{artifact_id}[/v{version}]).
	// Call ArtifactsChanged after every declaration.
	ArtifactResources func() ([]mcp.Resource, error)
	ReadArtifact      func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error)
	// OnSessionEnd, when set, is called once when a session ends for good:
	// stdio closes (also when the server is stopped by a signal: a stdio
	// client does not come back to the same session), HTTP DELETE, idle TTL;
	// not when an HTTP server shuts down, after which clients may resume.
	OnSessionEnd func(sessionID string)
	// Downloads, when set with Sources and Store, serves artifact_download.
	Downloads *downloads.Service
	// DownloadPolicy decides downloads for clients that cannot ask their
	// user (no form elicitation): DownloadRefuse (the default) or
	// DownloadAllow.
	DownloadPolicy string
}

// Server is one MCP server: one tool registry and session table shared by
// every transport it serves.
type Server struct {
	mcp  *server.MCPServer
	log  hclog.Logger
	opts Options

	toolGroup   map[string]toolkit.Group
	selfBounded map[string]bool
	groups      map[toolkit.Group]bool
	ids         *sessionIDs

	sources     []*sources.Source
	up          *upstreams
	invocations *sources.Invocations

	mu       sync.Mutex
	sessions map[string]*Session // by mcp-go session id
	pending  map[string][]Notice // by scimcp session id: to attach to the next result
}

// Notice is something the server tells a session outside a tool call (a
// timer that fired). It goes out at once as a notifications/message and is
// attached to the session's next tool result, for clients that do not show
// notifications to the model.
type Notice struct {
	Kind string         // e.g. "timer"
	Text string         // what the model should read
	Data map[string]any // structured details
}

// Session is scimcp's view of one MCP session.
type Session struct {
	// ID is scimcp's session id: the Mcp-Session-Id for HTTP; for stdio, a
	// fresh id per process ("stdio-…"), so stored state of two runs never
	// mixes.
	ID        string
	MCPID     string
	Transport string
	Started   time.Time
	// Owner is whose per-session state the session may read (see
	// toolkit.Caller): "stdio" for every stdio session of a data folder,
	// the session id otherwise.
	Owner string
	// Policy, when non-nil, is this session's tool whitelist (a subagent's
	// toolPolicy), applied on top of Options.ToolPolicy.
	Policy []string
	// FormElicitation records that the client declared form elicitation
	// at initialize (guarded by Server.mu).
	FormElicitation bool
}

// New builds a server over opts.Tools.
func New(opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "scimcp"
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Server{
		log:         opts.Logger,
		opts:        opts,
		toolGroup:   map[string]toolkit.Group{},
		selfBounded: map[string]bool{},
		groups:      map[toolkit.Group]bool{toolkit.GroupBase: true},
		sessions:    map[string]*Session{},
		pending:     map[string][]Notice{},
		up:          newUpstreams(),
	}
	s.ids = newSessionIDs(s)
	for _, g := range opts.Groups {
		s.groups[g] = true
	}
	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(s.onRegister)
	hooks.AddOnUnregisterSession(s.onUnregister)
	hooks.AddAfterInitialize(s.afterInitialize)

	srvOpts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithToolFilter(s.filterTools),
		server.WithToolHandlerMiddleware(s.callMiddleware),
		server.WithLogger(newSlog(opts.Logger.Named("mcp"))),
	}
	if opts.Instructions != "" {
		srvOpts = append(srvOpts, server.WithInstructions(opts.Instructions))
	}
	artifactResources := opts.ArtifactResources != nil && opts.ReadArtifact != nil
	if opts.ReadPlan != nil || artifactResources {
		// subscribe: plans send resources/updated; listChanged: artifacts.
		srvOpts = append(srvOpts, server.WithResourceCapabilities(opts.ReadPlan != nil, artifactResources))
	}
	s.mcp = server.NewMCPServer(opts.Name, opts.Version, srvOpts...)

	seen := map[string]bool{}
	var st []server.ServerTool
	for _, t := range opts.Tools {
		if seen[t.Name()] {
			return nil, fmt.Errorf("tool %q is defined twice", t.Name())
		}
		seen[t.Name()] = true
		s.toolGroup[t.Name()] = t.Group
		s.selfBounded[t.Name()] = t.SelfBounded
		st = append(st, server.ServerTool{Tool: t.Def, Handler: server.ToolHandlerFunc(t.Handler)})
	}
	s.mcp.AddTools(st...)
	if opts.ReadPlan != nil {
		s.mcp.AddResourceTemplate(toolkit.PlanResourceTemplate(), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			sess := s.sessionFromContext(ctx)
			if sess == nil {
				return nil, fmt.Errorf("resource not found: %s", req.Params.URI)
			}
			return opts.ReadPlan(sess.ID, req.Params.URI)
		})
	}
	if artifactResources {
		for _, tpl := range toolkit.ArtifactResourceTemplates() {
			s.mcp.AddResourceTemplate(tpl, opts.ReadArtifact)
		}
		s.ArtifactsChanged()
	}
	if opts.Store != nil {
		inv, err := sources.NewInvocations(opts.Store)
		if err != nil {
			return nil, err
		}
		s.invocations = inv
	}
	if err := s.addSources(opts.Sources); err != nil {
		return nil, err
	}
	if err := s.addDownloads(); err != nil {
		return nil, err
	}
	deferred := map[toolkit.Group]bool{}
	for _, g := range opts.DeferredGroups {
		if g == toolkit.GroupBase {
			return nil, fmt.Errorf("the base tools cannot be deferred")
		}
		deferred[g] = true
	}
	for _, t := range opts.Tools {
		if deferred[t.Group] && s.groups[t.Group] {
			s.deferLocal(t.Def)
			s.ensureToolSearch()
		}
	}
	return s, nil
}

// MCP returns the underlying mcp-go server (for in-process test clients).
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// SetSessionPolicy restricts one session to a whitelist of tool names (nil
// lifts the restriction). It reports false if the session is unknown.
func (s *Server) SetSessionPolicy(sessionID string, names []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.ID == sessionID {
			ss.Policy = slices.Clone(names)
			return true
		}
	}
	return false
}

// visible decides whether a session may see and call a tool: its group must
// be on, and it must pass the global and the session's toolPolicy.
func (s *Server) visible(sess *Session, name string) bool {
	g, ok := s.toolGroup[name]
	if !ok && strings.HasPrefix(name, sources.Prefix) && s.up.has(name) {
		g, ok = GroupSources, true
	}
	if !ok || !s.groups[g] {
		return false
	}
	if len(s.opts.ToolPolicy) > 0 && !slices.Contains(s.opts.ToolPolicy, name) {
		return false
	}
	if sess != nil && sess.Policy != nil && !slices.Contains(sess.Policy, name) {
		return false
	}
	return true
}

// filterTools is mcp-go's tool filter: it runs on tools/list and on
// tools/call ("tool not found"), so visibility is enforced, not advisory.
func (s *Server) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	sess := s.sessionFromContext(ctx)
	sid := ""
	if sess != nil {
		sid = sess.ID
	}
	out := tools[:0:0]
	for _, t := range tools {
		if !s.visible(sess, t.Name) {
			continue
		}
		// A deferred tool: its placeholder, or its full definition once
		// tool_search promoted it for this session.
		if def, ok := s.up.definition(sid, t.Name); ok {
			t = def
		}
		out = append(out, t)
	}
	return out
}

func (s *Server) sessionFromContext(ctx context.Context) *Session {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return nil
	}
	id := cs.SessionID()
	s.mu.Lock()
	if sess, ok := s.sessions[id]; ok {
		s.mu.Unlock()
		return sess
	}
	// A session resumed after a restart is served by mcp-go as a per-request
	// session that is never registered; adopt it once its id validated.
	if !httpSessionPattern.MatchString(id) || !s.ids.isLive(id) {
		s.mu.Unlock()
		return nil
	}
	sess := &Session{ID: id, MCPID: id, Owner: id, Transport: "http", Started: time.Now().UTC()}
	var promoted []string
	if s.opts.Store != nil {
		// What its initialize declared and which deferred tools it loaded,
		// before the restart.
		if prev, ok, err := s.opts.Store.GetSession(id); err == nil && ok {
			sess.Started, sess.FormElicitation, promoted = prev.StartedAt, prev.FormElicitation, prev.Promoted
		}
	}
	s.sessions[id] = sess
	s.mu.Unlock()
	if len(promoted) > 0 {
		s.up.promote(id, promoted)
	}
	return sess
}

// recordPromotions keeps an HTTP session's promoted tools in its record, so
// a client resuming the session after a restart sees the same tool list.
func (s *Server) recordPromotions(sessionID string) {
	if s.opts.Store == nil {
		return
	}
	rec, ok, err := s.opts.Store.GetSession(sessionID)
	if err != nil || !ok || rec.Transport != "http" {
		return
	}
	s.up.mu.RLock()
	rec.Promoted = slices.Sorted(maps.Keys(s.up.promoted[sessionID]))
	s.up.mu.RUnlock()
	s.record(rec)
}

// callMiddleware runs around every tool handler: it puts the caller into the
// context, then passes the result through the bound.
func (s *Server) callMiddleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sess := s.sessionFromContext(ctx)
		caller := toolkit.Caller{Session: "anonymous", Owner: "anonymous"}
		if sess != nil {
			caller = toolkit.Caller{Session: sess.ID, Owner: sess.Owner}
		}
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			token := req.Params.Meta.ProgressToken
			caller.Progress = func(progress, total float64, message string) {
				params := map[string]any{"progressToken": token, "progress": progress, "message": message}
				if total > 0 {
					params["total"] = total
				}
				if err := s.mcp.SendNotificationToClient(ctx, "notifications/progress", params); err != nil {
					s.log.Debug("progress notification", "error", err)
				}
			}
		}
		ctx = toolkit.WithCaller(ctx, caller)
		res, err := next(ctx, req)
		if err != nil || res == nil || res.NeedsInput() {
			// A result asking the client for input (SEP-2322) is not the
			// call's outcome: the retry's result is bounded and noticed.
			return res, err
		}
		if s.opts.Outputs != nil && !s.selfBounded[req.Params.Name] {
			res = s.bound(caller, req.Params.Name, res)
		}
		if s.opts.AfterToolCall != nil {
			s.opts.AfterToolCall(caller, req.Params.Name, req.Params.Meta)
		}
		return s.attachNotices(caller.Session, res), nil
	}
}

// ArtifactsChanged lists the Project Artifacts as resources again; mcp-go
// then sends notifications/resources/list_changed to every session.
func (s *Server) ArtifactsChanged() {
	if s.opts.ArtifactResources == nil || s.opts.ReadArtifact == nil {
		return
	}
	list, err := s.opts.ArtifactResources()
	if err != nil {
		s.log.Warn("list artifact resources", "error", err)
		return
	}
	rs := make([]server.ServerResource, len(list))
	for i, r := range list {
		rs[i] = server.ServerResource{Resource: r, Handler: s.opts.ReadArtifact}
	}
	s.mcp.AddResources(rs...)
}

// NotifyResourceUpdated sends notifications/resources/updated for uri to
// one session; it reports false if the session is not live.
func (s *Server) NotifyResourceUpdated(sessionID, uri string) bool {
	mcpID := s.mcpIDOf(sessionID)
	if mcpID == "" {
		return false
	}
	if err := s.mcp.SendNotificationToSpecificClient(mcpID, "notifications/resources/updated", map[string]any{"uri": uri}); err != nil {
		s.log.Debug("resource updated notification", "session", sessionID, "error", err)
	}
	return true
}

// mcpIDOf maps a scimcp session id to mcp-go's.
func (s *Server) mcpIDOf(sessionID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ss := range s.sessions {
		if ss.ID == sessionID {
			return id
		}
	}
	return ""
}

// Deliver tells a session something now (notifications/message) and again
// with its next tool result. It reports false if the session is not live
// here; the notice is then dropped (the caller keeps its own record).
func (s *Server) Deliver(sessionID string, n Notice) bool {
	s.mu.Lock()
	var mcpID string
	for id, ss := range s.sessions {
		if ss.ID == sessionID {
			mcpID = id
		}
	}
	if mcpID == "" {
		s.mu.Unlock()
		return false
	}
	s.pending[sessionID] = append(s.pending[sessionID], n)
	s.mu.Unlock()
	params := map[string]any{"level": "notice", "logger": "scimcp." + n.Kind, "data": map[string]any{"text": n.Text, "details": n.Data}}
	if err := s.mcp.SendNotificationToSpecificClient(mcpID, "notifications/message", params); err != nil {
		s.log.Debug("deliver notice", "session", sessionID, "error", err)
	}
	return true
}

// attachNotices appends the session's pending notices to a result.
func (s *Server) attachNotices(sessionID string, res *mcp.CallToolResult) *mcp.CallToolResult {
	s.mu.Lock()
	ns := s.pending[sessionID]
	delete(s.pending, sessionID)
	s.mu.Unlock()
	if len(ns) == 0 {
		return res
	}
	out := *res
	out.Content = append([]mcp.Content{}, res.Content...)
	var list []map[string]any
	for _, n := range ns {
		out.Content = append(out.Content, mcp.NewTextContent("[scimcp "+n.Kind+"] "+n.Text))
		list = append(list, map[string]any{"kind": n.Kind, "text": n.Text, "details": n.Data})
	}
	meta := map[string]any{}
	if res.Meta != nil {
		for k, v := range res.Meta.AdditionalFields {
			meta[k] = v
		}
	}
	meta["scimcp/notices"] = list
	out.Meta = mcp.NewMetaFromMap(meta)
	return &out
}

func (s *Server) onRegister(ctx context.Context, cs server.ClientSession) {
	mcpID := cs.SessionID()
	sess := &Session{ID: mcpID, MCPID: mcpID, Owner: mcpID, Transport: "http", Started: time.Now().UTC()}
	switch cs.(type) {
	case *server.InProcessSession:
		sess.Transport = "inprocess"
	default:
		if mcpID == "stdio" {
			sess.ID, sess.Owner, sess.Transport = "stdio-"+randomID(), "stdio", "stdio"
		}
	}
	rec := store.Session{ID: sess.ID, Transport: sess.Transport, StartedAt: sess.Started}
	// Over HTTP the session is registered after initialize: what the
	// client declared is known here (afterInitialize does not see it).
	if ci, ok := cs.(server.SessionWithClientInfo); ok {
		if info := ci.GetClientInfo(); info.Name != "" {
			rec.ClientName, rec.ClientVersion = info.Name, info.Version
		}
		if ec := ci.GetClientCapabilities().Elicitation; ec != nil {
			sess.FormElicitation = formElicitation(ec)
			rec.FormElicitation = sess.FormElicitation
		}
	}
	if pv, ok := cs.(server.SessionWithProtocolVersion); ok && pv.ProtocolVersion() != "" {
		rec.ProtocolVersion = pv.ProtocolVersion()
	}
	s.mu.Lock()
	s.sessions[mcpID] = sess
	s.mu.Unlock()
	s.log.Debug("session registered", "session", sess.ID, "transport", sess.Transport, "client", rec.ClientName)
	s.record(rec)
}

func (s *Server) afterInitialize(ctx context.Context, _ any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
	sess := s.sessionFromContext(ctx)
	if sess == nil {
		return
	}
	form := formElicitation(req.Params.Capabilities.Elicitation)
	s.mu.Lock()
	sess.FormElicitation = form
	s.mu.Unlock()
	if s.opts.Store == nil {
		return
	}
	rec, ok, err := s.opts.Store.GetSession(sess.ID)
	if err != nil || !ok {
		return
	}
	rec.ClientName, rec.ClientVersion = req.Params.ClientInfo.Name, req.Params.ClientInfo.Version
	rec.ProtocolVersion, rec.FormElicitation = res.ProtocolVersion, form
	s.record(rec)
}

func (s *Server) onUnregister(ctx context.Context, cs server.ClientSession) {
	s.mu.Lock()
	sess := s.sessions[cs.SessionID()]
	delete(s.sessions, cs.SessionID())
	s.mu.Unlock()
	if sess == nil {
		return
	}
	s.log.Debug("session closed", "session", sess.ID)
	if sess.Transport != "http" {
		// stdio and in-process sessions end with their connection. An HTTP
		// session ends on DELETE or the idle TTL (sessionIDs.Terminate), not
		// when mcp-go lets go of it.
		s.endSession(sess.ID)
	}
}

// endSession records that a session ended.
func (s *Server) endSession(id string) {
	s.mu.Lock()
	delete(s.sessions, id)
	delete(s.pending, id)
	s.mu.Unlock()
	s.up.mu.Lock()
	delete(s.up.promoted, id)
	s.up.mu.Unlock()
	if s.opts.OnSessionEnd != nil {
		s.opts.OnSessionEnd(id)
	}
	if s.opts.Store == nil {
		return
	}
	if err := s.opts.Store.EndSession(id, time.Now()); err != nil {
		s.log.Warn("record session end", "session", id, "error", err)
	}
}

// resumable reports whether id is an HTTP session of an earlier run that
// never ended.
func (s *Server) resumable(id string) bool {
	if s.opts.Store == nil {
		return false
	}
	rec, ok, err := s.opts.Store.GetSession(id)
	return err == nil && ok && rec.Transport == "http" && rec.EndedAt == nil
}

func (s *Server) record(rec store.Session) {
	if s.opts.Store == nil {
		return
	}
	if err := s.opts.Store.PutSession(rec); err != nil {
		s.log.Warn("record session", "session", rec.ID, "error", err)
	}
}

// Sessions returns a snapshot of the live sessions.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, *ss)
	}
	return out
}

func randomID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
