package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// Sandbox modes of the local runner.
const (
	SandboxBwrap = "bwrap"
	// SandboxNone runs commands as plain child processes: for development
	// only. It is logged loudly and said in every Describe.
	SandboxNone = "none"
)

// Defaults of the local runner's limits.
const (
	DefaultWall        = time.Hour
	DefaultMemoryBytes = 4 << 30
	DefaultProcs       = 1024
	DefaultOutputBytes = 64 << 20
)

// SandboxWorkspace is where the workspace is mounted inside the sandbox.
const SandboxWorkspace = "/workspace"

// sandboxPath is PATH inside the sandbox.
const sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// etcAllowlist is every /etc entry a sandboxed program sees: what dynamic
// linking, TLS, name resolution, locales, time zones, fonts and the common
// interpreters need, and nothing else (no shadow files, private keys or
// server configuration). Missing entries are skipped. At start the runner
// copies them into its state folder, which the sandbox mounts read-only as
// /etc in one bind (a bind per entry costs a mount each, every call).
var etcAllowlist = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
	"fonts", "localtime", "timezone", "mime.types", "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf",
	"protocols", "services", "python3", "python3.11", "R", "matplotlibrc", "inputrc", "bash.bashrc", "profile",
	"terminfo", "magic", "magic.mime", "papersize", "debian_version", "os-release", "lsb-release", "environment",
	"locale.alias", "locale.gen", "default", "java-17-openjdk", "perl", "gitconfig", "pip.conf", "xdg",
}

// LocalConfig configures the local runner.
type LocalConfig struct {
	// Name is the runner_id; default "local".
	Name string
	// Workspace is the host folder mounted read-write at /workspace.
	Workspace string
	// Sandbox is SandboxBwrap (default) or SandboxNone.
	Sandbox string
	// Bwrap is the bwrap executable; default: looked up on PATH.
	Bwrap string
	// Network lets sandboxed commands reach the network.
	Network bool
	// Limits are the defaults for every execution.
	Limits Limits
	// StateDir holds files the sandbox mounts (a passwd and group file).
	StateDir string
	// Helper is the command that runs the sandbox helper, e.g.
	// [os.Executable(), HelperCommand]; HelperEnv is its environment.
	Helper    []string
	HelperEnv []string
	// ReadOnly are extra host folders mounted read-only at the same path
	// (environments, skill packages).
	ReadOnly []string
	Log      hclog.Logger
}

// Local runs commands in a fresh bubblewrap sandbox per execution.
type Local struct {
	cfg        LocalConfig
	cg         *cgroups
	bwrapErr   error // why bwrap cannot be used, if it cannot
	disableNS  bool  // bwrap supports --disable-userns
	passwd     string
	group      string
	etc        string        // the sandbox's /etc, prepared at start
	prep       chan struct{} // closed when prepare has run
	prepErr    error
	root       bool
	hostLayout []string // bwrap arguments for /bin, /lib, ... symlinks or binds
}

