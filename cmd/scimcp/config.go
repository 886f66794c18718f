package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sciencediscovery/scimcp/mcpserver"
	"github.com/sciencediscovery/scimcp/mcpserver/sources"
	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace/fetch"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
)

// config is everything `scimcp serve` can be told. Each field has a flag, an
// environment variable and a key of the JSON config file; flags win over the
// environment, which wins over the file, which wins over the defaults.
type config struct {
	Workspace  string
	Data       string
	Config     string
	Stdio      bool
	HTTP       string
	TokenFile  string
	Origins    string
	LogLevel   string
	LogJSON    bool
	SessionTTL time.Duration
	Groups     string
	ToolPolicy string
	Sources    string
	Deferred   string

	// Downloads (artifact_download; web_fetch later).
	ProvMaxBytes int64

	DownloadPolicy   string
	FetchAllowHosts  string
	DownloadMaxBytes int64
	FetchTimeout     time.Duration
	PlanWindow       time.Duration

	// Executions.
	Sandbox     string
	Network     bool
	ExecTimeout time.Duration
	ExecMemory  int64
	ExecProcs   int
	ExecLog     int64

	// Result bounding (the seed's SCIENCE_AGENT_TOOL_OUTPUT_* thresholds).
	OutStoreBytes   int
	OutPreviewBytes int
	OutPreviewLines int
	OutReadBytes    int
	OutAdviseBytes  int
	OutWarnBytes    int
	OutMaxAge       time.Duration
	OutMaxTotal     int64
}

// setting describes one configurable value.
type setting struct {
	name  string // flag name and config-file key
	env   string
	usage string
	ptr   any // *string, *bool, *int, *int64 or *time.Duration
}

