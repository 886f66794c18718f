package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"
)

// Config lists the servers to compare and, for each, how every scenario maps
// onto its tools. It is the -config file's format; -print-config shows the
// effective one.
type Config struct {
	// Baseline names the server the others are compared with (ratios are
	// other / baseline). Default: the first server.
	Baseline string         `json:"baseline,omitempty"`
	Servers  []ServerConfig `json:"servers"`
}

// ServerConfig is one server under test. Exactly one of Command (stdio) or
// URL (streamable HTTP) is required; with both, Command is launched by the
// harness (once per process it needs) and URL is where it serves.
//
// Strings in Command, Env, URL and in scenario arguments may hold
// placeholders: {fixtures} {tree} {flat} {big} {small} (absolute paths of the
// generated fixtures), {tmp} (a fresh empty folder for each process),
// {port} (a free loopback port for each process) and, in a scenario's
// arguments, {ref} (the ref its setup call returned).
type ServerConfig struct {
	Name    string            `json:"name"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
	URL     string            `json:"url,omitempty"`
	// Scenarios maps a scenario id (see scenarioList) to a tool call. A
	// scenario with no entry is reported as not supported.
	Scenarios map[string]*Mapping `json:"scenarios,omitempty"`
	// Only, when set, limits this server to these scenario ids (it has no
	// row in the others), e.g. a second configuration of the same server.
	Only []string `json:"only,omitempty"`
}

// runs reports whether the server takes part in a scenario.
func (s *ServerConfig) runs(id string) bool {
	if len(s.Only) == 0 {
		return true
	}
	if id == scListFirst {
		id = scColdStart
	}
	for _, o := range s.Only {
		if o == id {
			return true
		}
	}
	return false
}

// Mapping is how one server runs one scenario.
type Mapping struct {
	Tool string         `json:"tool,omitempty"`
	Args map[string]any `json:"args,omitempty"`
	// Page, when set, checks the result's text holds this page of a numbered
	// fixture file; a result that does not is a wrong answer.
	Page *PageCheck `json:"page,omitempty"`
	// ExpectText, when set, must occur in the result's text.
	ExpectText string `json:"expect_text,omitempty"`
	// Setup is called once before the measured calls; the ref of a stored
	// result it returns (_meta["scimcp/output"].ref, or the first ref_… in its
	// text) replaces {ref} in Args.
	Setup *Mapping `json:"setup,omitempty"`
	// Unsupported, when set, reports the scenario as not supported with this
	// reason, without calling anything.
	Unsupported string `json:"unsupported,omitempty"`
	// Note is printed under the table: what this server's version of the
	// scenario really does when it differs from the others'.
	Note string `json:"note,omitempty"`
	// Closest marks a mapping that is only the closest equivalent the server
	// offers; its ratio is flagged.
	Closest bool `json:"closest,omitempty"`
	// MaxRuns, when set, caps the measured calls of this server below -runs
	// (for a very slow equivalent that would otherwise dominate the run).
	MaxRuns int `json:"max_runs,omitempty"`
	// WaitMs, when set, polls tools/list for up to this long until the tool
	// (or WaitFor) appears: tools of upstream servers that connect in the
	// background.
	WaitMs  int    `json:"wait_ms,omitempty"`
	WaitFor string `json:"wait_for,omitempty"`
}

// Scenario ids, in the order they run and are reported.
const (
	scColdStart   = "cold_start"
	scListFirst   = "tools_list_first"
	scListWarm    = "tools_list_warm"
	scList500     = "list_500"
	scListTree    = "list_tree"
	scFarPage     = "far_page"
	scShellEcho   = "shell_echo"
	scInflight1   = "inflight_1_client"
	scInflight8   = "inflight_8_clients"
	scStoredRead  = "stored_output"
	scToolSearch  = "tool_search"
	scProxiedCall = "proxied_call"
)

type scenarioInfo struct {
	id   string
	what string
	// mapped: the scenario calls a tool from the server's mapping; the
	// others are protocol-level and run on every server.
	mapped bool
	// mappingOf names the mapping a scenario uses when it is not its own id.
	mappingOf string
	// optional scenarios are for tools that may not exist yet.
	optional bool
}

var scenarioList = []scenarioInfo{
	{id: scColdStart, what: "spawn the server, measure until the initialize response"},
	{id: scListFirst, what: "first tools/list on a fresh process"},
	{id: scListWarm, what: "tools/list on a warm session"},
	{id: scList500, what: "a 500-entry listing", mapped: true},
	{id: scListTree, what: "list the 5,000-file nested tree", mapped: true},
	{id: scFarPage, what: "~40 KiB page at line 600,000 of the 50 MiB file, checked", mapped: true},
	{id: scShellEcho, what: "shell round trip: echo hi", mapped: true},
	{id: scInflight1, what: "small-page reads, N in flight from one client, checked", mapped: true, mappingOf: "small_page"},
	{id: scInflight8, what: "small-page reads from 8 clients at once, checked", mapped: true, mappingOf: "small_page"},
	{id: scStoredRead, what: "query a stored large result (read_tool_output)", mapped: true, optional: true},
	{id: scToolSearch, what: "tool_search over deferred tools", mapped: true, optional: true},
	{id: scProxiedCall, what: "a call proxied to an upstream MCP server", mapped: true, optional: true},
}

func scenarioByID(id string) (scenarioInfo, bool) {
	for _, s := range scenarioList {
		if s.id == id {
			return s, true
		}
	}
	return scenarioInfo{}, false
}

// mappingKey is the key of the mapping a scenario uses.
func (s scenarioInfo) mappingKey() string {
	if s.mappingOf != "" {
		return s.mappingOf
	}
	return s.id
}

// far page geometry: offset 600,000 lines skipped, so the page starts at line
// 600,001; 640 lines of 64 bytes are exactly 40 KiB.
const (
	farOffset    = 600_000
	farPageLines = 40 * 1024 / LineBytes
)

// presetFor returns the built-in scenario mapping for a server name, by the
// name's prefix: scimcp, filesystem (fs), desktop-commander (dc). Unknown
// names get none (only the protocol-level scenarios run).
func presetFor(name string) map[string]*Mapping {
	n := strings.ToLower(name)
	switch {
	case strings.HasPrefix(n, "scimcp"):
		return scimcpPreset()
	case strings.HasPrefix(n, "filesystem"), strings.HasPrefix(n, "fs"):
		return filesystemPreset()
	case strings.HasPrefix(n, "desktop-commander"), strings.HasPrefix(n, "dc"), strings.Contains(n, "commander"):
		return desktopCommanderPreset()
	}
	return nil
}

func bigLines() int { return FullShape.BigLines }

func scimcpPreset() map[string]*Mapping {
	return map[string]*Mapping{
		scList500: {Tool: "list_files", Args: map[string]any{},
			Note: "list_files takes no arguments: it lists the whole workspace breadth-first and stops at 500 entries (it still walks the rest to count what it left out)."},
		scListTree: {Tool: "list_files", Args: map[string]any{},
			Note: "the same call as list_500: list_files has no path argument and caps at 500 entries of the 5,613."},
		scFarPage: {Tool: "read_file", Args: map[string]any{"path": "big.txt", "offset": farOffset},
			Page: &PageCheck{First: farOffset + 1, Lines: farPageLines}},
		scShellEcho: {Tool: "run_shell", Args: map[string]any{"command": "echo hi"}, ExpectText: "hi"},
		"small_page": {Tool: "read_file", Args: map[string]any{"path": "small.txt"},
			Page: &PageCheck{First: 1, Lines: FullShape.SmallLines}},
		scStoredRead: {
			Setup: &Mapping{Tool: "list_files", Args: map[string]any{}},
			Tool:  "read_tool_output", Args: map[string]any{"ref": "{ref}", "query": "flat/f042.txt"},
			ExpectText: "flat/f042.txt",
			Note:       "setup: one list_files call (over 8 KiB, so stored under a ref); measured: read_tool_output {ref, query} finding one entry.",
		},
		scToolSearch: {Tool: "tool_search", Args: map[string]any{"query": "fit spectrum"}, ExpectText: "mcp__many__fit_spectrum", WaitMs: 15000, WaitFor: "mcp__many__fit_spectrum",
			Note: "needs an upstream source named many with the 1,000 tools of scimcp-bench -fake-upstream 1000 (peers.sh sets it up); tool_search {query: \"fit spectrum\"} must rank mcp__many__fit_spectrum."},
		scProxiedCall: {Tool: "mcp__peer__list_directory", Args: map[string]any{"path": "{flat}"}, ExpectText: "f042.txt", WaitMs: 15000,
			Note: "needs an upstream source named peer, the filesystem server on the fixtures (peers.sh sets it up): list_directory flat/ through scimcp; compare with filesystem's own list_500."},
	}
}

func filesystemPreset() map[string]*Mapping {
	tail := bigLines() - farOffset
	return map[string]*Mapping{
		scList500: {Tool: "list_directory", Args: map[string]any{"path": "{flat}"}},
		scListTree: {Tool: "directory_tree", Args: map[string]any{"path": "{tree}"},
			Note: "directory_tree returns the whole tree (5,110 entries, JSON), with no depth or entry cap."},
		scFarPage: {Tool: "read_text_file", Args: map[string]any{"path": "{big}", "tail": tail},
			Page:    &PageCheck{First: farOffset + 1, Lines: farPageLines, Take: "head"},
			Closest: true, MaxRuns: 20,
			Note: fmt.Sprintf("closest equivalent, not a page: the server has only head/tail, so read_text_file tail=%d returns the last %d lines (%.1f MiB) and the page is the first %d of them.",
				tail, tail, float64(tail*LineBytes)/(1<<20), farPageLines)},
		scShellEcho: {Unsupported: "no shell tool"},
		"small_page": {Tool: "read_text_file", Args: map[string]any{"path": "{small}"},
			Page: &PageCheck{First: 1, Lines: FullShape.SmallLines}},
		scStoredRead:  {Unsupported: "no stored results"},
		scToolSearch:  {Unsupported: "no tool_search"},
		scProxiedCall: {Unsupported: "no upstream servers"},
	}
}

func desktopCommanderPreset() map[string]*Mapping {
	return map[string]*Mapping{
		scList500: {Tool: "list_directory", Args: map[string]any{"path": "{flat}", "depth": 1}},
		scListTree: {Tool: "list_directory", Args: map[string]any{"path": "{tree}", "depth": 3},
			Note: "list_directory depth=3 (it shows at most 100 entries of each nested folder: all 5,110 here)."},
		scFarPage: {Tool: "read_file", Args: map[string]any{"path": "{big}", "offset": farOffset, "length": farPageLines},
			Page: &PageCheck{First: farOffset + 1, Lines: farPageLines}},
		scShellEcho: {Tool: "start_process", Args: map[string]any{"command": "echo hi", "timeout_ms": 5000}, ExpectText: "hi",
			Note: "start_process runs the command in the user's shell, unsandboxed."},
		"small_page": {Tool: "read_file", Args: map[string]any{"path": "{small}", "offset": 0, "length": FullShape.SmallLines},
			Page: &PageCheck{First: 1, Lines: FullShape.SmallLines}},
		scStoredRead:  {Unsupported: "no stored results"},
		scToolSearch:  {Unsupported: "no tool_search"},
		scProxiedCall: {Unsupported: "no upstream servers"},
	}
}

// parseServerFlag parses -server NAME=CMD (a command line, split like a
// shell would on spaces and quotes) or NAME=URL.
func parseServerFlag(v string) (ServerConfig, error) {
	name, rest, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(rest) == "" {
		return ServerConfig{}, fmt.Errorf("-server %q: want NAME=COMMAND [ARGS…] or NAME=http://HOST:PORT/PATH", v)
	}
	sc := ServerConfig{Name: name, Scenarios: presetFor(name)}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		sc.URL = rest
		return sc, nil
	}
	words, err := splitWords(rest)
	if err != nil {
		return ServerConfig{}, fmt.Errorf("-server %s: %w", name, err)
	}
	sc.Command = words
	return sc, nil
}

// splitWords splits a command line on unquoted white space; single and
// double quotes group, a backslash escapes the next character (outside single
// quotes).
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool
		quote rune
		esc   bool
	)
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, in = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case unicode.IsSpace(r):
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 || esc {
		return nil, fmt.Errorf("unterminated quote or escape in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// loadConfig reads a -config file. A server with no "scenarios" gets the
// built-in mapping for its name; one with "scenarios" gets the built-in
// mapping with those entries laid over it.
func loadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		base := presetFor(s.Name)
		if base == nil {
			base = map[string]*Mapping{}
		}
		for k, m := range s.Scenarios {
			base[k] = m
		}
		s.Scenarios = base
	}
	return &c, nil
}

// validate checks a config before anything is spawned.
func (c *Config) validate() error {
	if len(c.Servers) == 0 {
		return fmt.Errorf("no servers: give -server NAME=COMMAND (repeatable) or -config FILE")
	}
	seen := map[string]bool{}
	for _, s := range c.Servers {
		if s.Name == "" {
			return fmt.Errorf("a server has no name")
		}
		if seen[s.Name] {
			return fmt.Errorf("server %q is listed twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Command) == 0 && s.URL == "" {
			return fmt.Errorf("server %q has neither a command nor a url", s.Name)
		}
		for _, o := range s.Only {
			if _, ok := scenarioByID(o); !ok {
				return fmt.Errorf("server %q: unknown scenario %q in only", s.Name, o)
			}
		}
		keys := make([]string, 0, len(s.Scenarios))
		for k := range s.Scenarios {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m := s.Scenarios[k]
			if m == nil {
				continue
			}
			if _, ok := scenarioByID(k); !ok && k != "small_page" {
				return fmt.Errorf("server %q: unknown scenario %q", s.Name, k)
			}
			if m.Unsupported == "" && m.Tool == "" {
				return fmt.Errorf("server %q, scenario %q: give a tool or unsupported", s.Name, k)
			}
			if m.Page != nil && m.Page.Take != "" && m.Page.Take != "head" && m.Page.Take != "tail" {
				return fmt.Errorf("server %q, scenario %q: page.take is head or tail", s.Name, k)
			}
		}
	}
	if c.Baseline != "" && !seen[c.Baseline] {
		return fmt.Errorf("baseline %q is not one of the servers", c.Baseline)
	}
	return nil
}

// expander replaces placeholders in strings.
type expander map[string]string

func (e expander) str(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	for k, v := range e {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// value expands placeholders in every string of a JSON-like value.
func (e expander) value(v any) any {
	switch x := v.(type) {
	case string:
		return e.str(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, vv := range x {
			out[k] = e.value(vv)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = e.value(vv)
		}
		return out
	}
	return v
}

func (e expander) with(k, v string) expander {
	out := make(expander, len(e)+1)
	for kk, vv := range e {
		out[kk] = vv
	}
	out[k] = v
	return out
}