// NewLocal prepares the local runner. A missing bwrap is not an error here:
// Start then refuses with a message naming the package to install.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Name == "" {
		cfg.Name = "local"
	}
	if cfg.Sandbox == "" {
		cfg.Sandbox = SandboxBwrap
	}
	if cfg.Sandbox != SandboxBwrap && cfg.Sandbox != SandboxNone {
		return nil, fmt.Errorf("sandbox %q: use %q or %q", cfg.Sandbox, SandboxBwrap, SandboxNone)
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if len(cfg.Helper) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Helper = []string{exe, HelperCommand}
	}
	cfg.Limits = withDefaults(cfg.Limits, Limits{Wall: DefaultWall, MemoryBytes: DefaultMemoryBytes, Procs: DefaultProcs, OutputBytes: DefaultOutputBytes})
	l := &Local{cfg: cfg, root: os.Geteuid() == 0}
	if cfg.Sandbox == SandboxNone {
		cfg.Log.Warn("SANDBOX DISABLED: run_shell executes commands as plain processes of the server user, with full access to this machine. Use --sandbox=none for development only.")
	} else {
		if cfg.Bwrap == "" {
			if p, err := exec.LookPath("bwrap"); err == nil {
				cfg.Bwrap = p
			}
		}
		if cfg.Bwrap != "" {
			if _, err := exec.LookPath(cfg.Bwrap); err != nil {
				cfg.Bwrap = ""
			}
		}
		if cfg.Bwrap == "" {
			l.bwrapErr = errors.New("the sandbox needs bubblewrap (bwrap), which is not installed on the server; install it with `apt-get install -y bubblewrap` (Debian/Ubuntu) and restart scimcp. Commands are never run unsandboxed")
		}
		l.cfg.Bwrap = cfg.Bwrap
	}
	l.cg = detectCgroups()
	l.hostLayout = hostLayout()
	// What takes long (copying the allowlisted /etc, asking bwrap what it
	// supports) happens in the background, so the server starts at once;
	// the first Start waits for it.
	l.prep = make(chan struct{})
	go func() {
		defer close(l.prep)
		if l.cfg.Bwrap != "" {
			help, _ := exec.Command(l.cfg.Bwrap, "--help").CombinedOutput()
			l.disableNS = strings.Contains(string(help), "--disable-userns")
		}
		l.prepErr = l.writeIdentity()
	}()
	return l, nil
}

