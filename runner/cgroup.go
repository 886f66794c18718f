package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where cgroups live; a variable for tests.
var cgroupRoot = "/sys/fs/cgroup"

// cgroupParent is the folder scimcp creates its per-execution groups in.
const cgroupParent = "scimcp"

// cgroups knows how this machine's cgroups can be used: pure v2 (one
// hierarchy with memory and pids controllers), v1 (a memory and a pids
// hierarchy, plus the v2 "unified" mount of hybrid systems, which gives
// cgroup.kill), or none (not root, or no writable hierarchy: rlimits then).
type cgroups struct {
	mode    string // "v2", "v1" or "none"
	v2      string // parent folder in the v2 hierarchy (v2 mode, or hybrid unified)
	v1Mem   string
	v1Pids  string
	problem string // why cgroups are not used
}

// detectCgroups sets up scimcp's parent groups and says what works.
func detectCgroups() *cgroups {
	c := &cgroups{mode: "none"}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		parent := filepath.Join(cgroupRoot, cgroupParent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			c.problem = "cannot create " + parent + ": " + err.Error()
			return c
		}
		// Controllers must be enabled on the way down to our groups.
		os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+memory +pids"), 0)
		if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			c.problem = "cannot enable the memory and pids controllers under " + parent + ": " + err.Error()
			return c
		}
		c.mode, c.v2 = "v2", parent
		return c
	}
	mem := filepath.Join(cgroupRoot, "memory", cgroupParent)
	pids := filepath.Join(cgroupRoot, "pids", cgroupParent)
	if err := os.MkdirAll(mem, 0o755); err != nil {
		c.problem = "cannot create " + mem + ": " + err.Error()
		return c
	}
	if err := os.MkdirAll(pids, 0o755); err != nil {
		c.problem = "cannot create " + pids + ": " + err.Error()
		return c
	}
	c.mode, c.v1Mem, c.v1Pids = "v1", mem, pids
	unified := filepath.Join(cgroupRoot, "unified", cgroupParent)
	if err := os.MkdirAll(unified, 0o755); err == nil {
		if _, err := os.Stat(filepath.Join(unified, "cgroup.kill")); err == nil {
			c.v2 = unified
		}
	}
	return c
}

func (c *cgroups) String() string {
	switch c.mode {
	case "v2":
		return "cgroup v2 (" + c.v2 + ")"
	case "v1":
		s := "cgroup v1 (memory, pids)"
		if c.v2 != "" {
			s += " + v2 cgroup.kill"
		}
		return s
	}
	return "no cgroups (" + c.problem + "); rlimits instead"
}

// cgroup is the set of groups of one execution.
type cgroup struct {
	dirs []string // every group the process joins
	mem  string   // the group holding the memory controller
	pids string   // the group whose cgroup.procs lists the tree
	kill string   // cgroup.kill file, if any
	v2   bool     // mem is a v2 group
}

// create makes the groups of one execution with its limits.
func (c *cgroups) create(id string, l Limits) (*cgroup, error) {
	if c.mode == "none" {
		return nil, nil
	}
	g := &cgroup{}
	mk := func(parent string) (string, error) {
		d := filepath.Join(parent, id)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", err
		}
		g.dirs = append(g.dirs, d)
		return d, nil
	}
	write := func(dir, file, val string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
			return fmt.Errorf("set %s: %w", file, err)
		}
		return nil
	}
	fail := func(err error) (*cgroup, error) {
		g.remove()
		return nil, err
	}
	switch c.mode {
	case "v2":
		d, err := mk(c.v2)
		if err != nil {
			return fail(err)
		}
		g.mem, g.pids, g.kill, g.v2 = d, d, filepath.Join(d, "cgroup.kill"), true
		if l.MemoryBytes > 0 {
			if err := write(d, "memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
				return fail(err)
			}
			write(d, "memory.swap.max", "0")
		}
		if l.Procs > 0 {
			if err := write(d, "pids.max", strconv.Itoa(l.Procs)); err != nil {
				return fail(err)
			}
		}
	case "v1":
		m, err := mk(c.v1Mem)
		if err != nil {
			return fail(err)
		}
		p, err := mk(c.v1Pids)
		if err != nil {
			return fail(err)
		}
		g.mem, g.pids = m, p
		if l.MemoryBytes > 0 {
			if err := write(m, "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
				return fail(err)
			}
			// Without swap accounting the file is absent; the limit then
			// covers RAM only.
			write(m, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10))
		}
		if l.Procs > 0 {
			if err := write(p, "pids.max", strconv.Itoa(l.Procs)); err != nil {
				return fail(err)
			}
		}
		if c.v2 != "" {
			if u, err := mk(c.v2); err == nil {
				g.kill = filepath.Join(u, "cgroup.kill")
			}
		}
	}
	return g, nil
}

// procsFiles are the cgroup.procs files the sandbox helper writes itself to.
func (g *cgroup) procsFiles() []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, d := range g.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// members lists the processes in the group.
func (g *cgroup) members() []int {
	if g == nil {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(g.pids, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// killAll sends SIGKILL to every process in the group.
func (g *cgroup) killAll() {
	if g == nil {
		return
	}
	if g.kill != "" && os.WriteFile(g.kill, []byte("1"), 0) == nil {
		return
	}
	for _, pid := range g.members() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// oomKilled reports whether the memory limit killed a process of the group.
func (g *cgroup) oomKilled() bool {
	if g == nil || g.mem == "" {
		return false
	}
	file, key := "memory.oom_control", "oom_kill"
	if g.v2 {
		file = "memory.events"
	}
	f, err := os.Open(filepath.Join(g.mem, file))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == key {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n > 0
		}
	}
	return false
}

// remove deletes the groups once their processes are gone.
func (g *cgroup) remove() {
	if g == nil {
		return
	}
	for _, d := range g.dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
