package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/toolkit"
)

func TestListAndReadThroughClient(t *testing.T) {
	e := newEnv(t, nil)
	var big strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&big, "row %d\n", i)
	}
	e.write(t, "data/big.txt", big.String())
	e.write(t, "notes.md", "# notes\n")
	if err := os.Symlink("/etc", filepath.Join(e.dir, "etc-link")); err != nil {
		t.Fatal(err)
	}
	c := e.connect(t)

	if got := toolNames(t, c); !slices.Equal(got, []string{"execution_cancel", "execution_logs", "execution_status", "list_files", "read_file", "read_tool_output", "run_shell"}) {
		t.Fatalf("tools/list = %v", got)
	}

	res := call(t, c, "list_files", "")
	var lf toolkit.ListFilesOut
	structured(t, res, &lf)
	if res.IsError || lf.Count != 3 || lf.SymlinksSkipped != 1 || lf.Truncated {
		t.Fatalf("list_files: %s", text(res))
	}
	if lf.Entries[0].Path != "data" || lf.Entries[0].Type != "dir" || lf.Entries[2].Path != "data/big.txt" || lf.Entries[2].Size != int64(big.Len()) {
		t.Fatalf("entries: %+v", lf.Entries)
	}

	res = call(t, c, "read_file", `{"path":"data/big.txt","offset":4000}`)
	var rf toolkit.ReadFileOut
	structured(t, res, &rf)
	if res.IsError || rf.Lines != 1000 || !rf.EOF || rf.NextOffset != nil || *rf.TotalLines != 5000 {
		t.Fatalf("read_file offset 4000: %+v", rf)
	}
	if !strings.HasPrefix(rf.Content, "row 4001\n") || !strings.HasSuffix(rf.Content, "row 5000\n") {
		t.Fatalf("content: %.40q…", rf.Content)
	}
	if !strings.Contains(text(res), "lines 4001–5000 of 5000") || !strings.Contains(text(res), "End of file") {
		t.Fatalf("footer: %s", text(res)[len(text(res))-200:])
	}

	res = call(t, c, "read_file", `{"path":"data/big.txt"}`)
	structured(t, res, &rf)
	if rf.Lines != 2000 || rf.NextOffset == nil || *rf.NextOffset != 2000 || rf.EOF {
		t.Fatalf("first page: lines=%d next=%v eof=%v", rf.Lines, rf.NextOffset, rf.EOF)
	}
	if !strings.Contains(text(res), `More: read_file {"path":"data/big.txt","offset":2000}`) {
		t.Fatalf("continuation hint missing: …%s", text(res)[len(text(res))-150:])
	}
}

// TestBadInput: each bad call is a clear isError result, and the server keeps
// serving afterwards.
func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.txt", "one\ntwo\n")
	if err := os.Mkdir(filepath.Join(e.dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := e.connect(t)
	cases := []struct{ name, args, want string }{
		{"read_file", `{}`, `missing required argument(s) "path"`},
		{"read_file", `{"path":"a.txt","bogus":1}`, `unknown argument(s) "bogus"`},
		{"read_file", `{"path":7}`, "path must be of type string, got integer"},
		{"read_file", `{"path":"a.txt","limit":0}`, "limit must be at least 1, got 0"},
		{"read_file", `{"path":"a.txt","limit":2001}`, "limit must be at most 2000, got 2001"},
		{"read_file", `{"path":"a.txt","offset":-1}`, "offset must be at least 0, got -1"},
		{"read_file", `{"path":"a.txt","offset":1.5}`, "integer"},
		{"read_file", `{"path":"a.txt","offset":99}`, "past the end"},
		{"read_file", `{"path":"a.txt","offset":1e300}`, "offset"},
		{"read_file", `{"path":""}`, "path must not be empty"},
		{"read_file", `{"path":"a.txt\u0000b"}`, "NUL"},
		{"read_file", `{"path":"dir"}`, "is a directory"},
		{"read_file", `{"path":"gone.txt"}`, "does not exist"},
		{"read_file", `{"path":"../x"}`, "leaves the workspace"},
		{"read_file", `{"path":"/etc/passwd"}`, "outside the workspace"},
		{"read_file", `[1,2]`, "JSON object"},
		{"list_files", `{"path":"x"}`, `unknown argument(s) "path"`},
	}
	for _, tc := range cases {
		res := call(t, c, tc.name, tc.args)
		if !res.IsError {
			t.Errorf("%s %s: not an error: %s", tc.name, tc.args, text(res))
			continue
		}
		if !strings.Contains(text(res), tc.want) {
			t.Errorf("%s %s: error %q does not mention %q", tc.name, tc.args, text(res), tc.want)
		}
	}
	// Schema errors remind the model of the expected arguments.
	if res := call(t, c, "read_file", `{}`); !strings.Contains(text(res), "Expected arguments: {path: string (required)") &&
		!strings.Contains(text(res), "Expected arguments: {path: string") {
		t.Errorf("no usage reminder: %s", text(res))
	}
	// Unknown tool: a protocol error, and the server keeps serving.
	req := mcp.CallToolRequest{}
	req.Params.Name = "no_such_tool"
	if _, err := c.CallTool(context.Background(), req); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown tool: %v", err)
	}
	if res := call(t, c, "read_file", `{"path":"a.txt"}`); res.IsError || !strings.HasPrefix(text(res), "one\ntwo\n") {
		t.Fatalf("server stopped serving: %s", text(res))
	}
}