func withDefaults(l, d Limits) Limits {
	if l.Wall <= 0 {
		l.Wall = d.Wall
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Procs <= 0 {
		l.Procs = d.Procs
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = d.OutputBytes
	}
	return l
}

// writeIdentity prepares the sandbox's /etc: the allowlisted entries of the
// host's, and passwd and group files of its own, so `id`, `whoami` and
// Python's getpass work without the host's account files.
func (l *Local) writeIdentity() error {
	if l.cfg.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(l.cfg.StateDir, 0o700); err != nil {
		return err
	}
	etc := filepath.Join(l.cfg.StateDir, "etc")
	// The copy is reused across restarts while the host's entries look the
	// same (name, mode, size, mtime of each top-level entry).
	stampFile := etc + ".stamp"
	stamp := etcStamp()
	if old, err := os.ReadFile(stampFile); err != nil || string(old) != stamp {
		tmp := etc + ".new"
		os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		for _, e := range etcAllowlist {
			if err := copyTree(filepath.Join("/etc", e), filepath.Join(tmp, e)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("prepare the sandbox's /etc: %w", err)
			}
		}
		os.RemoveAll(etc)
		if err := os.Rename(tmp, etc); err != nil {
			return err
		}
		if err := os.WriteFile(stampFile, []byte(stamp), 0o600); err != nil {
			return err
		}
	}
	l.etc = etc
	uid, gid := os.Getuid(), os.Getgid()
	l.passwd = filepath.Join(etc, "passwd")
	l.group = filepath.Join(etc, "group")
	pw := fmt.Sprintf("root:x:0:0:root:/tmp:/bin/bash\nscimcp:x:%d:%d:scimcp sandbox:/tmp:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", uid, gid)
	if uid == 0 {
		pw = "root:x:0:0:scimcp sandbox:/tmp:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	}
	gr := fmt.Sprintf("root:x:0:\nscimcp:x:%d:\nnogroup:x:65534:\n", gid)
	if err := os.WriteFile(l.passwd, []byte(pw), 0o644); err != nil {
		return err
	}
	return os.WriteFile(l.group, []byte(gr), 0o644)
}

// etcStamp describes the host's allowlisted /etc entries.
func etcStamp() string {
	var b strings.Builder
	for _, e := range etcAllowlist {
		fi, err := os.Lstat(filepath.Join("/etc", e))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s %v %d %d\n", e, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// hostLayout maps /bin, /lib, /lib64 and /sbin as the host has them: a
// symlink into /usr on merged-/usr systems, a read-only bind otherwise.
func hostLayout() []string {
	var args []string
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
			continue
		}
		args = append(args, "--ro-bind", d, d)
	}
	return args
}

// Ready waits until the runner's background preparation is done and
// reports its error.
func (l *Local) Ready() error {
	<-l.prep
	return l.prepErr
}

// Name implements Runner.
func (l *Local) Name() string { return l.cfg.Name }

// Describe implements Runner.
func (l *Local) Describe() Description {
	d := Description{
		Name: l.cfg.Name, Kind: "local", Network: l.cfg.Network, Workspace: SandboxWorkspace,
		Limits: fmt.Sprintf("wall %s, memory %d MiB, %d processes, log %d MiB; %s",
			l.cfg.Limits.Wall, l.cfg.Limits.MemoryBytes>>20, l.cfg.Limits.Procs, l.cfg.Limits.OutputBytes>>20, l.cg),
	}
	switch {
	case l.cfg.Sandbox == SandboxNone:
		d.Sandbox = "NONE (development mode: commands run unsandboxed as the server user)"
		d.Workspace = l.cfg.Workspace
	case l.bwrapErr != nil:
		d.Sandbox = "unavailable: " + l.bwrapErr.Error()
	default:
		d.Sandbox = "bubblewrap: fresh namespaces per call, system folders read-only, workspace read-write at /workspace, private /tmp, no capabilities"
	}
	return d
}

// Start implements Runner.
func (l *Local) Start(ctx context.Context, spec Spec) (Handle, error) {
	if l.bwrapErr != nil {
		return nil, l.bwrapErr
	}
	<-l.prep
	if l.prepErr != nil {
		return nil, fmt.Errorf("prepare the sandbox: %w", l.prepErr)
	}
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	limits := withDefaults(spec.Limits, l.cfg.Limits)
	cg, err := l.cg.create("exec-"+spec.ID, limits)
	if err != nil {
		l.cfg.Log.Warn("cgroup setup failed; falling back to rlimits", "execution", spec.ID, "error", err)
		cg = nil
	}
	// Limits must hold for every process of the tree from its first
	// instruction. bwrap is started with --block-fd: it sets up the sandbox
	// and then waits, before it runs the command, until the server has put
	// it (and the sandbox's first process) into the execution's cgroups, or
	// set rlimits on them where cgroups are unavailable. Unsandboxed mode
	// has no such pause and goes through the sandbox helper instead.
	rlimits := map[int]uint64{unix.RLIMIT_CORE: 0}
	if cg == nil {
		rlimits[unix.RLIMIT_AS] = uint64(limits.MemoryBytes)
		rlimits[unix.RLIMIT_NPROC] = uint64(limits.Procs)
	}
	var cmd *exec.Cmd
	var blockW *os.File
	env := l.environment(spec)
	if l.cfg.Sandbox == SandboxNone {
		args := append([]string{}, l.cfg.Helper[1:]...)
		for _, f := range cg.procsFiles() {
			args = append(args, "--cgroup", f)
		}
		for res, n := range rlimits {
			args = append(args, "--rlimit", rlimitName(res)+"="+strconv.FormatUint(n, 10))
		}
		args = append(append(args, "--"), spec.Argv...)
		cmd = exec.Command(l.cfg.Helper[0], args...)
		cmd.Env = append(append([]string{}, l.cfg.HelperEnv...), env...)
		cmd.Dir = l.cfg.Workspace
		if spec.Dir != "" {
			cmd.Dir = spec.Dir
		}
	} else {
		blockR, w, err := os.Pipe()
		if err != nil {
			cg.remove()
			return nil, err
		}
		blockW = w
		defer blockR.Close()
		defer blockW.Close()
		bw := l.bwrapArgs(spec, env)
		cmd = exec.Command(bw[0], append([]string{"--block-fd", "3"}, bw[1:]...)...)
		cmd.ExtraFiles = []*os.File{blockR}
		cmd.Env = []string{} // bwrap --clearenv sets the sandbox's environment
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}

	// stdout goes through a pseudo-terminal, so C stdio and Python flush per
	// line and output is live; stderr stays a pipe, so it remains
	// distinguishable. stdin is /dev/null.
	ptmx, tty, err := pty.Open()
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("open pty: %w", err)
	}
	pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 200})
	errR, errW, err := os.Pipe()
	if err != nil {
		ptmx.Close()
		tty.Close()
		cg.remove()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = tty, errW
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		tty.Close()
		errR.Close()
		errW.Close()
		cg.remove()
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	tty.Close()
	errW.Close()
	if blockW != nil {
		if err := confine(cmd.Process.Pid, cg, rlimits); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			ptmx.Close()
			errR.Close()
			cg.remove()
			return nil, fmt.Errorf("confine the sandbox: %w", err)
		}
		blockW.Write([]byte{1})
		blockW.Close()
	}

	h := &localHandle{cmd: cmd, cg: cg, done: make(chan struct{}), log: l.cfg.Log}
	var copiers sync.WaitGroup
	copiers.Add(2)
	go func() { defer copiers.Done(); copyCRLF(ptmx, spec.Output) }()
	go func() { defer copiers.Done(); copyStream(errR, spec.Output, Stderr) }()
	go func() {
		werr := cmd.Wait()
		// The tree is gone with bwrap (its pid namespace dies with it); in
		// unsandboxed mode a daemon may still hold the terminal: give the
		// copiers a moment, then close.
		drained := make(chan struct{})
		go func() { copiers.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
			cg.killAll()
			ptmx.Close()
			errR.Close()
			<-drained
		}
		ptmx.Close()
		errR.Close()
		h.exit = exitOf(cmd, werr)
		h.exit.OOM = cg.oomKilled()
		cg.killAll()
		cg.remove()
		close(h.done)
	}()
	return h, nil
}

