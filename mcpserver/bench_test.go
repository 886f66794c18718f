package mcpserver

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func benchEnv(b *testing.B, tools int) (*testEnv, *client.Client) {
	b.Helper()
	e := newEnvTB(b, withUpstream(tools))
	e.srv.StartSources()
	b.Cleanup(e.srv.Close)
	deadline := time.Now().Add(60 * time.Second)
	for e.srv.SourceStates()["up"] != "ready" {
		if time.Now().After(deadline) {
			b.Fatalf("source not ready: %v", e.srv.SourceStates())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return e, e.connectTB(b)
}

func callB(b *testing.B, c *client.Client, name string, args any) *mcp.CallToolResult {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %v", name, err, res)
	}
	return res
}

// timeCalls calls a tool b.N times and reports p50 and p99.
func timeCalls(b *testing.B, c *client.Client, name string, args any) {
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		callB(b, c, name, args)
		d = append(d, time.Since(start))
	}
	reportPercentiles(b, d)
}

// reportPercentiles adds p50 and p99 of the per-call durations.
func reportPercentiles(b *testing.B, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	if len(d) == 0 {
		return
	}
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

func benchToolSearch(b *testing.B, n int) {
	_, c := benchEnv(b, n)
	args := map[string]any{"query": "pubchem compound formula", "limit": 5}
	timeCalls(b, c, "tool_search", args)
}

// BenchmarkToolSearch1000 and 10000: a whole tools/call of tool_search
// through the in-process client (ranking, promotion, result encoding).
func BenchmarkToolSearch1000(b *testing.B)  { benchToolSearch(b, 1000) }
func BenchmarkToolSearch10000(b *testing.B) { benchToolSearch(b, 10000) }

// BenchmarkProxiedCall: echo through scimcp to the upstream over stdio.
func BenchmarkProxiedCall(b *testing.B) {
	_, c := benchEnv(b, 0)
	args := map[string]any{"text": "hi"}
	timeCalls(b, c, "mcp__up__echo", args)
}

// BenchmarkDirectUpstreamCall: the same echo, straight to the upstream over
// stdio, for the proxy's added cost.
func BenchmarkDirectUpstreamCall(b *testing.B) {
	c, err := client.NewStdioMCPClient(os.Args[0], []string{"SCIMCP_TEST_UPSTREAM=1", "PATH=" + os.Getenv("PATH")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"text": "hi"}
	timeCalls(b, c, "echo", args)
}
