// Command scimcp serves a governed scientific workspace to AI agents over MCP.
//
//	scimcp serve [--stdio] [--http ADDR] [--workspace DIR] [--data DIR] ...
//	scimcp version
//	scimcp doctor
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/mcpserver"
	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/downloads"
	"github.com/sciencediscovery/scimcp/workspace/fetch"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
	"github.com/sciencediscovery/scimcp/workspace/timers"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const shutdownGrace = 5 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case runner.HelperCommand:
		return runner.SandboxMain(args[1:])
	case "serve":
		if err := serve(args[1:], stdin, stdout, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(stderr, "scimcp:", err)
			return 1
		}
		return 0
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "scimcp", fullVersion())
		return 0
	case "doctor":
		return doctor(args[1:], stdout, stderr)
	case "help", "--help", "-h":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "scimcp: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `scimcp: a governed scientific workspace for AI agents, served over MCP.

Commands:
  serve     serve the tools (stdio by default; --http ADDR for streamable HTTP)
  doctor    show what this machine offers and how to install what is missing;
            with --sources/--config, check that each MCP source starts
  version   print the version

Run "scimcp serve --help" for the flags.
`)
}

func fullVersion() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseServe(args, os.Getenv)
	if err != nil {
		return err
	}
	if err := cfg.resolvePaths(); err != nil {
		return err
	}
	level := hclog.LevelFromString(cfg.LogLevel)
	if level == hclog.NoLevel {
		return fmt.Errorf("--log-level %q: use trace, debug, info, warn or error", cfg.LogLevel)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "scimcp", Level: level, Output: stderr, JSONFormat: cfg.LogJSON})
	useStdio := cfg.Stdio || cfg.HTTP == ""

	token, err := cfg.token()
	if err != nil {
		return err
	}
	if cfg.HTTP != "" {
		if err := mcpserver.CheckListenAddr(cfg.HTTP, token); err != nil {
			return err
		}
	}

	ws, err := workspace.Open(cfg.Workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	st, err := store.Open(cfg.Data, store.Options{Version: version, Workspace: cfg.Workspace})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "error", err)
		}
	}()

	outs, err := outputs.New(st, cfg.outputLimits())
	if err != nil {
		return fmt.Errorf("tool outputs: %w", err)
	}

	blobs, err := cas.Open(cfg.Data, cas.Options{})
	if err != nil {
		return fmt.Errorf("content store: %w", err)
	}
	var execs *runner.Executions
	prov, err := provenance.New(provenance.Config{Store: st, Workspace: ws, CAS: blobs,
		// A change a running execution may have made waits for that
		// execution's own scan instead of being recorded as unknown.
		Running: func() []provenance.Window {
			var ws []provenance.Window
			for _, r := range execs.Running() {
				ws = append(ws, provenance.Window{ExecutionID: r.ID, Start: r.Created})
			}
			return ws
		},
	})
	if err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	defer prov.Close()

	local, err := runner.NewLocal(runner.LocalConfig{
		Workspace: cfg.Workspace,
		Sandbox:   cfg.Sandbox,
		Network:   cfg.Network,
		Limits:    runner.Limits{Wall: cfg.ExecTimeout, MemoryBytes: cfg.ExecMemory, Procs: cfg.ExecProcs, OutputBytes: cfg.ExecLog},
		StateDir:  filepath.Join(cfg.Data, "sandbox"),
		Log:       log.Named("runner"),
	})
	if err != nil {
		return err
	}
	d := local.Describe()
	log.Info("runner ready", "runner", d.Name, "sandbox", d.Sandbox, "limits", d.Limits)
	execs, err = runner.NewExecutions(runner.Config{Store: st, Runners: []runner.Runner{local}, Log: log.Named("executions"),
		// Every file the execution created, changed or deleted gets a revision
		// before run_shell's waiters learn that it ended.
		OnEnd: func(rec runner.Execution) {
			rep, err := prov.Scan(context.Background(), toolkit.ExecutionWriter(rec))
			if err != nil {
				log.Warn("provenance scan after execution", "execution", rec.ID, "error", err)
				return
			}
			log.Debug("provenance scan after execution", "execution", rec.ID, "created", rep.Created, "modified", rep.Modified,
				"deleted", rep.Deleted, "unknown", rep.Unknown, "deferred", rep.Deferred, "took", rep.Duration)
		}})
	if err != nil {
		return fmt.Errorf("executions: %w", err)
	}
	defer execs.Shutdown(2 * time.Second)

	srcs, err := cfg.sourceConfigs()
	if err != nil {
		return err
	}

	// plans and timers reach srv only after it is set: a plan commit needs a
	// tool call, and no timer fires before timerSvc.Start.
	var srv *mcpserver.Server
	arts, err := artifacts.New(artifacts.Config{Store: st, Workspace: ws, CAS: blobs, Provenance: prov,
		OnChange: func() { srv.ArtifactsChanged() }}) // a declaration needs a tool call: srv is set by then
	if err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	planStore, err := plans.New(st, plans.Config{
		Window:   cfg.PlanWindow,
		OnChange: func(session string) { srv.NotifyResourceUpdated(session, plans.URI(session)) },
	})
	if err != nil {
		return fmt.Errorf("plans: %w", err)
	}
	timerSvc, err := timers.New(timers.Config{
		Store: st, Executions: execs, Log: log.Named("timers"),
		Deliver: func(session, text string, data map[string]any) bool {
			return srv.Deliver(session, mcpserver.Notice{Kind: "timer", Text: text, Data: data})
		},
	})
	if err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	defer timerSvc.Close() // before execs.Shutdown and st.Close

	var dl *downloads.Service
	if len(srcs) > 0 {
		dl, err = downloads.New(downloads.Config{Store: st, Workspace: ws, Provenance: prov, Artifacts: arts,
			Fetch:   fetch.New(fetch.Policy{AllowHosts: splitList(cfg.FetchAllowHosts), MaxBytes: cfg.DownloadMaxBytes, Timeout: cfg.FetchTimeout}),
			TempDir: filepath.Join(cfg.Data, "tmp", "downloads"), MaxBytes: cfg.DownloadMaxBytes})
		if err != nil {
			return err
		}
	}

	srv, err = mcpserver.New(mcpserver.Options{
		Version: version,
		Logger:  log,
		Store:   st,
		Outputs: outs,
		Tools: toolkit.Catalogue(toolkit.Services{Workspace: ws, Outputs: outs, Executions: execs, PaperRunner: local,
			Plans: planStore, Timers: timerSvc, Provenance: prov, Artifacts: arts, Downloads: dl}),
		Groups:         append(groupsOf(splitList(cfg.Groups)), autoGroups(log)...),
		ToolPolicy:     splitList(cfg.ToolPolicy),
		Sources:        srcs,
		Downloads:      dl,
		DownloadPolicy: cfg.DownloadPolicy,
		DeferredGroups: groupsOf(splitList(cfg.Deferred)),
		OnSessionEnd: func(id string) {
			timerSvc.SessionEnded(id)
			planStore.Forget(id)
		},
		AfterToolCall:     toolkit.OrchestrationHook(planStore, timerSvc),
		ArtifactResources: func() ([]mcp.Resource, error) { return toolkit.ArtifactResourceList(arts) },
		ReadArtifact:      toolkit.ReadArtifactResource(arts),
		ReadPlan: func(session, uri string) ([]mcp.ResourceContents, error) {
			return toolkit.ReadPlanResource(planStore, session, uri)
		},
	})
	if err != nil {
		return err
	}
	srv.StartSources()
	defer srv.Close()
	timerSvc.Start()
	log.Info("serving", "workspace", cfg.Workspace, "data", cfg.Data, "stdio", useStdio, "http", cfg.HTTP, "version", version)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go retain(ctx, outs, srv, cfg.OutMaxAge, log)
	// Whatever changed while the server was down has no recorded writer.
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		rep, err := prov.Scan(ctx, provenance.Writer{Kind: provenance.KindUnknown, Note: "server start"})
		if err != nil {
			log.Warn("provenance scan at start", "error", err)
			return
		}
		log.Info("provenance scan at start", "files", rep.Files, "created", rep.Created, "modified", rep.Modified,
			"deleted", rep.Deleted, "truncated", rep.Truncated, "took", rep.Duration)
	}()
	defer func() { <-scanned }() // ctx ends first (stop), then prov and st close
	retained := make(chan struct{})
	go func() {
		defer close(retained)
		retainProvenance(ctx, prov, arts, cfg.ProvMaxBytes, scanned, log)
	}()
	defer func() { <-retained }()
	errc := make(chan error, 2)

	var httpSrv *mcpserver.HTTPServer
	if cfg.HTTP != "" {
		ln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.HTTP, err)
		}
		httpSrv = srv.NewHTTPServer(mcpserver.HTTPOptions{Token: token, SessionIdleTTL: cfg.SessionTTL, AllowedOrigins: splitList(cfg.Origins)})
		log.Info("streamable HTTP ready", "url", "http://"+ln.Addr().String()+mcpserver.EndpointPath, "auth", token != "")
		go func() {
			if err := httpSrv.Serve(ln); err != nil {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}
	if useStdio {
		go func() {
			err := srv.ServeStdio(ctx, stdin, stdout)
			if err == nil {
				log.Info("stdin closed; shutting down")
			}
			errc <- err
		}()
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("signal received; shutting down")
	case runErr = <-errc:
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if httpSrv != nil {
		if err := httpSrv.Shutdown(sctx); err != nil {
			log.Warn("http shutdown", "error", err)
		}
	}
	return runErr
}

// retainEvery is how often the retention policy of stored outputs runs.
const retainEvery = time.Hour

// retain applies the stored-output retention policy now and then every
// retainEvery until ctx ends.
func retain(ctx context.Context, outs *outputs.Store, srv *mcpserver.Server, maxAge time.Duration, log hclog.Logger) {
	for {
		if n, freed, err := outs.Prune(time.Now()); err != nil {
			log.Warn("prune stored outputs", "error", err)
		} else if n > 0 {
			log.Info("pruned stored outputs", "removed", n, "bytes", freed)
		}
		// Upstream invocations' raw results are stored tool output too.
		if maxAge > 0 {
			if n, err := srv.PruneInvocations(time.Now().Add(-maxAge)); err != nil {
				log.Warn("prune MCP invocation records", "error", err)
			} else if n > 0 {
				log.Info("pruned MCP invocation records", "removed", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retainEvery):
		}
	}
}

// retainProvenance bounds the revision content kept for provenance and
// removes blobs no record names, after the start-up scan and then hourly.
func retainProvenance(ctx context.Context, prov *provenance.Index, arts *artifacts.Store, max int64, scanned <-chan struct{}, log hclog.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-scanned:
	}
	for {
		keep, err := arts.Hashes()
		if err != nil {
			log.Warn("provenance retention: list artifact contents", "error", err)
		} else {
			rep, err := prov.Retain(ctx, provenance.RetainOptions{MaxBytes: max, Protected: func(h string) bool { return keep[h] }})
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("provenance retention", "error", err)
			case rep.Dropped > 0 || rep.Swept > 0:
				log.Info("provenance retention", "kept_bytes", rep.KeptBytes, "dropped_revisions", rep.Dropped, "dropped_bytes", rep.DroppedBytes,
					"swept_blobs", rep.Swept, "swept_bytes", rep.SweptBytes)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retainEvery):
		}
	}
}

// autoGroups turns on the groups whose prerequisites this machine has.
func autoGroups(log hclog.Logger) []toolkit.Group {
	gs := []toolkit.Group{toolkit.GroupOrchestration} // plans and timers: for main sessions, always
	if _, err := exec.LookPath("pdftotext"); err == nil {
		gs = append(gs, toolkit.GroupPapers)
	} else {
		log.Info("paper_extract_pdf is off: poppler is not installed (apt-get install -y poppler-utils)")
	}
	return gs
}

func groupsOf(names []string) []toolkit.Group {
	out := make([]toolkit.Group, 0, len(names))
	for _, n := range names {
		out = append(out, toolkit.Group(strings.ToLower(n)))
	}
	return out
}
