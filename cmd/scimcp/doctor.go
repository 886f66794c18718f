package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sciencediscovery/scimcp/mcpserver/sources"
)

// probe is one thing scimcp can use, how to check for it, and how to get it.
type probe struct {
	what    string
	usedBy  string
	command string   // executable looked up on PATH
	version []string // arguments that print a version
	install string   // exact command to get it
}

var probes = []probe{
	{"bubblewrap", "run_shell sandbox", "bwrap", []string{"--version"}, "apt-get install -y bubblewrap"},
	{"poppler pdftotext", "paper_extract_pdf", "pdftotext", []string{"-v"}, "apt-get install -y poppler-utils"},
	{"python3", "Python environments", "python3", []string{"--version"}, "apt-get install -y python3 python3-venv"},
	{"R", "R environments", "Rscript", []string{"--version"}, "apt-get install -y --no-install-recommends r-base-core"},
	{"Slurm", "the Slurm runner", "sbatch", []string{"--version"}, "apt-get install -y slurm-wlm"},
	{"ripgrep", "fast searches in run_shell", "rg", []string{"--version"}, "apt-get install -y ripgrep"},
	{"git", "workspace history", "git", []string{"--version"}, "apt-get install -y git"},
}

// sourceCheckTimeout bounds how long doctor waits for one source.
const sourceCheckTimeout = 20 * time.Second

// doctor prints what this machine offers and the exact command to get what
// is missing, and, given serve's --sources or --config, whether each
// configured MCP source starts and lists its tools. It only reports; it
// changes nothing. It exits 1 when a configured source fails.
func doctor(args []string, w, stderr io.Writer) int {
	cfg, err := parseServe(args, os.Getenv)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "scimcp doctor:", err)
		return 2
	}
	srcs, err := cfg.sourceConfigs()
	if err != nil {
		fmt.Fprintln(stderr, "scimcp doctor:", err)
		return 2
	}
	fmt.Fprintf(w, "scimcp %s on %s/%s, uid %d\n\n", fullVersion(), runtime.GOOS, runtime.GOARCH, os.Getuid())
	var missing []string
	for _, p := range probes {
		path, err := exec.LookPath(p.command)
		if err != nil {
			fmt.Fprintf(w, "  missing  %-18s (%s): %s\n", p.what, p.usedBy, p.install)
			missing = append(missing, p.install)
			continue
		}
		out, _ := exec.Command(path, p.version...).CombinedOutput()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		fmt.Fprintf(w, "  ok       %-18s (%s): %s %s\n", p.what, p.usedBy, path, line)
	}
	fmt.Fprintf(w, "\n  cgroups: %s\n", cgroupMode())
	if _, err := os.Stat("/proc/sys/user/max_user_namespaces"); err == nil {
		data, _ := os.ReadFile("/proc/sys/user/max_user_namespaces")
		fmt.Fprintf(w, "  user namespaces: max %s\n", strings.TrimSpace(string(data)))
	}
	if len(missing) > 0 {
		fmt.Fprintln(w, "\nThe base tools (list_files, read_file) need none of these. To install everything missing:")
		fmt.Fprintf(w, "  apt-get update && %s\n", strings.Join(missing, " && "))
	} else {
		fmt.Fprintln(w, "\nEverything scimcp can use is here.")
	}
	if len(srcs) == 0 {
		return 0
	}
	fmt.Fprintf(w, "\nMCP sources (each started, initialized and listed; up to %s each):\n", sourceCheckTimeout)
	failed := 0
	for _, c := range srcs {
		if !checkSource(w, c) {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "\n%d of %d sources failed; `scimcp serve` keeps serving without them and retries them with backoff.\n", failed, len(srcs))
		return 1
	}
	fmt.Fprintln(w, "\nEvery source answered.")
	return 0
}

// checkSource starts one source as serve would, waits until it has listed
// its tools or failed, reports, and stops it.
func checkSource(w io.Writer, c sources.Config) bool {
	what := c.Command
	if c.URL != "" {
		what = c.URL
	}
	if c.Disabled {
		fmt.Fprintf(w, "  disabled %-18s %s\n", c.Name, what)
		return true
	}
	tools := make(chan int, 1)
	src := sources.New(c, sources.Options{
		Log: hclog.NewNullLogger(),
		OnTools: func(_ string, ts []sources.Tool) {
			select {
			case tools <- len(ts):
			default:
			}
		},
	})
	src.Start()
	defer src.Stop()
	deadline := time.After(sourceCheckTimeout)
	for {
		select {
		case n := <-tools:
			fmt.Fprintf(w, "  ok       %-18s %s: %d tools (served as mcp__%s__<tool>)\n", c.Name, what, n, c.Name)
			return true
		case <-deadline:
			st, err := src.State()
			fmt.Fprintf(w, "  failed   %-18s %s: no tool list within %s (state %s%s)\n", c.Name, what, sourceCheckTimeout, st, errText(err))
			return false
		case <-time.After(50 * time.Millisecond):
			if st, err := src.State(); st == sources.StateBackoff && err != nil {
				fmt.Fprintf(w, "  failed   %-18s %s: %v\n", c.Name, what, err)
				return false
			}
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func cgroupMode() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2 (unified)"
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		return "v1 (hybrid or legacy)"
	}
	return "not found"
}
