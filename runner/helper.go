package runner

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// HelperCommand is the argument that makes the scimcp binary act as the
// sandbox helper: `scimcp __sandbox [--cgroup FILE]... [--rlimit NAME=N]... -- PROG ARGS...`.
//
// The unsandboxed (development) mode runs commands through it: it joins the
// execution's cgroups before anything else runs, so not one process of the
// tree escapes the limits (a parent cannot move a child that has already
// forked), sets rlimits where cgroups are unavailable, and then replaces
// itself with the command (execve), keeping its pid. The bwrap sandbox needs
// no helper: bwrap waits on --block-fd while the server confines it.
const HelperCommand = "__sandbox"

// SandboxMain is the helper's main; args follow HelperCommand. It returns an
// exit code only on failure (otherwise it execs).
func SandboxMain(args []string) int {
	var cgroupFiles []string
	limits := map[int]uint64{}
	i := 0
	for ; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			i++
			goto run
		case a == "--cgroup" && i+1 < len(args):
			cgroupFiles = append(cgroupFiles, args[i+1])
			i++
		case a == "--rlimit" && i+1 < len(args):
			name, val, _ := strings.Cut(args[i+1], "=")
			n, err := strconv.ParseUint(val, 10, 64)
			res, ok := rlimitNames[name]
			if err != nil || !ok {
				fmt.Fprintf(os.Stderr, "scimcp sandbox helper: bad --rlimit %q\n", args[i+1])
				return 126
			}
			limits[res] = n
			i++
		default:
			fmt.Fprintf(os.Stderr, "scimcp sandbox helper: unexpected argument %q\n", a)
			return 126
		}
	}
run:
	if i >= len(args) {
		fmt.Fprintln(os.Stderr, "scimcp sandbox helper: no command after --")
		return 126
	}
	self := strconv.Itoa(os.Getpid())
	for _, f := range cgroupFiles {
		if err := os.WriteFile(f, []byte(self), 0); err != nil {
			fmt.Fprintf(os.Stderr, "scimcp sandbox helper: join %s: %v\n", f, err)
			return 126
		}
	}
	for res, n := range limits {
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			fmt.Fprintf(os.Stderr, "scimcp sandbox helper: setrlimit: %v\n", err)
			return 126
		}
	}
	prog := args[i]
	if !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scimcp sandbox helper: %v\n", err)
			return 127
		}
		prog = p
	}
	err := syscall.Exec(prog, args[i:], os.Environ())
	fmt.Fprintf(os.Stderr, "scimcp sandbox helper: exec %s: %v\n", prog, err)
	return 127
}

var rlimitNames = map[string]int{
	"as":    syscall.RLIMIT_AS,
	"nproc": 6, // RLIMIT_NPROC on Linux
	"core":  syscall.RLIMIT_CORE,
	"fsize": syscall.RLIMIT_FSIZE,
}

func rlimitName(res int) string {
	for k, v := range rlimitNames {
		if v == res {
			return k
		}
	}
	return strconv.Itoa(res)
}
