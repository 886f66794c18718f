// Package toolkit is scimcp's tool catalogue. Each tool is a static
// definition (name, description, input and output JSON Schema derived from Go
// types with jsonschema-go, annotations) plus a thin handler over an injected
// domain service. Business logic lives in the domain packages (workspace,
// runner, npu, skills); protocol wiring lives in mcpserver.
package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
)

// Group names a set of tools that session configuration turns on or off as a
// whole. GroupBase is always on.
type Group string

const (
	GroupBase Group = "base"
)

// Handler is a tool handler; it has the shape of mcp-go's ToolHandlerFunc.
type Handler func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error)

// Tool is one tool of the catalogue.
type Tool struct {
	Def   mcp.Tool
	Group Group
	// SelfBounded tools page their own output (read_file, read_artifact,
	// read_tool_output); the result bound leaves them alone.
	SelfBounded bool
	Handler     Handler
}

// Name returns the tool's name.
func (t Tool) Name() string { return t.Def.Name }

// Spec is the static part of a tool definition.
type Spec struct {
	Name        string
	Title       string
	Description string
	Group       Group
	SelfBounded bool
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
	// Input adjusts the input schema inferred from the argument type: bounds,
	// enums, defaults that struct tags cannot express.
	Input func(s *jsonschema.Schema)
}

// schemaOptions map types jsonschema-go would get wrong: raw JSON is any
// JSON value, not an array of bytes.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
}}

// Result is what a typed handler returns: Text is what the model reads,
// Data the structuredContent (matching the output schema).
type Result[Out any] struct {
	Text string
	Data Out
	Meta map[string]any
}

// InputProblem is implemented by errors that the caller can fix (a bad path,
// an offset past the end). Handlers' other errors are infrastructure faults.
type InputProblem interface {
	error
	InputProblem() bool
}

// Errorf returns an input problem with a message the model can act on.
func Errorf(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

type inputError struct{ msg string }

func (e *inputError) Error() string      { return e.msg }
func (e *inputError) InputProblem() bool { return true }

// Define builds a Tool from a spec and a typed handler. The input schema is
// inferred from In, the output schema from Out. Before h runs, the arguments
// are validated against the input schema; a violation is an isError result
// that quotes the problem and the tool's expected arguments.
func Define[In, Out any](spec Spec, h func(ctx context.Context, in In) (Result[Out], error)) Tool {
	in, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", spec.Name, err))
	}
	if in.Properties == nil {
		in.Properties = map[string]*jsonschema.Schema{}
	}
	if spec.Input != nil {
		spec.Input(in)
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve input schema: %v", spec.Name, err))
	}
	out, err := jsonschema.For[Out](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", spec.Name, err))
	}
	dropNull(in)
	dropNull(out)
	rawIn, rawOut := mustMarshal(in), mustMarshal(out)
	usage := Usage(in)

	def := mcp.Tool{
		Name:            spec.Name,
		Title:           spec.Title,
		Description:     spec.Description,
		RawInputSchema:  rawIn,
		RawOutputSchema: rawOut,
		Annotations: mcp.ToolAnnotation{
			Title:           spec.Title,
			ReadOnlyHint:    &spec.ReadOnly,
			DestructiveHint: &spec.Destructive,
			IdempotentHint:  &spec.Idempotent,
			OpenWorldHint:   &spec.OpenWorld,
		},
	}
	handler := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, problem := decodeArgs(req, resolved)
		if problem != "" {
			return errorResult(fmt.Sprintf("invalid arguments for %s: %s. %s", spec.Name, problem, usage)), nil
		}
		var typed In
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&typed); err != nil {
			return errorResult(fmt.Sprintf("invalid arguments for %s: %v. %s", spec.Name, err, usage)), nil
		}
		res, err := h(ctx, typed)
		if err != nil {
			return ErrorResult(spec.Name, err), nil
		}
		r := &mcp.CallToolResult{
			Content:           []mcp.Content{mcp.NewTextContent(res.Text)},
			StructuredContent: res.Data,
		}
		if len(res.Meta) > 0 {
			r.Meta = mcp.NewMetaFromMap(res.Meta)
		}
		return r, nil
	}
	return Tool{Def: def, Group: spec.Group, SelfBounded: spec.SelfBounded, Handler: handler}
}

// decodeArgs returns the call's arguments as a JSON object and any schema
// violation as text.
func decodeArgs(req mcp.CallToolRequest, rs *jsonschema.Resolved) (json.RawMessage, string) {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		if req.Params.Arguments != nil {
			b, err := json.Marshal(req.Params.Arguments)
			if err != nil {
				return nil, "arguments are not JSON"
			}
			raw = b
		}
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, "arguments must be a JSON object"
	}
	if err := rs.Validate(m); err != nil {
		return nil, cleanValidation(err)
	}
	return raw, ""
}

