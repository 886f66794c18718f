package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Status of one scenario on one server.
const (
	statusOK           = "ok"
	statusToolMissing  = "tool missing"
	statusNotSupported = "not supported"
	statusFailed       = "failed"
)

// Result is one scenario on one server.
type Result struct {
	Scenario string `json:"scenario"`
	Server   string `json:"server"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Note     string `json:"note,omitempty"`
	Closest  bool   `json:"closest_equivalent,omitempty"`

	Calls  int `json:"calls"`
	Errors int `json:"errors"`
	Wrong  int `json:"wrong_answers"`
	// FirstProblem is the first error or wrong answer seen, for the reader.
	FirstProblem string `json:"first_problem,omitempty"`

	// Latency says what the p50/p95/p99 measure: "wire" (request frame
	// written → response frame read, no client decoding), "client" (the
	// client call, decoding included) or "spawn" (process start →
	// initialize response).
	Latency string  `json:"latency"`
	P50Ms   float64 `json:"p50_ms"`
	P95Ms   float64 `json:"p95_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MeanMs  float64 `json:"mean_ms"`
	MinMs   float64 `json:"min_ms"`
	MaxMs   float64 `json:"max_ms"`
	// Client-side latency of the same calls, decoding included.
	ClientP50Ms float64 `json:"client_p50_ms,omitempty"`
	ClientP95Ms float64 `json:"client_p95_ms,omitempty"`
	ClientP99Ms float64 `json:"client_p99_ms,omitempty"`
	// FirstMs is the first call on a fresh process (before warm-up), where
	// the scenario has one.
	FirstMs float64 `json:"first_call_ms,omitempty"`
	// CallsPerSec: for the in-flight scenarios, completed calls over wall
	// time; otherwise one over the mean latency (calls made one at a time).
	CallsPerSec float64 `json:"calls_per_s"`
	InFlight    int     `json:"in_flight,omitempty"`
	Clients     int     `json:"clients,omitempty"`

	BytesOut         int64   `json:"bytes_client_to_server"`
	BytesIn          int64   `json:"bytes_server_to_client"`
	WireBytesPerCall float64 `json:"wire_bytes_per_call"`

	// ServerCPUMsPerCall is the CPU time the server processes used during
	// the measured calls, per call (10 ms clock ticks, so coarse for short
	// scenarios); for cold_start, the CPU a process used until it answered
	// initialize. 0 when unknown.
	ServerCPUMsPerCall float64 `json:"server_cpu_ms_per_call"`
	// ClientCPUMsPerCall is the harness's own CPU during the measured calls,
	// per call: on a small machine the client competes with the server.
	ClientCPUMsPerCall float64 `json:"client_cpu_ms_per_call"`

	// PeakRSSKiB is the largest VmHWM of the server processes the scenario
	// used (each one fresh for the scenario), in KiB; 0 when unknown (a
	// server the harness did not start).
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	Processes  int   `json:"processes"`

	durations []time.Duration // wire latencies (or spawn times)
	clientDur []time.Duration // client-side latencies
	wallTime  time.Duration
	// measured counts the calls of the measured phase (no warm-up): the
	// bytes on the wire are divided by it.
	measured       int
	measuredErrors int
	serverCPU      time.Duration
	clientCPU      time.Duration
}

func (r *Result) problem(format string, a ...any) {
	if r.FirstProblem == "" {
		s := strings.Join(strings.Fields(fmt.Sprintf(format, a...)), " ")
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		r.FirstProblem = s
	}
}

func (r *Result) addRSS(kib int64) {
	if kib > r.PeakRSSKiB {
		r.PeakRSSKiB = kib
	}
}

