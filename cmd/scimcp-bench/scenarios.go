package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Bench runs the scenarios on every server, alternating between servers on
// each repetition so a slow drift of the machine (page cache, CPU frequency,
// another process) falls on all of them alike.
type Bench struct {
	h        *Harness
	cfg      *Config
	report   *Report
	runs     int           // measured calls per server, latency scenarios
	coldRuns int           // spawns per server, cold start
	warmup   int           // unmeasured calls first (the first is reported)
	rounds   int           // rounds per server, in-flight scenarios
	duration time.Duration // length of one in-flight round
	inflight int           // calls in flight, in-flight scenarios
	clients  int           // clients of inflight_8_clients
	only     map[string]bool
}

// order is the server order of repetition rep: rotated by one each time.
func order[T any](xs []T, rep int) []T {
	n := len(xs)
	out := make([]T, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, xs[(i+rep)%n])
	}
	return out
}

func (b *Bench) logf(format string, a ...any) { b.h.logf(format, a...) }

func (b *Bench) newResult(id string, s *ServerConfig) *Result {
	r := &Result{Scenario: id, Server: s.Name, Status: statusOK}
	b.report.Results = append(b.report.Results, r)
	return r
}

func (b *Bench) noteServerInfo(cn *Conn) {
	for i := range b.report.Servers {
		sr := &b.report.Servers[i]
		if sr.Name == cn.srv.Name && sr.ServerInfo == "" && cn.info.Name != "" {
			sr.ServerInfo = cn.info.Name + " " + cn.info.Version
		}
	}
}