// fakeTool is a tool of an optional group, for visibility tests.
func fakeTool(name string, g toolkit.Group) toolkit.Tool {
	return toolkit.Define(toolkit.Spec{Name: name, Description: "test", Group: g},
		func(ctx context.Context, _ struct{}) (toolkit.Result[struct{}], error) {
			return toolkit.Result[struct{}]{Text: "ran " + name + " for " + toolkit.CallerFrom(ctx).Session}, nil
		})
}

func TestGroupsAndPolicy(t *testing.T) {
	t.Run("disabled group is hidden and uncallable", func(t *testing.T) {
		e := newEnv(t, nil, fakeTool("web_probe", "web"))
		c := e.connect(t)
		if slices.Contains(toolNames(t, c), "web_probe") {
			t.Fatal("tool of a disabled group listed")
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "web_probe"
		if _, err := c.CallTool(context.Background(), req); err == nil {
			t.Fatal("tool of a disabled group callable")
		}
	})
	t.Run("enabled group", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Groups = []toolkit.Group{"web"} }, fakeTool("web_probe", "web"))
		c := e.connect(t)
		if !slices.Contains(toolNames(t, c), "web_probe") {
			t.Fatal("tool of an enabled group not listed")
		}
		if res := call(t, c, "web_probe", ""); res.IsError || !strings.HasPrefix(text(res), "ran web_probe for ") || strings.HasSuffix(text(res), "for ") {
			t.Fatalf("call: %s", text(res))
		}
	})
	t.Run("global policy", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.ToolPolicy = []string{"read_file"} })
		c := e.connect(t)
		if got := toolNames(t, c); !slices.Equal(got, []string{"read_file"}) {
			t.Fatalf("tools/list = %v", got)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "list_files"
		if _, err := c.CallTool(context.Background(), req); err == nil {
			t.Fatal("tool outside the policy is callable")
		}
	})
	t.Run("session policy narrows one session only", func(t *testing.T) {
		e := newEnv(t, nil, fakeTool("whoami", toolkit.GroupBase))
		a, b := e.connect(t), e.connect(t)
		if n := len(e.srv.Sessions()); n != 2 {
			t.Fatalf("%d sessions, want 2", n)
		}
		target := strings.TrimPrefix(text(call(t, a, "whoami", "")), "ran whoami for ")
		if !e.srv.SetSessionPolicy(target, []string{"list_files"}) {
			t.Fatalf("SetSessionPolicy(%q): unknown session", target)
		}
		if got := toolNames(t, a); !slices.Equal(got, []string{"list_files"}) {
			t.Fatalf("narrowed session sees %v", got)
		}
		if got := toolNames(t, b); len(got) != 8 {
			t.Fatalf("other session sees %v", got)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "read_file"
		req.Params.Arguments = map[string]any{"path": "x"}
		if _, err := a.CallTool(context.Background(), req); err == nil {
			t.Fatal("narrowed session can call read_file")
		}
	})
}

func TestSessionRecorded(t *testing.T) {
	e := newEnv(t, nil)
	c := e.connect(t)
	call(t, c, "list_files", "")
	ss := e.srv.Sessions()
	if len(ss) != 1 {
		t.Fatalf("sessions: %+v", ss)
	}
	rec, ok, err := e.store.GetSession(ss[0].ID)
	if err != nil || !ok || rec.ClientName != "scimcp-test" || rec.ProtocolVersion == "" {
		t.Fatalf("stored session: ok=%v err=%v %+v", ok, err, rec)
	}
	c.Close()
	rec, _, _ = e.store.GetSession(ss[0].ID)
	if rec.EndedAt == nil {
		t.Fatal("session end not recorded")
	}
}