// cleanValidation turns jsonschema-go's messages ("validating
// /properties/limit: minimum: 0/1 is less than 1.000000") into text a model
// reads at a glance ("limit must be at least 1, got 0").
func cleanValidation(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "validating root: ")
	msg = strings.ReplaceAll(msg, "validating /properties/", "")
	for _, r := range validationRewrites {
		if m := r.re.FindStringSubmatch(msg); m != nil {
			return r.format(m)
		}
	}
	return msg
}

var validationRewrites = []struct {
	re     *regexp.Regexp
	format func(m []string) string
}{
	{regexp.MustCompile(`^(\w+): minimum: (\S+) is less than (\S+)$`), func(m []string) string {
		return fmt.Sprintf("%s must be at least %s, got %s", m[1], num(m[3]), num(m[2]))
	}},
	{regexp.MustCompile(`^(\w+): maximum: (\S+) is greater than (\S+)$`), func(m []string) string {
		return fmt.Sprintf("%s must be at most %s, got %s", m[1], num(m[3]), num(m[2]))
	}},
	{regexp.MustCompile(`^(\w+): type: .* has type "(\w+)", want "(\w+)"$`), func(m []string) string {
		return fmt.Sprintf("%s must be of type %s, got %s", m[1], m[3], m[2])
	}},
	{regexp.MustCompile(`^(\w+): minLength: .*fewer than (\d+)$`), func(m []string) string {
		if m[2] == "1" {
			return m[1] + " must not be empty"
		}
		return fmt.Sprintf("%s must be at least %s characters long", m[1], m[2])
	}},
	{regexp.MustCompile(`^(\w+): maxLength: .*more than (\d+)$`), func(m []string) string {
		return fmt.Sprintf("%s must be at most %s characters long", m[1], m[2])
	}},
	{regexp.MustCompile(`^(\w+): pattern: (".*") does not match regular expression (".*")$`), func(m []string) string {
		return fmt.Sprintf("%s %s does not have the expected form %s", m[1], m[2], m[3])
	}},
	{regexp.MustCompile(`^required: missing properties: \[(.*)\]$`), func(m []string) string {
		return "missing required argument(s) " + m[1]
	}},
	{regexp.MustCompile(`^unexpected additional properties \[(.*)\]$`), func(m []string) string {
		return "unknown argument(s) " + m[1]
	}},
}

// num renders a validator number ("0/1", "2000.000000") plainly.
func num(s string) string {
	if r, ok := new(big.Rat).SetString(s); ok {
		f, _ := r.Float64()
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return s
}

// ErrorResult turns a handler error into an isError result. Input problems
// keep their message; other errors are reported as internal faults, so the
// model does not try to fix its arguments.
func ErrorResult(tool string, err error) *mcp.CallToolResult {
	var ip InputProblem
	if errors.As(err, &ip) && ip.InputProblem() {
		return errorResult(ip.Error())
	}
	return errorResult(fmt.Sprintf("%s failed inside scimcp: %v. This is not caused by your arguments; retry once, and report it if it persists.", tool, err))
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: true}
}

// Usage renders a schema's properties as a one-line reminder of the expected
// arguments, e.g. `Expected arguments: {path: string (required), offset?: integer ≥ 0}`.
func Usage(s *jsonschema.Schema) string {
	if len(s.Properties) == 0 {
		return "Expected arguments: none ({})."
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := slices.Contains(s.Required, names[i]), slices.Contains(s.Required, names[j])
		if ri != rj {
			return ri
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		p := s.Properties[n]
		typ := p.Type
		if typ == "" && len(p.Types) > 0 {
			typ = strings.Join(p.Types, "|")
		}
		part := n
		if !slices.Contains(s.Required, n) {
			part += "?"
		}
		part += ": " + typ
		switch {
		case p.Minimum != nil && p.Maximum != nil:
			part += fmt.Sprintf(" %g–%g", *p.Minimum, *p.Maximum)
		case p.Minimum != nil:
			part += fmt.Sprintf(" ≥ %g", *p.Minimum)
		case p.Maximum != nil:
			part += fmt.Sprintf(" ≤ %g", *p.Maximum)
		}
		parts = append(parts, part)
	}
	return "Expected arguments: {" + strings.Join(parts, ", ") + "}."
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// dropNull rewrites the ["null", T] types that jsonschema-go infers for
// slices and pointers to plain T: scimcp omits absent values instead of
// sending null, and a plain type reads better to a model.
func dropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		dropNull(p)
	}
	dropNull(s.Items)
}

// ptr returns a pointer to v, for schema bounds.
func ptr[T any](v T) *T { return &v }