// Run runs every selected scenario.
func (b *Bench) Run(ctx context.Context) {
	for _, sc := range scenarioList {
		if b.only != nil && !b.only[sc.id] && !(sc.id == scListFirst && b.only[scColdStart]) {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		switch sc.id {
		case scColdStart:
			b.coldStart(ctx)
		case scListFirst:
			if b.only != nil && !b.only[scColdStart] {
				b.logf("%s runs with %s; select that", scListFirst, scColdStart)
			}
			continue // measured by coldStart
		case scInflight1:
			b.inflightScenario(ctx, sc, 1)
		case scInflight8:
			b.inflightScenario(ctx, sc, b.clients)
		default:
			b.latencyScenario(ctx, sc)
		}
		b.logf("%-20s done in %.1fs", sc.id, time.Since(t0).Seconds())
	}
}

// servers are the servers that take part in a scenario.
func (b *Bench) servers(id string) []*ServerConfig {
	var out []*ServerConfig
	for i := range b.cfg.Servers {
		if s := &b.cfg.Servers[i]; s.runs(id) {
			out = append(out, s)
		}
	}
	return out
}

// coldStart spawns each server coldRuns times and measures the time until
// the initialize response, then the first tools/list on that process.
func (b *Bench) coldStart(ctx context.Context) {
	servers := b.servers(scColdStart)
	if len(servers) == 0 {
		return
	}
	initR := map[string]*Result{}
	listR := map[string]*Result{}
	for _, s := range servers {
		initR[s.Name] = b.newResult(scColdStart, s)
		if s.URL != "" && len(s.Command) == 0 {
			initR[s.Name].Note = "a server started elsewhere: connect + initialize only, no spawn."
		}
	}
	for _, s := range servers {
		listR[s.Name] = b.newResult(scListFirst, s)
	}
	failures := map[string]int{}
	for rep := 0; rep < b.coldRuns && ctx.Err() == nil; rep++ {
		for _, s := range order(servers, rep) {
			if ctx.Err() != nil {
				break
			}
			ri, rl := initR[s.Name], listR[s.Name]
			if failures[s.Name] >= 3 && len(ri.durations) == 0 {
				continue // it never started: stop trying
			}
			ri.Calls++
			ri.measured++
			cn, d, err := b.h.start(ctx, s)
			if err != nil {
				ri.Errors++
				ri.measuredErrors++
				failures[s.Name]++
				ri.problem("%v", err)
				continue
			}
			b.noteServerInfo(cn)
			ri.serverCPU += cn.cpuTime()
			cpu0 := cn.cpuTime()
			in, out := cn.wire.snapshot()
			ri.durations = append(ri.durations, d)
			ri.BytesIn += in
			ri.BytesOut += out
			rl.Calls++
			rl.measured++
			cn.wire.reset()
			dl, err := cn.listTools(ctx)
			if err != nil {
				rl.Errors++
				rl.measuredErrors++
				rl.problem("%v", err)
			} else {
				rl.clientDur = append(rl.clientDur, dl)
				rl.durations = append(rl.durations, cn.wire.take(string(mcp.MethodToolsList))...)
			}
			in2, out2 := cn.wire.snapshot()
			rl.serverCPU += cn.cpuTime() - cpu0
			rl.BytesIn += in2 - in
			rl.BytesOut += out2 - out
			rss := cn.peakRSS()
			ri.addRSS(rss)
			rl.addRSS(rss)
			ri.Processes++
			rl.Processes++
			cn.Close()
		}
	}
	for _, s := range servers {
		initR[s.Name].Latency = "spawn"
		for _, r := range []*Result{initR[s.Name], listR[s.Name]} {
			if len(r.durations) == 0 && len(r.clientDur) == 0 {
				r.Status = statusFailed
			}
			r.finish()
		}
	}
}

// mappingFor resolves a server's mapping for a scenario, or fills r with why
// there is none.
func (b *Bench) mappingFor(sc scenarioInfo, s *ServerConfig, r *Result) *Mapping {
	m := s.Scenarios[sc.mappingKey()]
	if m == nil {
		r.Status, r.Reason = statusNotSupported, "no mapping for this server"
		return nil
	}
	r.Tool, r.Note, r.Closest = m.Tool, m.Note, m.Closest
	if m.Unsupported != "" {
		r.Status, r.Reason = statusNotSupported, m.Unsupported
		return nil
	}
	return m
}

// prepared is one server ready to run a scenario.
type prepared struct {
	s     *ServerConfig
	m     *Mapping // nil: tools/list
	args  map[string]any
	conns []*Conn
	r     *Result
}

// method is the JSON-RPC method the scenario's calls use.
func (p *prepared) method() string {
	if p.m == nil {
		return string(mcp.MethodToolsList)
	}
	return string(mcp.MethodToolsCall)
}

func (p *prepared) close() {
	for _, cn := range p.conns {
		p.r.addRSS(cn.peakRSS())
	}
	// Sessions attached to a server first, then the connection that owns
	// (and stops) the process.
	for i := len(p.conns) - 1; i >= 0; i-- {
		p.conns[i].Close()
	}
}

func (p *prepared) cpu() (d time.Duration) {
	for _, cn := range p.conns {
		d += cn.cpuTime()
	}
	return d
}

func (p *prepared) wire() (in, out int64) {
	for _, cn := range p.conns {
		i, o := cn.wire.snapshot()
		in += i
		out += o
	}
	return
}

// prepare starts fresh server processes for a scenario (clients of them),
// checks the tool exists, runs the setup call and the warm-up calls. It
// returns nil when the scenario cannot run on this server; r says why.
func (b *Bench) prepare(ctx context.Context, sc scenarioInfo, s *ServerConfig, clients int) *prepared {
	r := b.newResult(sc.id, s)
	p := &prepared{s: s, r: r}
	if sc.mapped {
		if p.m = b.mappingFor(sc, s, r); p.m == nil {
			return nil
		}
	}
	fail := func(err error) *prepared {
		r.Status, r.Reason = statusFailed, "could not start"
		r.problem("%v", err)
		p.close()
		return nil
	}
	for i := 0; i < clients; i++ {
		var (
			cn  *Conn
			err error
		)
		if i > 0 && s.URL != "" {
			cn, err = b.h.attach(ctx, p.conns[0])
		} else {
			cn, _, err = b.h.start(ctx, s)
		}
		if err != nil {
			return fail(err)
		}
		p.conns = append(p.conns, cn)
		if cn.owner {
			r.Processes++
		}
		b.noteServerInfo(cn)
		if _, err := cn.listTools(ctx); err != nil {
			return fail(err)
		}
	}
	first := p.conns[0]
	if p.m != nil {
		wait := p.m.WaitFor
		if wait == "" {
			wait = p.m.Tool
		}
		if !first.tools[wait] && p.m.WaitMs > 0 {
			deadline := time.Now().Add(time.Duration(p.m.WaitMs) * time.Millisecond)
			for !first.tools[wait] && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
				first.tools = nil
				if _, err := first.listTools(ctx); err != nil {
					return fail(err)
				}
			}
		}
		for _, t := range []string{p.m.Tool, wait} {
			if !first.tools[t] {
				r.Status, r.Reason = statusToolMissing, t+" is not in tools/list"
				p.close()
				return nil
			}
		}
		exp := b.h.exp
		if p.m.Setup != nil {
			if !first.tools[p.m.Setup.Tool] {
				r.Status, r.Reason = statusToolMissing, "setup tool "+p.m.Setup.Tool+" is not in tools/list"
				p.close()
				return nil
			}
			res, _, err := first.call(ctx, p.m.Setup.Tool, asArgs(exp.value(p.m.Setup.Args)))
			if err == nil && res.IsError {
				err = fmt.Errorf("setup %s: %s", p.m.Setup.Tool, clip(textOf(res)))
			}
			if err != nil {
				r.Status, r.Reason = statusFailed, "setup failed"
				r.problem("%v", err)
				p.close()
				return nil
			}
			ref := refOf(res)
			if ref == "" {
				r.Status, r.Reason = statusFailed, "setup returned no stored-result ref"
				p.close()
				return nil
			}
			exp = exp.with("ref", ref)
		}
		p.args = asArgs(exp.value(p.m.Args))
	}
	for _, cn := range p.conns {
		for i := 0; i < b.warmup; i++ {
			d, _ := b.once(ctx, cn, p)
			if cn == first && i == 0 {
				r.FirstMs = ms(d)
			}
		}
	}
	return p
}

