package toolkit

import "context"

// Caller identifies who is calling a tool.
type Caller struct {
	// Session is the scimcp session id: per HTTP Mcp-Session-Id, and per
	// process for stdio. Stored outputs are filed under it.
	Session string
	// Owner is whose per-session state (stored outputs, executions, timers)
	// the caller may read. For HTTP it is the session id itself, which a
	// client keeps across a server restart; for stdio it is the same for
	// every stdio session of a data folder, because a stdio server has one
	// client, which restarts it at will.
	Owner string
	// Progress reports progress to the client when it asked for it (a
	// progress token); nil otherwise.
	Progress func(progress, total float64, message string)
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller. mcpserver sets it on every
// tool call.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller, or the zero Caller outside a session.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
