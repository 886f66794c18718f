package runner_test

import (
	"os"
	"testing"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/runner/runnertest"
)

// TestMain lets the test binary act as the sandbox helper, as the scimcp
// binary does with `scimcp __sandbox`.
func TestMain(m *testing.M) {
	if os.Getenv("SCIMCP_TEST_HELPER") == "1" {
		os.Exit(runner.SandboxMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func testBinary() string { return os.Args[0] }

func newLocal(t *testing.T, mutate func(*runner.LocalConfig)) *runner.Local {
	t.Helper()
	cfg := runner.LocalConfig{
		Workspace: t.TempDir(),
		StateDir:  t.TempDir(),
		Helper:    []string{os.Args[0]},
		HelperEnv: []string{"SCIMCP_TEST_HELPER=1"},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := runner.NewLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Ready() }) // before the temporary folders go
	return l
}

func TestLocalConformance(t *testing.T) {
	runnertest.Run(t, func(t *testing.T) runner.Runner { return newLocal(t, nil) })
}

func TestUnsandboxedConformance(t *testing.T) {
	runnertest.Run(t, func(t *testing.T) runner.Runner {
		return newLocal(t, func(c *runner.LocalConfig) { c.Sandbox = runner.SandboxNone })
	})
}