func asArgs(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// outcome of one call.
type outcome int

const (
	outOK outcome = iota
	outError
	outWrong
)

// once makes one call of the scenario and checks its answer. It counts the
// call, its error or wrong answer into p.r (under p's lock when shared).
func (b *Bench) once(ctx context.Context, cn *Conn, p *prepared) (time.Duration, outcome) {
	if p.m == nil {
		d, err := cn.listTools(ctx)
		o := outOK
		if err != nil {
			o = outError
		}
		p.r.count(o, err, "")
		return d, o
	}
	res, d, err := cn.call(ctx, p.m.Tool, p.args)
	o, why := judge(res, err, p.m)
	p.r.count(o, err, why)
	return d, o
}

var countMu sync.Mutex

func (r *Result) count(o outcome, err error, why string) {
	countMu.Lock()
	defer countMu.Unlock()
	r.Calls++
	switch o {
	case outError:
		r.Errors++
		if err != nil {
			r.problem("error: %v", err)
		} else {
			r.problem("error: %s", why)
		}
	case outWrong:
		r.Wrong++
		r.problem("wrong answer: %s", why)
	}
}

// judge decides whether a result is an error, a wrong answer or right.
func judge(res *mcp.CallToolResult, err error, m *Mapping) (outcome, string) {
	if err != nil {
		return outError, err.Error()
	}
	text := textOf(res)
	if res.IsError {
		return outError, "isError result: " + clip(text)
	}
	if m.Page != nil {
		if why := CheckPage(text, *m.Page); why != "" {
			return outWrong, why
		}
	}
	if m.ExpectText != "" && !strings.Contains(text, m.ExpectText) {
		return outWrong, fmt.Sprintf("%q not in the result: %s", m.ExpectText, clip(text))
	}
	return outOK, ""
}

// latencyScenario makes runs calls per server, one at a time, alternating
// between servers on each repetition.
func (b *Bench) latencyScenario(ctx context.Context, sc scenarioInfo) {
	var ready []*prepared
	for _, s := range b.servers(sc.id) {
		if ctx.Err() != nil {
			break
		}
		if p := b.prepare(ctx, sc, s, 1); p != nil {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return
	}
	type base struct {
		in, out int64
		cpu     time.Duration
	}
	start := map[*prepared]base{}
	for _, p := range ready {
		in, out := p.wire()
		start[p] = base{in, out, p.cpu()}
		p.conns[0].wire.reset()
	}
	for rep := 0; rep < b.runs && ctx.Err() == nil; rep++ {
		for _, p := range order(ready, rep) {
			if p.m != nil && p.m.MaxRuns > 0 && rep >= p.m.MaxRuns {
				continue
			}
			c0 := selfCPU()
			d, o := b.once(ctx, p.conns[0], p)
			p.r.clientCPU += selfCPU() - c0
			p.r.measured++
			if o == outError {
				p.r.measuredErrors++
			} else {
				p.r.clientDur = append(p.r.clientDur, d)
			}
		}
	}
	for _, p := range ready {
		in, out := p.wire()
		p.r.BytesIn, p.r.BytesOut = in-start[p].in, out-start[p].out
		p.r.serverCPU = p.cpu() - start[p].cpu
		p.r.durations = p.conns[0].wire.take(p.method())
		p.close()
		p.r.finish()
	}
}

// inflightScenario keeps b.inflight calls in flight, spread over clients
// clients (for stdio servers each client is its own server process; for
// HTTP, its own session to one process), for rounds rounds of b.duration per
// server, alternating between servers round by round.
func (b *Bench) inflightScenario(ctx context.Context, sc scenarioInfo, clients int) {
	var ready []*prepared
	for _, s := range b.servers(sc.id) {
		if ctx.Err() != nil {
			break
		}
		if p := b.prepare(ctx, sc, s, clients); p != nil {
			p.r.InFlight, p.r.Clients = b.inflight, clients
			if clients > 1 && s.URL == "" {
				p.r.Note = joinNotes(p.r.Note, fmt.Sprintf("stdio: each of the %d clients is its own server process; peak RSS is the largest of them.", clients))
			}
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return
	}
	for round := 0; round < b.rounds && ctx.Err() == nil; round++ {
		for _, p := range order(ready, round) {
			in0, out0 := p.wire()
			cpu0 := p.cpu()
			for _, cn := range p.conns {
				cn.wire.reset()
			}
			c0 := selfCPU()
			wall, ds, calls, errs := b.burst(ctx, p)
			p.r.clientCPU += selfCPU() - c0
			in1, out1 := p.wire()
			p.r.serverCPU += p.cpu() - cpu0
			for _, cn := range p.conns {
				p.r.durations = append(p.r.durations, cn.wire.take(p.method())...)
			}
			p.r.wallTime += wall
			p.r.clientDur = append(p.r.clientDur, ds...)
			p.r.measured += calls
			p.r.measuredErrors += errs
			p.r.BytesIn += in1 - in0
			p.r.BytesOut += out1 - out0
		}
	}
	for _, p := range ready {
		p.close()
		p.r.finish()
	}
}

// burst runs b.inflight workers over p's clients until b.duration has
// passed, and returns the wall time until the last call came back, the
// client-side latencies of the calls that did not fail, how many calls were
// made and how many failed.
func (b *Bench) burst(ctx context.Context, p *prepared) (time.Duration, []time.Duration, int, int) {
	var (
		mu    sync.Mutex
		all   []time.Duration
		calls int
		errs  int
		wg    sync.WaitGroup
	)
	t0 := time.Now()
	deadline := t0.Add(b.duration)
	for w := 0; w < b.inflight; w++ {
		cn := p.conns[w%len(p.conns)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			n, e := 0, 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				d, o := b.once(ctx, cn, p)
				n++
				if o == outError {
					e++
				} else {
					mine = append(mine, d)
				}
			}
			mu.Lock()
			all = append(all, mine...)
			calls += n
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	return time.Since(t0), all, calls, errs
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}
