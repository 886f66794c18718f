package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ring keeps the last bytes of a child's stderr for error messages.
type ring struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.max {
		r.buf = append(r.buf[:0], r.buf[len(r.buf)-r.max:]...)
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.TrimSpace(string(r.buf))
}

// proc is a server process the harness launched.
type proc struct {
	cmd    *exec.Cmd
	stderr *ring
	done   chan struct{}
	err    error
}

// Conn is one MCP client session to one server, with the process behind it
// when the harness launched one.
type Conn struct {
	srv    *ServerConfig
	c      *client.Client
	proc   *proc // nil when attached to a server started elsewhere
	owner  bool  // this Conn stops proc on Close
	wire   wire
	tmp    string
	url    string
	info   mcp.Implementation
	tools  map[string]bool
	closed bool
	// timeout bounds each request of this connection.
	timeout time.Duration
	// full: tools/call through client.CallTool (mcp.ParseCallToolResult);
	// otherwise through the client's transport with a lean decode.
	full bool
}

// Harness holds what every connection needs.
type Harness struct {
	scratch string
	exp     expander
	timeout time.Duration
	full    bool
	verbose bool
	logf    func(format string, a ...any)
}

var protocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION

// quietLog drops mcp-go's transport logs (for instance a failed DELETE to a
// server the harness has just stopped); problems reach the report instead.
var quietLog = slog.New(slog.DiscardHandler)

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

func initRequest() mcp.InitializeRequest {
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = protocolVersion
	req.Params.ClientInfo = mcp.Implementation{Name: "scimcp-bench", Version: "1"}
	return req
}

// start launches (or, for an HTTP server started elsewhere, connects to) a
// server and completes the initialize handshake. It returns the time from
// just before the process was started (or the first request sent) until
// the initialize response arrived.
func (h *Harness) start(ctx context.Context, sc *ServerConfig) (*Conn, time.Duration, error) {
	tmp, err := os.MkdirTemp(filepath.Join(h.scratch, "tmp"), sanitize(sc.Name)+"-")
	if err != nil {
		return nil, 0, err
	}
	exp := h.exp.with("tmp", tmp)
	if strings.Contains(strings.Join(sc.Command, " ")+sc.URL, "{port}") {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(tmp)
			return nil, 0, err
		}
		exp = exp.with("port", port)
	}
	cn := &Conn{srv: sc, tmp: tmp, url: exp.str(sc.URL), owner: true, timeout: h.timeout, full: h.full}
	var t0 time.Time
	switch {
	case len(sc.Command) > 0 && sc.URL == "":
		t0, err = cn.spawnStdio(ctx, exp)
	case len(sc.Command) > 0:
		t0, err = cn.spawnHTTP(ctx, exp, h.timeout)
	default:
		t0 = time.Now()
		err = cn.connectHTTP(ctx)
	}
	if err != nil {
		cn.Close()
		return nil, 0, err
	}
	return cn, time.Since(t0), nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

func (cn *Conn) command(exp expander) *exec.Cmd {
	args := make([]string, len(cn.srv.Command))
	for i, a := range cn.srv.Command {
		args[i] = exp.str(a)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = os.Environ()
	for k, v := range cn.srv.Env {
		cmd.Env = append(cmd.Env, k+"="+exp.str(v))
	}
	cmd.Dir = exp.str(cn.srv.Dir)
	// Its own process group, so stopping it also stops what it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	return cmd
}

func (cn *Conn) launch(cmd *exec.Cmd) error {
	p := &proc{cmd: cmd, stderr: &ring{max: 8 << 10}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	cn.proc = p
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return nil
}

func (cn *Conn) spawnStdio(ctx context.Context, exp expander) (time.Time, error) {
	cmd := cn.command(exp)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return time.Time{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return time.Time{}, err
	}
	t0 := time.Now()
	if err := cn.launch(cmd); err != nil {
		return t0, err
	}
	tr := transport.NewIO(
		bufio.NewReaderSize(countingReader{stdout, &cn.wire}, 256<<10),
		countingWriteCloser{stdin, &cn.wire}, nil)
	cn.c = client.NewClient(tr, client.WithProtocolVersion(protocolVersion))
	if err := cn.c.Start(ctx); err != nil {
		return t0, err
	}
	return t0, cn.initialize(ctx)
}

func (cn *Conn) spawnHTTP(ctx context.Context, exp expander, timeout time.Duration) (time.Time, error) {
	cmd := cn.command(exp)
	t0 := time.Now()
	if err := cn.launch(cmd); err != nil {
		return t0, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := cn.connectHTTP(ctx)
		if err == nil {
			return t0, nil
		}
		if cn.c != nil {
			cn.c.Close()
			cn.c = nil
		}
		select {
		case <-cn.proc.done:
			return t0, fmt.Errorf("server exited before it answered: %v", cn.proc.err)
		default:
		}
		if time.Now().After(deadline) || !isConnRefused(err) {
			return t0, err
		}
		time.Sleep(time.Millisecond)
	}
}

func isConnRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")
}

// newHTTPClient is an http.Client whose transport counts bytes and keeps
// enough idle connections for many requests in flight.
func newHTTPClient(w *wire) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConns = 256
	base.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: countingTransport{next: base, w: w}}
}

