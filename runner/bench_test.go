package runner_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/runner/runnertest"
)

// BenchmarkLocalEcho: start → output → exit of `echo hi` in the full
// sandbox (helper, cgroups, bwrap, pty), as run_shell does it.
func BenchmarkLocalEcho(b *testing.B) {
	l, err := runner.NewLocal(runner.LocalConfig{Workspace: b.TempDir(), StateDir: b.TempDir(),
		Helper: []string{testBinary()}, HelperEnv: []string{"SCIMCP_TEST_HELPER=1"}})
	if err != nil {
		b.Fatal(err)
	}
	l.Ready()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := &runnertest.Output{}
		h, err := l.Start(context.Background(), runner.Spec{ID: fmt.Sprint(i), Argv: []string{"echo", "hi"}, Output: out})
		if err != nil {
			b.Fatal(err)
		}
		if e := h.Wait(); e.Code != 0 || out.String() != "hi\n" {
			b.Fatalf("%+v %q", e, out.String())
		}
	}
}

// BenchmarkBareBwrap: the floor: bwrap with the same namespaces running
// `echo hi`, no helper, no cgroups, no pty.
func BenchmarkBareBwrap(b *testing.B) {
	ws := b.TempDir()
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", ws, "/workspace", "--chdir", "/workspace", "--clearenv", "--", "echo", "hi"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := exec.Command("bwrap", args...).Output()
		if err != nil || string(out) != "hi\n" {
			b.Fatal(err, string(out))
		}
	}
}

func BenchmarkLocalEchoNoCgroups(b *testing.B) {
	l, err := runner.NewLocal(runner.LocalConfig{Workspace: b.TempDir(), StateDir: b.TempDir(),
		Helper: []string{testBinary()}, HelperEnv: []string{"SCIMCP_TEST_HELPER=1"}})
	if err != nil {
		b.Fatal(err)
	}
	l.Ready()
	runner.NoCgroups(l)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := &runnertest.Output{}
		h, err := l.Start(context.Background(), runner.Spec{ID: fmt.Sprint(i), Argv: []string{"echo", "hi"}, Output: out})
		if err != nil {
			b.Fatal(err)
		}
		if e := h.Wait(); e.Code != 0 {
			b.Fatal(e)
		}
	}
}
