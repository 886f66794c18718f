// Command papers-source serves a folder of PDFs as an MCP source: a small,
// real upstream for scimcp's artifact_download (and a template for wrapping
// a lab's own paper library). Over stdio it offers
//
//   - search_papers {query}: the PDFs whose file name contains every word of
//     query, as resource links (papers://<file>), with their names and sizes
//     in the structured content;
//   - get_paper {name}: one PDF as an embedded resource (base64 blob);
//   - resources/read of papers://<file>.
//
// Use it from scimcp's sources file:
//
//	{"mcpServers": {"papers": {"command": "papers-source", "args": ["--dir", "/data/papers"]}}}
//
// It never lists or reads anything outside --dir, and only *.pdf files.
package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxPaperBytes bounds one PDF served inline or through resources/read.
const maxPaperBytes = 64 << 20

const scheme = "papers://"

func main() {
	dir := flag.String("dir", ".", "folder of PDF files to serve")
	flag.Parse()
	root, err := os.OpenRoot(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "papers-source:", err)
		os.Exit(2)
	}
	lib := &library{root: root}
	s := server.NewMCPServer("papers-source", "1", server.WithToolCapabilities(false), server.WithResourceCapabilities(false, false))
	s.AddTool(mcp.NewTool("search_papers",
		mcp.WithDescription("Search the paper library by words of the file name; returns the matching PDFs as resource links."),
		mcp.WithString("query", mcp.Description("words the file name must contain (empty: every paper)")),
		mcp.WithReadOnlyHintAnnotation(true)), lib.search)
	s.AddTool(mcp.NewTool("get_paper",
		mcp.WithDescription("Return one PDF of the library, embedded in the result."),
		mcp.WithString("name", mcp.Required(), mcp.Description("the file name, as search_papers listed it")),
		mcp.WithReadOnlyHintAnnotation(true)), lib.get)
	s.AddResourceTemplate(mcp.NewResourceTemplate(scheme+"{name}", "paper", mcp.WithTemplateMIMEType("application/pdf")), lib.read)
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, "papers-source:", err)
		os.Exit(1)
	}
}

type library struct{ root *os.Root }

type paper struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
	Size int64  `json:"size"`
}

// papers lists the PDFs at the top of the folder, by name.
func (l *library) papers() ([]paper, error) {
	ents, err := fs.ReadDir(l.root.FS(), ".")
	if err != nil {
		return nil, err
	}
	var out []paper
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.EqualFold(path.Ext(e.Name()), ".pdf") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, paper{Name: e.Name(), URI: scheme + e.Name(), Size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l *library) search(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	all, err := l.papers()
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	words := strings.Fields(strings.ToLower(r.GetString("query", "")))
	res := &mcp.CallToolResult{}
	found := []paper{}
	for _, p := range all {
		name := strings.ToLower(p.Name)
		match := true
		for _, w := range words {
			match = match && strings.Contains(name, w)
		}
		if match {
			found = append(found, p)
		}
	}
	res.Content = append(res.Content, mcp.NewTextContent(fmt.Sprintf("%d paper(s) match.", len(found))))
	for _, p := range found {
		link := mcp.NewResourceLink(p.URI, p.Name, "a PDF of the library", "application/pdf")
		link.Size = &p.Size
		res.Content = append(res.Content, link)
	}
	res.StructuredContent = map[string]any{"papers": found}
	return res, nil
}

// load reads one PDF of the folder by file name.
func (l *library) load(name string) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || !strings.EqualFold(path.Ext(name), ".pdf") {
		return nil, fmt.Errorf("%q is not the name of a PDF in the library; call search_papers to list them", name)
	}
	f, err := l.root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("no paper named %q; call search_papers to list them", name)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", name)
	}
	if st.Size() > maxPaperBytes {
		return nil, fmt.Errorf("%q is %d bytes; this source serves PDFs up to %d", name, st.Size(), maxPaperBytes)
	}
	buf := make([]byte, st.Size())
	_, err = f.ReadAt(buf, 0)
	return buf, err
}

func (l *library) get(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := r.GetString("name", "")
	data, err := l.load(name)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{
		mcp.NewTextContent(fmt.Sprintf("%s, %d bytes.", name, len(data))),
		mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: scheme + name, MIMEType: "application/pdf", Blob: base64.StdEncoding.EncodeToString(data)}),
	}}, nil
}

func (l *library) read(ctx context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	name, ok := strings.CutPrefix(r.Params.URI, scheme)
	if !ok {
		return nil, fmt.Errorf("unknown resource %q", r.Params.URI)
	}
	data, err := l.load(name)
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.BlobResourceContents{URI: r.Params.URI, MIMEType: "application/pdf", Blob: base64.StdEncoding.EncodeToString(data)}}, nil
}