func (cn *Conn) connectHTTP(ctx context.Context) error {
	tr, err := transport.NewStreamableHTTP(cn.url, transport.WithHTTPBasicClient(newHTTPClient(&cn.wire)),
		transport.WithHTTPLogger(quietLog))
	if err != nil {
		return err
	}
	cn.c = client.NewClient(tr, client.WithProtocolVersion(protocolVersion))
	if err := cn.c.Start(ctx); err != nil {
		return err
	}
	return cn.initialize(ctx)
}

func (cn *Conn) initialize(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cn.timeout)
	defer cancel()
	res, err := cn.c.Initialize(ctx, initRequest())
	if err != nil {
		return cn.explain(fmt.Errorf("initialize: %w", err))
	}
	cn.info = res.ServerInfo
	return nil
}

// attach opens another client session to the same HTTP server.
func (h *Harness) attach(ctx context.Context, to *Conn) (*Conn, error) {
	if to.url == "" {
		return nil, fmt.Errorf("attach: %s is not an HTTP server", to.srv.Name)
	}
	cn := &Conn{srv: to.srv, url: to.url, proc: to.proc, timeout: to.timeout, full: to.full}
	if err := cn.connectHTTP(ctx); err != nil {
		cn.Close()
		return nil, err
	}
	return cn, nil
}

// explain adds the child's last stderr lines to an error.
func (cn *Conn) explain(err error) error {
	if cn.proc == nil {
		return err
	}
	select {
	case <-cn.proc.done:
		err = fmt.Errorf("%w (server exited: %v)", err, cn.proc.err)
	default:
	}
	if s := cn.proc.stderr.String(); s != "" {
		lines := strings.Split(s, "\n")
		if len(lines) > 5 {
			lines = lines[len(lines)-5:]
		}
		err = fmt.Errorf("%w; server stderr: %s", err, strings.Join(lines, " | "))
	}
	return err
}

// listTools runs tools/list and remembers the tool names.
func (cn *Conn) listTools(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cn.timeout)
	defer cancel()
	t0 := time.Now()
	res, err := cn.c.ListTools(ctx, mcp.ListToolsRequest{})
	d := time.Since(t0)
	if err != nil {
		return d, cn.explain(err)
	}
	if cn.tools == nil {
		cn.tools = map[string]bool{}
		for _, t := range res.Tools {
			cn.tools[t.Name] = true
		}
	}
	return d, nil
}

// lightIDs numbers the requests call sends itself, far above the client's
// own counter so the two never meet.
var lightIDs atomic.Int64

func init() { lightIDs.Store(1 << 40) }