// confine puts bwrap and the processes it has forked so far into the
// execution's cgroups and sets the rlimits on them. bwrap goes first: a
// process it forks after that inherits the groups, and one it forked before
// shows up in the walk that follows.
func confine(pid int, cg *cgroup, rlimits map[int]uint64) error {
	apply := func(p int) error {
		for _, f := range cg.procsFiles() {
			if err := os.WriteFile(f, []byte(strconv.Itoa(p)), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
				return err
			}
		}
		for res, n := range rlimits {
			lim := unix.Rlimit{Cur: n, Max: n}
			if err := unix.Prlimit(p, res, &lim, nil); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("prlimit: %w", err)
			}
		}
		return nil
	}
	if err := apply(pid); err != nil {
		return err
	}
	for _, p := range descendants(pid) {
		if err := apply(p); err != nil {
			return err
		}
	}
	return nil
}

// environment is the clean environment of a sandboxed command: nothing of
// the server's own (no secrets, no PYTHON* settings), only what is set here.
func (l *Local) environment(spec Spec) []string {
	home := "/tmp"
	ws := SandboxWorkspace
	if l.cfg.Sandbox == SandboxNone {
		ws = l.cfg.Workspace
		home = os.TempDir()
	}
	env := []string{
		"PATH=" + sandboxPath,
		"HOME=" + home,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"SCIMCP_WORKSPACE=" + ws,
		"SCIMCP_EXECUTION_ID=" + spec.ID,
	}
	return append(env, spec.Env...)
}

