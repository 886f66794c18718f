package mcpserver

import (
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/toolkit"
)

// MetaOutputKey names the _meta entry of a stored result.
const MetaOutputKey = "scimcp/output"

// bound passes a result through the seed's bound (outputs.Store.Bound): the
// text contents are measured together; a stored result gets its ref in _meta
// and in the text, and a preview replaces the text when the result is too
// large. Non-text contents (images, resource links) pass unchanged.
func (s *Server) bound(c toolkit.Caller, tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	var all string
	texts := 0
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			if texts == 0 {
				all = tc.Text // the common case: one text content, no copy
			} else {
				all += "\n" + tc.Text
			}
			texts++
		}
	}
	if len(all) <= s.opts.Outputs.Limits().StoreAbove {
		return res
	}
	b, err := s.opts.Outputs.Bound(c.Owner, c.Session, tool, all)
	if err != nil {
		// The result cannot be stored: say so rather than pass an unbounded
		// result or drop it silently.
		s.log.Error("store tool output", "tool", tool, "error", err)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{mcp.NewTextContent(
			"scimcp could not store this " + tool + " result (" + err.Error() + "), and it is too large to return whole. Retry; if it persists, the data folder may be full.")}}
	}
	if !b.Stored {
		return res
	}
	out := *res
	out.Content = make([]mcp.Content, 0, len(res.Content))
	placed := false
	for _, ct := range res.Content {
		if _, ok := ct.(mcp.TextContent); ok {
			if !placed {
				out.Content = append(out.Content, mcp.NewTextContent(b.Text))
				placed = true
			}
			continue
		}
		out.Content = append(out.Content, ct)
	}
	meta := map[string]any{}
	if res.Meta != nil {
		for k, v := range res.Meta.AdditionalFields {
			meta[k] = v
		}
	}
	meta[MetaOutputKey] = map[string]any{
		"ref":     b.Record.Ref,
		"bytes":   b.Record.Bytes,
		"lines":   b.Record.Lines,
		"sha256":  b.Record.SHA256,
		"preview": b.Preview,
		"tool":    tool,
	}
	out.Meta = mcp.NewMetaFromMap(meta)
	return &out
}
