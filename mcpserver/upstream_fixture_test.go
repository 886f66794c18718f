package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// serveTestUpstream is a small MCP server the tests run as an upstream
// source (the test binary re-executed with SCIMCP_TEST_UPSTREAM=1). It
// offers: echo; pick (a oneOf schema); slow (progress notifications); crash
// (exits the process); grow (adds a tool, so the server sends
// tools/list_changed); two tools whose long names collide after truncation;
// and SCIMCP_TEST_UPSTREAM_TOOLS synthetic tools.
func serveTestUpstream() int {
	s := server.NewMCPServer("test-upstream", "1", server.WithToolCapabilities(true))
	text := func(t string) *mcp.CallToolResult { return mcp.NewToolResultText(t) }
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo the given text back unchanged."),
		mcp.WithString("text", mcp.Required(), mcp.Description("text to echo"))),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("echo: " + r.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("pick", "Pick a sample either by its id or by its barcode.", json.RawMessage(
		`{"type":"object","oneOf":[{"required":["id"]},{"required":["barcode"]}],"properties":{"id":{"type":"integer"},"barcode":{"type":"string","pattern":"^BC[0-9]+$"}},"additionalProperties":false}`)),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprintf("picked %v", r.GetArguments())), nil
		})
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Wait and report progress.")),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if r.Params.Meta != nil && r.Params.Meta.ProgressToken != nil {
				for i := 1; i <= 3; i++ {
					s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": r.Params.Meta.ProgressToken, "progress": i, "total": 3})
					time.Sleep(50 * time.Millisecond)
				}
			}
			return text("slow done"), nil
		})
	s.AddTool(mcp.NewTool("crash", mcp.WithDescription("Exit the upstream process at once.")),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(mcp.NewTool("grow", mcp.WithDescription("Add a tool named grown.")),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(mcp.NewTool("grown", mcp.WithDescription("A tool that appeared later.")),
				func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("grown ran"), nil
				})
			return text("grew"), nil
		})
	long := strings.Repeat("very_long_tool_name_", 4)
	for _, suffix := range []string{"alpha", "omega"} {
		s.AddTool(mcp.NewTool(long+suffix, mcp.WithDescription("A tool with a long name: "+suffix)),
			func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(suffix), nil
			})
	}
	n, _ := strconv.Atoi(os.Getenv("SCIMCP_TEST_UPSTREAM_TOOLS"))
	topics := []string{"weather", "calendar", "email", "invoice", "github", "slack", "spreadsheet", "translate", "image", "music"}
	verbs := []string{"list", "get", "create", "delete", "update", "search", "export", "import"}
	for i := 0; i < n; i++ {
		topic, verb := topics[i%len(topics)], verbs[(i/len(topics))%len(verbs)]
		s.AddTool(mcp.NewTool(fmt.Sprintf("%s_%s_%d", verb, topic, i), mcp.WithDescription(fmt.Sprintf("%s %s items of the account", verb, topic)),
			mcp.WithString("id", mcp.Description("item id"))),
			func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
	}
	if n > 0 {
		s.AddTool(mcp.NewTool("get_compound_by_cid", mcp.WithDescription("Fetch a PubChem compound record (formula, weight, SMILES) by its CID."),
			mcp.WithNumber("cid", mcp.Required(), mcp.Description("PubChem compound identifier"))),
			func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text("C9H8O4"), nil
			})
	}
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
