// Package runner starts sandboxed executions: the Runner interface and its
// adapters (the local bubblewrap sandbox; later Slurm). It arrives with the
// executions work (run_shell, execution_status, execution_logs,
// execution_cancel); until then the package is empty and scimcp serves no
// execution tools.
package runner