// finish computes the statistics from the recorded durations.
func (r *Result) finish() {
	if r.measured > 0 {
		r.WireBytesPerCall = float64(r.BytesIn+r.BytesOut) / float64(r.measured)
		r.ServerCPUMsPerCall = ms(r.serverCPU) / float64(r.measured)
		r.ClientCPUMsPerCall = ms(r.clientCPU) / float64(r.measured)
	}
	if len(r.clientDur) > 0 {
		c := append([]time.Duration(nil), r.clientDur...)
		sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
		r.ClientP50Ms, r.ClientP95Ms, r.ClientP99Ms = ms(percentile(c, 50)), ms(percentile(c, 95)), ms(percentile(c, 99))
		if len(r.durations) == 0 {
			r.durations, r.Latency = r.clientDur, "client"
		}
	}
	if len(r.durations) == 0 {
		return
	}
	if r.Latency == "" {
		r.Latency = "wire"
	}
	d := append([]time.Duration(nil), r.durations...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	r.P50Ms = ms(percentile(d, 50))
	r.P95Ms = ms(percentile(d, 95))
	r.P99Ms = ms(percentile(d, 99))
	r.MinMs, r.MaxMs = ms(d[0]), ms(d[len(d)-1])
	r.MeanMs = ms(sum / time.Duration(len(d)))
	switch {
	case r.wallTime > 0:
		r.CallsPerSec = float64(r.measured-r.measuredErrors) / r.wallTime.Seconds()
	case len(r.clientDur) > 0:
		var cs time.Duration
		for _, x := range r.clientDur {
			cs += x
		}
		r.CallsPerSec = float64(len(r.clientDur)) / cs.Seconds()
	case sum > 0:
		r.CallsPerSec = float64(len(d)) / sum.Seconds()
	}
}

// percentile by the nearest-rank method on sorted data.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"nproc"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemTotal  string `json:"mem_total,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
	Node      string `json:"node_version,omitempty"`
	OS        string `json:"os,omitempty"`
	// LoadAvg is /proc/loadavg when the run started and when it ended:
	// anything else running on the machine shows here.
	LoadAvgStart string `json:"loadavg_start,omitempty"`
	LoadAvgEnd   string `json:"loadavg_end,omitempty"`
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	return m
}

// ServerReport says what a server was.
type ServerReport struct {
	Name    string   `json:"name"`
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
	// ServerInfo is what the server said in initialize.
	ServerInfo string `json:"server_info,omitempty"`
}

