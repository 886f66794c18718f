package toolkit

import "context"

type sessionKey struct{}

// WithSession returns ctx carrying the scimcp session id of the caller.
// mcpserver sets it on every tool call; handlers that keep per-session state
// (stored outputs, executions, timers) read it with SessionFrom.
func WithSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionKey{}, id)
}

// SessionFrom returns the caller's session id, or "" outside a session.
func SessionFrom(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}
