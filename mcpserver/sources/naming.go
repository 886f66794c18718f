package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxToolName is the longest tool name scimcp exposes (the limit many MCP
// clients and model APIs enforce).
const MaxToolName = 64

// Prefix starts every upstream tool's exposed name.
const Prefix = "mcp__"

// ExposedName is the name an upstream tool is served under:
// mcp__<source>__<tool>, with characters outside [A-Za-z0-9_-] replaced by
// '_', and, when that is longer than MaxToolName, truncated and ended with
// '_' and 8 hex digits of a hash of the original source and tool names, so
// names stay unique and stable across restarts.
func ExposedName(source, tool string) string {
	name := Prefix + sanitize(source) + "__" + sanitize(tool)
	if len(name) <= MaxToolName {
		return name
	}
	sum := sha256.Sum256([]byte(source + "\x00" + tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	return name[:MaxToolName-len(suffix)] + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
