// Package sources runs the upstream MCP servers whose tools scimcp serves as
// mcp__<source>__<tool>: each enabled source is a supervised client that is
// started, initialized, asked for its tools (with their exact raw schemas),
// restarted with backoff when it dies, re-initialized when its HTTP session
// ends, and re-listed when it says its tools changed.
//
// # Supervision contract
//
//	stopped ──Start──► starting ──ok──► ready ──(dies, session lost)──► backoff ──► starting
//	                      └──fail──► backoff                 ready ──Stop──► stopped
//
// Start returns at once; the source becomes ready in the background. Tools
// returns the last tool list seen (empty until the first listing). Call fails
// with a clear error while the source is not ready; it never blocks the
// server. Stop is idempotent and ends the child process of a stdio source.
package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Config is one source, in the shape users keep for Claude Desktop and in
// Claude Code's .mcp.json: either a command (stdio) or a URL (HTTP).
type Config struct {
	Name string `json:"-"`
	// stdio
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	// http
	Type    string            `json:"type,omitempty"` // "stdio" (default with command), "http" or "streamable-http"
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// HeadersFile names a JSON object file of extra headers (secrets kept
	// out of the config).
	HeadersFile string `json:"headersFile,omitempty"`
	// Disabled keeps a source in the file but does not start it.
	Disabled bool `json:"disabled,omitempty"`
}

// File is a sources file: {"mcpServers": {"name": {...}, ...}}.
type File struct {
	MCPServers map[string]Config `json:"mcpServers"`
}

// IsHTTP reports whether the source is reached over HTTP.
func (c Config) IsHTTP() bool {
	return c.URL != "" || c.Type == "http" || c.Type == "streamable-http" || c.Type == "sse"
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Load reads the sources of a file. A missing "mcpServers" key yields none.
func Load(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sources file: %w", err)
	}
	return Parse(data)
}

// Parse reads the sources of a JSON document with an "mcpServers" object;
// other keys are ignored, so the main config file can hold the same block.
func Parse(data []byte) ([]Config, error) {
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	names := make([]string, 0, len(f.MCPServers))
	for n := range f.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Config
	var errs []error
	for _, n := range names {
		c := f.MCPServers[n]
		c.Name = n
		if err := c.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

func (c Config) validate() error {
	switch {
	case !namePattern.MatchString(c.Name):
		return fmt.Errorf("source %q: names are 1–64 characters of letters, digits, '_', '-', '.'", c.Name)
	case c.IsHTTP() && c.URL == "":
		return fmt.Errorf("source %q: type %q needs a url", c.Name, c.Type)
	case c.IsHTTP() && c.Command != "":
		return fmt.Errorf("source %q: give either command (stdio) or url (http), not both", c.Name)
	case !c.IsHTTP() && c.Command == "":
		return fmt.Errorf("source %q: needs a command (stdio) or a url (http)", c.Name)
	case c.IsHTTP() && !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://"):
		return fmt.Errorf("source %q: url must start with http:// or https://", c.Name)
	case c.Type == "sse":
		return fmt.Errorf("source %q: the legacy SSE transport is not supported; use the server's streamable HTTP endpoint", c.Name)
	}
	return nil
}

// headers returns the configured headers plus those of HeadersFile.
func (c Config) headers() (map[string]string, error) {
	h := map[string]string{}
	for k, v := range c.Headers {
		h[k] = os.ExpandEnv(v)
	}
	if c.HeadersFile != "" {
		data, err := os.ReadFile(c.HeadersFile)
		if err != nil {
			return nil, fmt.Errorf("source %q: headers file: %w", c.Name, err)
		}
		var extra map[string]string
		if err := json.Unmarshal(data, &extra); err != nil {
			return nil, fmt.Errorf("source %q: headers file %s: %w", c.Name, c.HeadersFile, err)
		}
		for k, v := range extra {
			h[k] = v
		}
	}
	return h, nil
}
