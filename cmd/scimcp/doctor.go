package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
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

// doctor prints what this machine offers and the exact command to get what
// is missing. It only reports; it changes nothing.
func doctor(w io.Writer) int {
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
	return 0
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
