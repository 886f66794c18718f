package toolkit

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzArguments: whatever JSON arrives as arguments, the typed tool either
// runs with arguments that satisfy its schema or answers with an isError
// result; it never panics.
func FuzzArguments(f *testing.F) {
	type in struct {
		Path  string   `json:"path"`
		N     int      `json:"n,omitempty"`
		Flags []string `json:"flags,omitempty"`
	}
	tool := Define(Spec{Name: "fuzz", Description: "x"}, func(ctx context.Context, a in) (Result[struct{}], error) {
		if a.Path == "" && a.N < 0 {
			return Result[struct{}]{}, Errorf("bad")
		}
		return Result[struct{}]{Text: "ok"}, nil
	})
	for _, s := range []string{`{}`, `{"path":"a"}`, `{"path":1}`, `[]`, `null`, `{"path":"a","x":1}`, `{"path":"a","n":1e400}`, `{"path":"a","flags":[1,2]}`, `"str"`, `{"path":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req := mcp.CallToolRequest{}
		req.Params.Name = "fuzz"
		req.Params.RawArguments = json.RawMessage(raw)
		res, err := tool.Handler(context.Background(), req)
		if err != nil || res == nil {
			t.Fatalf("handler returned %v, %v", res, err)
		}
	})
}