// Target is one goal from the benchmarks issue, checked on the baseline.
type Target struct {
	What     string  `json:"what"`
	Scenario string  `json:"scenario"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Status   string  `json:"status"` // met, missed, not available
}

// Report is the whole run: the -json output.
type Report struct {
	Started  time.Time      `json:"started"`
	Seconds  float64        `json:"seconds"`
	Command  string         `json:"command"`
	Label    string         `json:"label,omitempty"`
	Machine  Machine        `json:"machine"`
	Settings map[string]any `json:"settings"`
	Baseline string         `json:"baseline"`
	Servers  []ServerReport `json:"servers"`
	Results  []*Result      `json:"results"`
	Targets  []Target       `json:"targets,omitempty"`
	Fixtures map[string]any `json:"fixtures"`
}

func (rp *Report) result(scenario, server string) *Result {
	for _, r := range rp.Results {
		if r.Scenario == scenario && r.Server == server {
			return r
		}
	}
	return nil
}

// throughput scenarios are compared by calls/s, the others by p50.
func isThroughput(id string) bool { return id == scInflight1 || id == scInflight8 }

// ratio is other / baseline on the scenario's headline figure: p50 latency,
// or calls/s for the in-flight scenarios. "" when either side has no figure.
func (rp *Report) ratio(r *Result) string {
	if r.Server == rp.Baseline || r.Status != statusOK {
		return ""
	}
	b := rp.result(r.Scenario, rp.Baseline)
	if b == nil || b.Status != statusOK {
		return ""
	}
	var num, den float64
	if isThroughput(r.Scenario) {
		num, den = r.CallsPerSec, b.CallsPerSec
	} else {
		num, den = r.P50Ms, b.P50Ms
	}
	if den <= 0 || num <= 0 {
		return ""
	}
	s := fmt.Sprintf("%.1f×", num/den)
	if num/den < 10 {
		s = fmt.Sprintf("%.2f×", num/den)
	}
	if num/den >= 100 {
		s = fmt.Sprintf("%.0f×", num/den)
	}
	if r.Closest {
		s += "≈"
	}
	return s
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtRate(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtCPU(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtKiB(b float64) string {
	if b == 0 {
		return "-"
	}
	k := b / 1024
	switch {
	case k < 10:
		return fmt.Sprintf("%.2f", k)
	case k < 1000:
		return fmt.Sprintf("%.1f", k)
	}
	return fmt.Sprintf("%.0f", k)
}

func fmtRSS(kib int64) string {
	if kib == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(kib)/1024)
}

var tableHeader = []string{"scenario", "server", "status", "calls", "err", "wrong", "p50 ms", "p95 ms", "p99 ms", "client p50", "first ms", "calls/s", "server CPU ms/call", "wire KiB/call", "peak RSS MiB", "vs " + "BASE"}

func (rp *Report) rows() [][]string {
	var rows [][]string
	for _, r := range rp.Results {
		status := r.Status
		if r.Status != statusOK && r.Reason != "" {
			status += ": " + r.Reason
		}
		if r.Note != "" {
			status += " [" + noteMark(rp, r) + "]"
		}
		if r.Status != statusOK {
			rows = append(rows, []string{r.Scenario, r.Server, status, "", "", "", "", "", "", "", "", "", "", "", fmtRSS(r.PeakRSSKiB), ""})
			continue
		}
		first := ""
		if r.FirstMs > 0 {
			first = fmtMs(r.FirstMs)
		}
		rows = append(rows, []string{
			r.Scenario, r.Server, status,
			fmt.Sprint(r.Calls), fmt.Sprint(r.Errors), fmt.Sprint(r.Wrong),
			fmtMs(r.P50Ms), fmtMs(r.P95Ms), fmtMs(r.P99Ms), fmtMs(r.ClientP50Ms), first,
			fmtRate(r.CallsPerSec), fmtCPU(r.ServerCPUMsPerCall), fmtKiB(r.WireBytesPerCall), fmtRSS(r.PeakRSSKiB), rp.ratio(r),
		})
	}
	return rows
}

// notes are numbered in the order they first appear.
func (rp *Report) notes() []*Result {
	var out []*Result
	for _, r := range rp.Results {
		if r.Note != "" {
			out = append(out, r)
		}
	}
	return out
}

func noteMark(rp *Report, r *Result) string {
	for i, n := range rp.notes() {
		if n == r {
			return fmt.Sprint(i + 1)
		}
	}
	return "?"
}

func (rp *Report) header() []string {
	h := append([]string(nil), tableHeader...)
	h[len(h)-1] = "vs " + rp.Baseline
	return h
}

// WriteText writes the table, notes, problems and targets as plain text.
func (rp *Report) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(rp.header(), "\t")+"\t")
	last := ""
	for _, row := range rp.rows() {
		if row[0] == last {
			row[0] = ""
		} else {
			last = row[0]
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprint(w, rp.legend())
	for i, r := range rp.notes() {
		fmt.Fprintf(w, "[%d] %s, %s: %s\n", i+1, r.Scenario, r.Server, r.Note)
	}
	probs := false
	for _, r := range rp.Results {
		if r.FirstProblem != "" {
			if !probs {
				fmt.Fprintln(w, "\nFirst error or wrong answer of each scenario:")
				probs = true
			}
			fmt.Fprintf(w, "  %s, %s: %s\n", r.Scenario, r.Server, r.FirstProblem)
		}
	}
	if len(rp.Targets) > 0 {
		fmt.Fprintf(w, "\nTargets (checked on %s):\n", rp.Baseline)
		for _, t := range rp.Targets {
			fmt.Fprintf(w, "  %-8s %-44s goal %-12s measured %s\n", t.Status, t.What, t.Goal, t.Measured)
		}
	}
}

func (rp *Report) legend() string {
	return fmt.Sprintf(`
p50/p95/p99: wire round trip (request frame written → last byte of the response read), except cold_start
(process start → initialize response). client p50: the same calls as the client saw them, decoding included.
first ms: the first call on a fresh process (client side). calls/s: in-flight scenarios, completed calls over
wall time; others, one call at a time. server CPU ms/call: user+system CPU of the server processes during the
measured calls, per call (cold_start: until initialize). wire KiB/call: both directions. peak RSS: VmHWM of the
server process.
vs %s: other p50 / %s p50 (in-flight scenarios: calls/s / calls/s); ≈ marks a closest equivalent, not the
same operation.
`, rp.Baseline, rp.Baseline)
}

// WriteMarkdown writes the same table as Markdown (for docs/BENCHMARKS.md).
func (rp *Report) WriteMarkdown(w io.Writer) {
	h := rp.header()
	fmt.Fprintln(w, "| "+strings.Join(h, " | ")+" |")
	sep := make([]string, len(h))
	for i := range sep {
		sep[i] = "---"
		if i >= 3 {
			sep[i] = "---:"
		}
	}
	fmt.Fprintln(w, "|"+strings.Join(sep, "|")+"|")
	for _, row := range rp.rows() {
		for i := range row {
			row[i] = strings.ReplaceAll(row[i], "|", "\\|")
		}
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
	}
	fmt.Fprint(w, rp.legend())
	fmt.Fprintln(w)
	for i, r := range rp.notes() {
		fmt.Fprintf(w, "%d. %s, %s: %s\n", i+1, r.Scenario, r.Server, r.Note)
	}
	probs := false
	for _, r := range rp.Results {
		if r.FirstProblem != "" {
			if !probs {
				fmt.Fprintln(w, "\nFirst error or wrong answer of each scenario:")
				fmt.Fprintln(w)
				probs = true
			}
			fmt.Fprintf(w, "- %s, %s: `%s`\n", r.Scenario, r.Server, strings.ReplaceAll(r.FirstProblem, "`", "'"))
		}
	}
	if len(rp.Targets) > 0 {
		fmt.Fprintf(w, "\n| target (on %s) | goal | measured | status |\n|---|---|---|---|\n", rp.Baseline)
		for _, t := range rp.Targets {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.What, t.Goal, t.Measured, t.Status)
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (rp *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rp, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// rssTargetKiB: the "peak RSS ≤ 15 MB", read as 15 MiB of VmHWM.
const rssTargetKiB = 15 * 1024

// checkTargets fills rp.Targets from the baseline's results.
func (rp *Report) checkTargets() {
	base := rp.Baseline
	lat := func(what, sc string, goalMs float64) {
		t := Target{What: what, Scenario: sc, Goal: fmt.Sprintf("≤ %s ms", trimFloat(goalMs))}
		r := rp.result(sc, base)
		switch {
		case r == nil || r.Status != statusOK:
			t.Status, t.Measured = "not available", "-"
			if r != nil {
				t.Measured = r.Status
			}
		default:
			t.Value = r.P50Ms
			t.Measured = fmt.Sprintf("p50 %s ms", fmtMs(r.P50Ms))
			t.Status = "met"
			if r.P50Ms > goalMs || r.Wrong > 0 || r.Errors > 0 {
				t.Status = "missed"
			}
		}
		rp.Targets = append(rp.Targets, t)
	}
	lat("cold start → initialize", scColdStart, 20)
	lat("far page read (line 600,000, 40 KiB)", scFarPage, 0.6)
	lat("500-entry listing", scList500, 5)
	lat("sandboxed echo hi", scShellEcho, 25)

	t := Target{What: "reads in flight from one client", Scenario: scInflight1, Goal: "≥ 3,000 calls/s"}
	if r := rp.result(scInflight1, base); r != nil && r.Status == statusOK {
		t.Value = r.CallsPerSec
		t.Measured = fmt.Sprintf("%s calls/s (%d in flight)", fmtRate(r.CallsPerSec), r.InFlight)
		t.Status = "met"
		if r.CallsPerSec < 3000 || r.Wrong > 0 || r.Errors > 0 {
			t.Status = "missed"
		}
	} else {
		t.Status, t.Measured = "not available", "-"
	}
	rp.Targets = append(rp.Targets, t)

	t = Target{What: "peak RSS under the read scenarios", Scenario: scFarPage + "," + scInflight1 + "," + scInflight8, Goal: "≤ 15 MiB"}
	var peak int64
	for _, sc := range []string{scFarPage, scInflight1, scInflight8} {
		if r := rp.result(sc, base); r != nil && r.PeakRSSKiB > peak {
			peak = r.PeakRSSKiB
		}
	}
	if peak > 0 {
		t.Value = float64(peak) / 1024
		t.Measured = fmt.Sprintf("%s MiB VmHWM", fmtRSS(peak))
		t.Status = "met"
		if peak > rssTargetKiB {
			t.Status = "missed"
		}
	} else {
		t.Status, t.Measured = "not available", "-"
	}
	rp.Targets = append(rp.Targets, t)
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
