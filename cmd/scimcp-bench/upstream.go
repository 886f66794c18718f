package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A stand-in upstream MCP server with many tools, for scimcp's tool_search
// scenario ("tool_search over 1,000 deferred tools"): scimcp-bench
// -fake-upstream N serves N tools over stdio. It speaks just enough MCP
// (initialize, tools/list, tools/call, ping) with the standard library.

var (
	fakeVerbs = []string{"fit", "plot", "load", "export", "filter", "align", "merge", "split", "score", "rank",
		"cluster", "normalize", "annotate", "convert", "validate", "summarize", "sample", "index", "compress", "render"}
	fakeNouns = []string{"spectrum", "genome", "protein", "image", "table", "series", "mesh", "graph", "corpus", "survey",
		"sequence", "reads", "variants", "peaks", "cells", "samples", "catalog", "orbit", "lattice", "molecule",
		"trajectory", "alignment", "matrix", "tensor", "signal", "waveform", "histogram", "map", "grid", "field",
		"particle", "colony", "network", "model", "dataset", "archive", "manifest", "report", "figure", "notebook",
		"sensor", "station", "galaxy", "crystal", "enzyme", "pathway", "transcript", "assembly", "scaffold", "library"}
)

// fakeTool is the i-th tool: verb_noun, described in words BM25 can rank.
func fakeTool(i int) (name, desc string) {
	v := fakeVerbs[i/len(fakeNouns)%len(fakeVerbs)]
	n := fakeNouns[i%len(fakeNouns)]
	name = v + "_" + n
	if i >= len(fakeVerbs)*len(fakeNouns) {
		name = fmt.Sprintf("%s_%d", name, i/(len(fakeVerbs)*len(fakeNouns)))
	}
	return name, fmt.Sprintf("%s the %s of a dataset and return a short summary (%s %s, tool %d).", strings.ToUpper(v[:1])+v[1:], n, v, n, i)
}

// serveFakeUpstream serves n tools on in/out until in ends.
func serveFakeUpstream(n int, in io.Reader, out io.Writer) error {
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	tools := make([]tool, n)
	for i := range tools {
		name, desc := fakeTool(i)
		tools[i] = tool{Name: name, Description: desc, InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"text": map[string]any{"type": "string", "description": "text to echo"}},
		}}
	}
	w := bufio.NewWriter(out)
	reply := func(id json.RawMessage, result any, errMsg string) error {
		msg := map[string]any{"jsonrpc": "2.0", "id": id}
		if errMsg != "" {
			msg["error"] = map[string]any{"code": -32601, "message": errMsg}
		} else {
			msg["result"] = result
		}
		b, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		w.Write(append(b, '\n'))
		return w.Flush()
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string         `json:"protocolVersion"`
				Name            string         `json:"name"`
				Arguments       map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || len(req.ID) == 0 || req.Method == "" {
			continue // a notification, or a response: nothing to answer
		}
		var err error
		switch req.Method {
		case "initialize":
			v := req.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			err = reply(req.ID, map[string]any{
				"protocolVersion": v,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "scimcp-bench-fake-upstream", "version": "1"},
			}, "")
		case "tools/list":
			err = reply(req.ID, map[string]any{"tools": tools}, "")
		case "tools/call":
			text, _ := req.Params.Arguments["text"].(string)
			err = reply(req.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": req.Params.Name + ": " + text}}}, "")
		case "ping":
			err = reply(req.ID, map[string]any{}, "")
		default:
			err = reply(req.ID, nil, "method not found: "+req.Method)
		}
		if err != nil {
			return err
		}
	}
	return sc.Err()
}