// call runs one tools/call and returns the result and the time the client
// took, decoding included. By default the request goes through the mcp-go
// client's transport (the same framing, ids and session) and only content,
// isError and _meta are decoded: mcp.ParseCallToolResult costs about 3 ms of
// CPU for a 40 KiB page, more than the servers under test, and on two cores
// it would cap the in-flight scenarios. -client full uses client.CallTool.
func (cn *Conn) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cn.timeout)
	defer cancel()
	if cn.full {
		var req mcp.CallToolRequest
		req.Params.Name = tool
		req.Params.Arguments = args
		t0 := time.Now()
		res, err := cn.c.CallTool(ctx, req)
		return res, time.Since(t0), err
	}
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(lightIDs.Add(1)),
		Method:  string(mcp.MethodToolsCall),
		Params:  map[string]any{"name": tool, "arguments": args},
	}
	t0 := time.Now()
	resp, err := cn.c.GetTransport().SendRequest(ctx, req)
	if err != nil {
		return nil, time.Since(t0), err
	}
	if resp.Error != nil {
		return nil, time.Since(t0), resp.Error.AsError()
	}
	res, err := decodeResult(resp.Result)
	return res, time.Since(t0), err
}

// decodeResult decodes the parts of a CallToolResult the checks read.
func decodeResult(raw []byte) (*mcp.CallToolResult, error) {
	var lr struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool           `json:"isError"`
		Meta    map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &lr); err != nil {
		return nil, fmt.Errorf("decode tools/call result: %w", err)
	}
	res := &mcp.CallToolResult{IsError: lr.IsError}
	for _, c := range lr.Content {
		if c.Type == "text" {
			res.Content = append(res.Content, mcp.NewTextContent(c.Text))
		}
	}
	if lr.Meta != nil {
		res.Meta = mcp.NewMetaFromMap(lr.Meta)
	}
	return res, nil
}

// pid is the launched process's id, or 0.
func (cn *Conn) pid() int {
	if cn.proc == nil || cn.proc.cmd.Process == nil {
		return 0
	}
	return cn.proc.cmd.Process.Pid
}

// peakRSS is the launched process's peak resident set (VmHWM) in KiB, or 0
// when unknown. Only the process the harness started is measured, not its
// children: start servers directly (node …/index.js, not npx).
func (cn *Conn) peakRSS() int64 {
	pid := cn.pid()
	if pid == 0 {
		return 0
	}
	return readVmHWM(pid)
}

// cpuTime is the CPU time (user + system, all threads, and its children it
// has waited for, such as the shells it ran) the launched process has used
// so far, or 0 when unknown.
func (cn *Conn) cpuTime() time.Duration {
	if cn.proc == nil || !cn.owner {
		return 0
	}
	return readCPUTime(cn.pid())
}

// readCPUTime reads utime + stime + cutime + cstime from /proc/<pid>/stat,
// in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func readCPUTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, x := range f[11:15] {
		n, _ := strconv.ParseInt(x, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// selfCPU is the harness's own CPU time (user + system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var vmHWM = regexp.MustCompile(`(?m)^VmHWM:\s+(\d+)\s+kB`)

func readVmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := vmHWM.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// Close ends the session and, if this Conn owns the process, stops it: stdin
// is closed first (stdio servers exit on EOF), then SIGTERM, then SIGKILL, to
// the process group.
func (cn *Conn) Close() {
	if cn.closed {
		return
	}
	cn.closed = true
	if cn.c != nil {
		done := make(chan struct{})
		go func() { cn.c.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
		}
	}
	if cn.proc != nil && cn.owner {
		stop(cn.proc)
	}
	if cn.tmp != "" {
		os.RemoveAll(cn.tmp)
	}
}

func stop(p *proc) {
	pid := p.cmd.Process.Pid
	wait := func(d time.Duration) bool {
		select {
		case <-p.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	// Signals go to the group only while its leader is alive (not yet
	// reaped), so the group id cannot have been reused.
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			syscall.Kill(-pid, sig)
		}
		if wait(2 * time.Second) {
			return
		}
	}
}

// textOf joins the text contents of a result.
func textOf(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

var refPattern = regexp.MustCompile(`ref_[0-9a-f]{16}`)

// refOf finds the ref of a stored result: _meta["scimcp/output"].ref, or the
// first ref_… in its text.
func refOf(res *mcp.CallToolResult) string {
	if res != nil && res.Meta != nil {
		if o, ok := res.Meta.AdditionalFields["scimcp/output"].(map[string]any); ok {
			if r, ok := o["ref"].(string); ok && r != "" {
				return r
			}
		}
	}
	return refPattern.FindString(textOf(res))
}
