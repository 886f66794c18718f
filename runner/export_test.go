package runner

// NoCgroups makes l use rlimits only (for benchmarks comparing the cost).
func NoCgroups(l *Local) { l.cg = &cgroups{mode: "none", problem: "disabled in a test"} }