func (c *config) settings() []setting {
	return []setting{
		{"workspace", "SCIMCP_WORKSPACE", "workspace folder the tools work in (default: the current folder)", &c.Workspace},
		{"data", "SCIMCP_DATA", "data folder for state.db, stored outputs and logs (default: a per-workspace folder under $XDG_DATA_HOME/scimcp)", &c.Data},
		{"config", "SCIMCP_CONFIG", "JSON config file whose keys are these flag names", &c.Config},
		{"stdio", "SCIMCP_STDIO", "serve MCP over stdin/stdout (the default when --http is not given)", &c.Stdio},
		{"http", "SCIMCP_HTTP", "serve streamable HTTP at ADDR/mcp, e.g. 127.0.0.1:8765", &c.HTTP},
		{"token-file", "SCIMCP_TOKEN_FILE", "file holding the bearer token HTTP clients must send (required beyond loopback)", &c.TokenFile},
		{"allowed-origins", "SCIMCP_ALLOWED_ORIGINS", "comma-separated browser origins allowed besides loopback (others get 403)", &c.Origins},
		{"log-level", "SCIMCP_LOG_LEVEL", "trace, debug, info, warn or error", &c.LogLevel},
		{"log-json", "SCIMCP_LOG_JSON", "log JSON lines (to stderr)", &c.LogJSON},
		{"session-ttl", "SCIMCP_SESSION_TTL", "reclaim HTTP sessions idle this long", &c.SessionTTL},
		{"groups", "SCIMCP_GROUPS", "comma-separated optional tool groups to turn on (base tools are always on)", &c.Groups},
		{"tool-policy", "SCIMCP_TOOL_POLICY", "comma-separated whitelist of tool names every session is limited to (empty: no limit)", &c.ToolPolicy},
		{"deferred-groups", "SCIMCP_DEFERRED_GROUPS", "comma-separated optional groups whose tools stay deferred behind tool_search, like upstream tools", &c.Deferred},
		{"plan-window", "SCIMCP_PLAN_WINDOW", "update_plan calls of a session arriving within this window of each other form one batch, of which only the last commits", &c.PlanWindow},
		{"sources", "SCIMCP_SOURCES", "JSON file of upstream MCP servers ({\"mcpServers\": {...}}, as Claude Desktop and .mcp.json keep them); the --config file may hold the same block", &c.Sources},
		{"provenance-max-bytes", "SCIMCP_PROVENANCE_MAX_BYTES", "content kept for earlier file revisions, in all (current revisions and artifact versions are always kept; past it the oldest revisions keep hash and size only; negative: no cap)", &c.ProvMaxBytes},
		{"download-policy", "SCIMCP_DOWNLOAD_POLICY", "artifact_download for clients that cannot ask their user (no form elicitation): refuse or allow", &c.DownloadPolicy},
		{"fetch-allow-hosts", "SCIMCP_FETCH_ALLOW_HOSTS", "comma-separated host or host:port entries downloads may reach although they are loopback or private (a lab server)", &c.FetchAllowHosts},
		{"download-max-bytes", "SCIMCP_DOWNLOAD_MAX_BYTES", "size cap of one download", &c.DownloadMaxBytes},
		{"fetch-timeout", "SCIMCP_FETCH_TIMEOUT", "time cap of one http(s) download", &c.FetchTimeout},
		{"sandbox", "SCIMCP_SANDBOX", "bwrap (default) or none; none runs commands UNSANDBOXED, for development only", &c.Sandbox},
		{"network", "SCIMCP_NETWORK", "let sandboxed commands reach the network", &c.Network},
		{"exec-timeout", "SCIMCP_EXEC_TIMEOUT", "wall-time limit of one execution", &c.ExecTimeout},
		{"exec-memory-bytes", "SCIMCP_EXEC_MEMORY_BYTES", "memory limit of one execution's process tree", &c.ExecMemory},
		{"exec-procs", "SCIMCP_EXEC_PROCS", "process limit of one execution's process tree", &c.ExecProcs},
		{"exec-log-bytes", "SCIMCP_EXEC_LOG_BYTES", "log kept per execution (beyond it, the last 1 MiB)", &c.ExecLog},
		{"tool-output-store-bytes", "SCIENCE_AGENT_TOOL_OUTPUT_STORE_BYTES", "tool results with more text bytes than this are stored and get a ref", &c.OutStoreBytes},
		{"tool-output-preview-bytes", "SCIENCE_AGENT_TOOL_OUTPUT_PREVIEW_BYTES", "tool results above this many bytes are shown as a head/tail preview", &c.OutPreviewBytes},
		{"tool-output-preview-lines", "SCIENCE_AGENT_TOOL_OUTPUT_PREVIEW_LINES", "tool results above this many lines are shown as a head/tail preview", &c.OutPreviewLines},
		{"tool-output-read-bytes", "SCIENCE_AGENT_TOOL_OUTPUT_READ_BYTES", "bound of one read_tool_output answer", &c.OutReadBytes},
		{"tool-output-advise-bytes", "SCIENCE_AGENT_TOOL_OUTPUT_ADVISE_BYTES", "cumulative reads of one ref before read_tool_output advises", &c.OutAdviseBytes},
		{"tool-output-warn-bytes", "SCIENCE_AGENT_TOOL_OUTPUT_WARN_BYTES", "cumulative reads of one ref before the stronger advice", &c.OutWarnBytes},
		{"tool-output-max-age", "SCIENCE_AGENT_TOOL_OUTPUT_MAX_AGE", "stored tool outputs, and MCP invocation records with their raw results, older than this are removed (0: keep forever)", &c.OutMaxAge},
		{"tool-output-max-total-bytes", "SCIENCE_AGENT_TOOL_OUTPUT_MAX_TOTAL_BYTES", "oldest stored outputs are removed beyond this total (0: no size cap)", &c.OutMaxTotal},
	}
}

func defaultConfig() config {
	l := outputs.DefaultLimits()
	return config{
		LogLevel: "info", SessionTTL: 30 * time.Minute, PlanWindow: plans.DefaultWindow,
		ProvMaxBytes:   provenance.DefaultMaxContentBytes,
		DownloadPolicy: mcpserver.DownloadRefuse, DownloadMaxBytes: fetch.DefaultMaxBytes, FetchTimeout: fetch.DefaultTimeout,
		Sandbox: runner.SandboxBwrap, ExecTimeout: runner.DefaultWall, ExecMemory: runner.DefaultMemoryBytes,
		ExecProcs: runner.DefaultProcs, ExecLog: runner.DefaultOutputBytes,
		OutStoreBytes: l.StoreAbove, OutPreviewBytes: l.PreviewBytes, OutPreviewLines: l.PreviewLines,
		OutReadBytes: l.ReadBytes, OutAdviseBytes: l.AdviseBytes, OutWarnBytes: l.WarnBytes,
		OutMaxAge: l.MaxAge, OutMaxTotal: l.MaxTotalBytes,
	}
}

func (c *config) outputLimits() outputs.Limits {
	return outputs.Limits{
		StoreAbove: c.OutStoreBytes, PreviewBytes: c.OutPreviewBytes, PreviewLines: c.OutPreviewLines,
		ReadBytes: c.OutReadBytes, AdviseBytes: c.OutAdviseBytes, WarnBytes: c.OutWarnBytes,
		MaxAge: c.OutMaxAge, MaxTotalBytes: c.OutMaxTotal,
	}
}