func (l *Local) bwrapArgs(spec Spec, env []string) []string {
	a := []string{l.cfg.Bwrap,
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session",
		// As root, bwrap keeps every capability inside the sandbox, enough to
		// remount the read-only binds writable. Drop them all.
		"--cap-drop", "ALL",
		"--hostname", "scimcp",
	}
	if l.disableNS {
		a = append(a, "--disable-userns") // no nested user namespaces
	}
	if !l.cfg.Network {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	a = append(a, l.hostLayout...)
	if l.etc != "" {
		a = append(a, "--ro-bind", l.etc, "/etc")
	} else {
		for _, e := range etcAllowlist {
			a = append(a, "--ro-bind-try", "/etc/"+e, "/etc/"+e)
		}
	}
	for _, p := range l.cfg.ReadOnly {
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", l.cfg.Workspace, SandboxWorkspace)
	// bwrap builds the sandbox's root on a tmpfs; make it read-only too, so
	// the only writable places are the workspace and /tmp.
	a = append(a, "--remount-ro", "/")
	dir := SandboxWorkspace
	if spec.Dir != "" {
		dir = spec.Dir
	}
	a = append(a, "--chdir", dir, "--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a, "--")
	return append(a, spec.Argv...)
}

// copyTree copies a file, symlink or folder (recursively) from src to dst,
// creating dst's parents. Symlinks are copied as symlinks.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case fi.IsDir():
		if err := os.MkdirAll(dst, fi.Mode().Perm()|0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil && !errors.Is(err, os.ErrPermission) {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, fi.Mode().Perm())
	}
	return nil // sockets, devices: not copied
}

// localHandle implements Handle for a local process tree.
type localHandle struct {
	cmd  *exec.Cmd
	cg   *cgroup
	log  hclog.Logger
	done chan struct{}
	exit Exit

	once sync.Once
}

func (h *localHandle) Wait() Exit {
	<-h.done
	return h.exit
}

func (h *localHandle) Terminate(grace time.Duration) {
	h.once.Do(func() {
		go func() {
			// SIGTERM to the command's processes, not to bwrap itself: bwrap
			// dying first would SIGKILL the tree at once (die-with-parent).
			for _, pid := range h.tree() {
				syscall.Kill(pid, syscall.SIGTERM)
			}
			select {
			case <-h.done:
			case <-time.After(grace):
				h.Kill()
			}
		}()
	})
}

func (h *localHandle) Kill() {
	select {
	case <-h.done:
		return
	default:
	}
	// Killing bwrap tears down its pid namespace: every process in it,
	// daemonized ones included, dies. The cgroup kill covers the
	// unsandboxed mode and anything that raced.
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cg.killAll()
	if h.cg == nil {
		for _, pid := range descendants(h.cmd.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// tree lists the processes of the execution except bwrap's own.
func (h *localHandle) tree() []int {
	pids := h.cg.members()
	if pids == nil {
		pids = descendants(h.cmd.Process.Pid)
	}
	out := pids[:0]
	for _, pid := range pids {
		if pid == h.cmd.Process.Pid || procComm(pid) == "bwrap" {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// descendants walks /proc for the children, grandchildren, ... of pid.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may contain spaces.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
	}
	var out []int
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func procComm(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(data))
}

// exitOf reads an exit status. bwrap reports a command killed by signal N
// as exit code 128+N, like a shell.
func exitOf(cmd *exec.Cmd, err error) Exit {
	st := cmd.ProcessState
	if st == nil {
		return Exit{Code: -1, Err: err}
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return Exit{Code: -1, Signal: ws.Signal().String()}
	}
	code := st.ExitCode()
	e := Exit{Code: code}
	if code > 128 && code < 128+65 {
		e.Signal = syscall.Signal(code - 128).String()
	}
	return e
}

// copyCRLF copies the terminal's output, turning its "\r\n" line ends back
// into "\n" (a lone "\r", as progress bars use, is kept).
func copyCRLF(r io.Reader, out Output) {
	buf := make([]byte, 32<<10)
	pendingCR := false
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			var b []byte
			if pendingCR {
				if chunk[0] != '\n' {
					b = append(b, '\r')
				}
				pendingCR = false
			}
			b = append(b, chunk...)
			if b[len(b)-1] == '\r' {
				b = b[:len(b)-1]
				pendingCR = true
			}
			b = []byte(strings.ReplaceAll(string(b), "\r\n", "\n"))
			if len(b) > 0 {
				out.Write(Stdout, b)
			}
		}
		if err != nil {
			if pendingCR {
				out.Write(Stdout, []byte{'\r'})
			}
			return
		}
	}
}

func copyStream(r io.Reader, out Output, s Stream) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out.Write(s, append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			return
		}
	}
}

func (l *Local) defaultLimits() Limits { return l.cfg.Limits }
