// Command scimcp-bench drives MCP servers through mcp-go's client with the
// same scenarios, so scimcp can be compared with its peers on one machine in
// one run: cold start, tools/list, listings, a far page of a 50 MiB file
// (checked line by line), a shell round trip, many reads in flight, and the
// scimcp-only stored-result reads. It makes its own fixtures, alternates
// between servers on every repetition, and reports p50/p95/p99 latency,
// calls/s, bytes on the wire, errors, wrong answers and peak RSS as a table
// (and JSON with -json, Markdown with -md).
//
//	scimcp-bench -server scimcp='bin/scimcp serve --workspace {fixtures} --data {tmp}' \
//	             -server filesystem='node …/server-filesystem/dist/index.js {fixtures}'
//	scimcp-bench -config servers.json -json out.json
//
// See docs/BENCHMARKS.md for the method and cmd/scimcp-bench/peers.sh for a
// full run against the filesystem server and Desktop Commander.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type serverFlags []ServerConfig

func (s *serverFlags) String() string { return fmt.Sprint(len(*s)) }

func (s *serverFlags) Set(v string) error {
	sc, err := parseServerFlag(v)
	if err != nil {
		return err
	}
	*s = append(*s, sc)
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scimcp-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var servers serverFlags
	fs.Var(&servers, "server", "a server: NAME=COMMAND [ARGS…] (stdio) or NAME=URL (streamable HTTP); repeatable. NAME picks the built-in scenario mapping: scimcp…, filesystem…/fs…, desktop-commander…/dc…")
	var (
		configPath = fs.String("config", "", "JSON config listing servers and their scenario → tool mappings (see -print-config)")
		baseline   = fs.String("baseline", "", "server the others are compared with (default: the config's, else the first)")
		runs       = fs.Int("runs", 100, "measured calls per server for each latency scenario")
		coldRuns   = fs.Int("cold-runs", 20, "spawns per server for cold start")
		warmup     = fs.Int("warmup", 3, "unmeasured calls per client before each scenario (the first is reported as 'first')")
		rounds     = fs.Int("rounds", 3, "rounds per server for the in-flight scenarios")
		duration   = fs.Duration("duration", 2*time.Second, "length of one in-flight round")
		inflight   = fs.Int("inflight", 64, "calls in flight in the in-flight scenarios")
		clients    = fs.Int("clients", 8, "clients of the inflight_8_clients scenario")
		out        = fs.String("out", filepath.Join(os.TempDir(), "scimcp-bench"), "scratch folder: fixtures and per-process temporary folders")
		jsonPath   = fs.String("json", "", "also write the report as JSON to this file")
		mdPath     = fs.String("md", "", "also write the table as Markdown to this file")
		only       = fs.String("scenarios", "", "comma-separated scenario ids to run (default all): "+scenarioIDs())
		timeout    = fs.Duration("timeout", 60*time.Second, "bound of one request (and of a server's start)")
		printCfg   = fs.Bool("print-config", false, "print the effective config as JSON and exit")
		quiet      = fs.Bool("q", false, "no progress on stderr")
		fakeUp     = fs.Int("fake-upstream", 0, "serve N stand-in tools as an MCP server on stdin/stdout and do nothing else (an upstream source for scimcp's tool_search scenario)")
		label      = fs.String("label", "", "free text kept in the report (e.g. the commits under test)")
		clientMode = fs.String("client", "light", "light: tools/call through the mcp-go client's transport, decoding only content, isError and _meta; full: client.CallTool (mcp.ParseCallToolResult)")
		cpuProfile = fs.String("cpuprofile", "", "write the harness's own CPU profile to this file (to see what the client costs)")
	)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scimcp-bench [flags] -server NAME=COMMAND… | -config FILE")
		fmt.Fprintln(stderr, "\nPlaceholders in commands, env, urls and arguments: {fixtures} {tree} {flat} {big} {small} {tmp} {port} {ref}.")
		fmt.Fprintln(stderr, "\nScenarios:")
		for _, s := range scenarioList {
			fmt.Fprintf(stderr, "  %-20s %s\n", s.id, s.what)
		}
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *fakeUp > 0 {
		if err := serveFakeUpstream(*fakeUp, os.Stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "scimcp-bench:", err)
			return 1
		}
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scimcp-bench: unexpected arguments %q\n", fs.Args())
		return 2
	}

	cfg := &Config{}
	if *configPath != "" {
		c, err := loadConfig(*configPath)
		if err != nil {
			fmt.Fprintln(stderr, "scimcp-bench:", err)
			return 2
		}
		cfg = c
	}
	cfg.Servers = append(cfg.Servers, servers...)
	if *baseline != "" {
		cfg.Baseline = *baseline
	}
	if cfg.Baseline == "" && len(cfg.Servers) > 0 {
		cfg.Baseline = cfg.Servers[0].Name
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "scimcp-bench:", err)
		return 2
	}
	if *printCfg {
		b, _ := json.MarshalIndent(cfg, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	var sel map[string]bool
	if *only != "" {
		sel = map[string]bool{}
		for _, id := range strings.Split(*only, ",") {
			id = strings.TrimSpace(id)
			if _, ok := scenarioByID(id); !ok {
				fmt.Fprintf(stderr, "scimcp-bench: unknown scenario %q (have %s)\n", id, scenarioIDs())
				return 2
			}
			sel[id] = true
		}
	}
	if *clientMode != "light" && *clientMode != "full" {
		fmt.Fprintln(stderr, "scimcp-bench: -client is light or full")
		return 2
	}
	if *runs < 1 || *coldRuns < 1 || *rounds < 1 || *inflight < 1 || *clients < 1 || *warmup < 0 || *duration <= 0 {
		fmt.Fprintln(stderr, "scimcp-bench: -runs, -cold-runs, -rounds, -inflight, -clients and -duration must be positive")
		return 2
	}

	logf := func(format string, a ...any) {
		if !*quiet {
			fmt.Fprintf(stderr, "scimcp-bench: "+format+"\n", a...)
		}
	}
	if err := os.MkdirAll(filepath.Join(*out, "tmp"), 0o755); err != nil {
		fmt.Fprintln(stderr, "scimcp-bench:", err)
		return 1
	}
	t0 := time.Now()
	fx, err := MakeFixtures(*out, FullShape)
	if err != nil {
		fmt.Fprintln(stderr, "scimcp-bench: fixtures:", err)
		return 1
	}
	logf("fixtures in %s (%.1fs): %d-file tree, %d-file flat folder, %s (%d lines), %s",
		fx.Root, time.Since(t0).Seconds(), fx.Shape.TreeFileCount(), fx.Shape.FlatFiles, fx.Big, fx.Shape.BigLines, fx.Small)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "scimcp-bench:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "scimcp-bench:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &Harness{scratch: *out, exp: fixtureExpander(fx), timeout: *timeout, full: *clientMode == "full", logf: logf}
	rp := &Report{
		Started:  time.Now().UTC(),
		Command:  "scimcp-bench " + strings.Join(args, " "),
		Label:    *label,
		Machine:  machine(),
		Baseline: cfg.Baseline,
		Settings: map[string]any{
			"runs": *runs, "cold_runs": *coldRuns, "warmup": *warmup, "rounds": *rounds,
			"round_duration": duration.String(), "inflight": *inflight, "clients": *clients,
			"timeout": timeout.String(), "protocol_version": protocolVersion, "client": *clientMode,
		},
		Fixtures: map[string]any{
			"root": fx.Root, "tree_files": fx.Shape.TreeFileCount(), "tree_dirs": fx.Shape.TreeGroups * (1 + fx.Shape.TreeSubs),
			"flat_files": fx.Shape.FlatFiles, "big_lines": fx.Shape.BigLines, "big_bytes": fx.Shape.BigLines * LineBytes,
			"line_bytes": LineBytes, "small_lines": fx.Shape.SmallLines,
		},
	}
	for _, s := range cfg.Servers {
		rp.Servers = append(rp.Servers, ServerReport{Name: s.Name, Command: s.Command, URL: s.URL})
	}
	b := &Bench{
		h: h, cfg: cfg, report: rp, runs: *runs, coldRuns: *coldRuns, warmup: *warmup,
		rounds: *rounds, duration: *duration, inflight: *inflight, clients: *clients, only: sel,
	}
	b.Run(ctx)
	rp.Seconds = time.Since(rp.Started).Seconds()
	rp.Machine.LoadAvgEnd = loadAvg()
	rp.checkTargets()

	if rp.Label != "" {
		fmt.Fprintln(stdout, rp.Label)
	}
	rp.WriteText(stdout)
	code := 0
	if *jsonPath != "" {
		if err := rp.WriteJSON(*jsonPath); err != nil {
			fmt.Fprintln(stderr, "scimcp-bench:", err)
			code = 1
		}
	}
	if *mdPath != "" {
		f, err := os.Create(*mdPath)
		if err == nil {
			rp.WriteMarkdown(f)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(stderr, "scimcp-bench:", err)
			code = 1
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "scimcp-bench: interrupted; the report is partial")
		return 130
	}
	return code
}

func fixtureExpander(fx *Fixtures) expander {
	return expander{"fixtures": fx.Root, "tree": fx.Tree, "flat": fx.Flat, "big": fx.Big, "small": fx.Small}
}

func scenarioIDs() string {
	ids := make([]string, len(scenarioList))
	for i, s := range scenarioList {
		ids[i] = s.id
	}
	return strings.Join(ids, ",")
}