// parseServe reads flags, environment and config file into a config.
func parseServe(args []string, getenv func(string) string) (config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	flagVals := defaultConfig() // flags parse into a shadow copy
	shadow := flagVals.settings()
	for _, s := range shadow {
		usage := s.usage + " [$" + s.env + "]"
		switch p := s.ptr.(type) {
		case *string:
			fs.StringVar(p, s.name, *p, usage)
		case *bool:
			fs.BoolVar(p, s.name, *p, usage)
		case *time.Duration:
			fs.DurationVar(p, s.name, *p, usage)
		case *int:
			fs.IntVar(p, s.name, *p, usage)
		case *int64:
			fs.Int64Var(p, s.name, *p, usage)
		}
	}
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "Usage: scimcp serve [flags]\n\nServes the scimcp MCP tools over stdio (default) and/or streamable HTTP.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	// The config file's path itself may come from a flag or the environment.
	file := getenv("SCIMCP_CONFIG")
	if explicit["config"] {
		file = flagVals.Config
	}
	settings := c.settings()
	if file != "" {
		if err := applyFile(settings, file); err != nil {
			return c, err
		}
		c.Config = file
	}
	for _, s := range settings {
		if v, ok := lookupEnv(getenv, s.env); ok {
			if err := setValue(s, v); err != nil {
				return c, fmt.Errorf("$%s: %w", s.env, err)
			}
		}
	}
	for i, s := range settings {
		if explicit[s.name] {
			copyValue(s.ptr, shadow[i].ptr)
		}
	}
	return c, nil
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

func applyFile(settings []setting, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	known := map[string]setting{}
	for _, s := range settings {
		known[s.name] = s
	}
	for k, raw := range m {
		s, ok := known[k]
		if !ok {
			continue // keys of later sections (mcpServers, runners, ...) are read by their owners
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", file, k, err)
		}
		if err := setValue(s, fmt.Sprint(v)); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", file, k, err)
		}
	}
	return nil
}

func setValue(s setting, v string) error {
	switch p := s.ptr.(type) {
	case *string:
		*p = v
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: want true or false, got %q", s.name, v)
		}
		*p = b
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: want a duration such as 30m, got %q", s.name, v)
		}
		*p = d
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: want a whole number, got %q", s.name, v)
		}
		*p = n
	case *int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: want a whole number, got %q", s.name, v)
		}
		*p = n
	}
	return nil
}

func copyValue(dst, src any) {
	switch d := dst.(type) {
	case *string:
		*d = *src.(*string)
	case *bool:
		*d = *src.(*bool)
	case *time.Duration:
		*d = *src.(*time.Duration)
	case *int:
		*d = *src.(*int)
	case *int64:
		*d = *src.(*int64)
	}
}

// resolvePaths fills in the workspace and data defaults.
func (c *config) resolvePaths() error {
	if c.Workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		c.Workspace = wd
	}
	abs, err := filepath.Abs(c.Workspace)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	c.Workspace = abs
	if c.Data == "" {
		c.Data = defaultDataDir(abs)
	}
	c.Data, err = filepath.Abs(c.Data)
	return err
}

// defaultDataDir is $XDG_DATA_HOME/scimcp/workspaces/<name>-<hash>: one data
// folder per workspace, named so a person can tell which is which.
func defaultDataDir(workspace string) string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "share")
	}
	sum := sha256.Sum256([]byte(workspace))
	name := filepath.Base(workspace)
	if name == "/" || name == "." {
		name = "root"
	}
	return filepath.Join(base, "scimcp", "workspaces", name+"-"+hex.EncodeToString(sum[:6]))
}

func (c *config) token() (string, error) {
	if c.TokenFile == "" {
		return "", nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", errors.New("token file " + c.TokenFile + " is empty")
	}
	if len(tok) < 16 {
		return "", fmt.Errorf("token in %s is %d characters; use at least 16 (e.g. `openssl rand -hex 32 > %s`)", c.TokenFile, len(tok), c.TokenFile)
	}
	return tok, nil
}

// sourceConfigs reads the upstream sources of the --sources file and of the
// config file's mcpServers block; a name defined twice is an error.
func (c *config) sourceConfigs() ([]sources.Config, error) {
	var all []sources.Config
	seen := map[string]string{}
	for _, f := range []string{c.Config, c.Sources} {
		if f == "" {
			continue
		}
		list, err := sources.Load(f)
		if err != nil {
			return nil, err
		}
		for _, s := range list {
			if prev, dup := seen[s.Name]; dup {
				return nil, fmt.Errorf("MCP source %q is defined in %s and in %s", s.Name, prev, f)
			}
			seen[s.Name] = f
			all = append(all, s)
		}
	}
	return all, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
