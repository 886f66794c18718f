package downloads

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
)

// MaxCandidates bounds the candidates one result offers; the rest are
// counted, not listed.
const MaxCandidates = 50

// Kinds of candidate.
const (
	KindResourceLink = "resource_link"     // a resource_link content item
	KindEmbedded     = "embedded_resource" // a resource content item with its text or blob
	KindURL          = "url"               // an http(s) URL in the structured content
)

// Candidate is one thing an upstream result offered for download.
type Candidate struct {
	ID        string `json:"candidateId"`
	Kind      string `json:"kind"`
	URI       string `json:"uri"`
	Name      string `json:"name,omitempty"`
	Title     string `json:"title,omitempty"`
	MediaType string `json:"mediaType,omitempty" jsonschema:"as the source declared it"`
	Size      int64  `json:"size,omitempty" jsonschema:"in bytes, as declared (embedded: exact); 0 when unknown"`
	// Where names the place in the result: content[2], or a JSON path in
	// structuredContent.
	Where string `json:"where"`

	content int // index of the content item (resource kinds)
}

// Candidates lists what a raw tools/call result offers for download:
// resource links, embedded resources, and http(s) URLs found as whole
// string values in its structuredContent (or, for a result without one, in
// a text item that is a JSON document). IDs are c1, c2, ... in that order,
// so the same result always yields the same IDs. more counts candidates
// past MaxCandidates.
func Candidates(raw []byte) (list []Candidate, more int) {
	if !mayHoldURL(raw) && !bytes.Contains(raw, []byte(`"resource`)) {
		return nil, 0 // most results: nothing to offer, and no need to decode
	}
	var res struct {
		Content    []json.RawMessage `json:"content"`
		Structured json.RawMessage   `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &res) != nil {
		return nil, 0
	}
	add := func(c Candidate) {
		if len(list) == MaxCandidates {
			more++
			return
		}
		c.ID = "c" + strconv.Itoa(len(list)+1)
		list = append(list, c)
	}
	var jsonTexts []json.RawMessage
	for i, item := range res.Content {
		var it struct {
			Type     string          `json:"type"`
			URI      string          `json:"uri"`
			Name     string          `json:"name"`
			Title    string          `json:"title"`
			MimeType string          `json:"mimeType"`
			Size     *int64          `json:"size"`
			Text     json.RawMessage `json:"text"`
			Resource *embedded       `json:"resource"`
		}
		if json.Unmarshal(item, &it) != nil {
			continue
		}
		where := fmt.Sprintf("content[%d]", i)
		switch it.Type {
		case "resource_link":
			if it.URI == "" {
				continue
			}
			c := Candidate{Kind: KindResourceLink, URI: it.URI, Name: it.Name, Title: it.Title, MediaType: it.MimeType, Where: where, content: i}
			if it.Size != nil && *it.Size > 0 {
				c.Size = *it.Size
			}
			add(c)
		case "resource":
			if it.Resource == nil || it.Resource.URI == "" {
				continue
			}
			data, err := it.Resource.data()
			if err != nil {
				continue
			}
			add(Candidate{Kind: KindEmbedded, URI: it.Resource.URI, Name: nameOf(it.Resource.URI), MediaType: it.Resource.MimeType, Size: int64(len(data)), Where: where, content: i})
		case "text":
			// Only a text that is a JSON document is searched, and only
			// when there is no structuredContent: plain text is not even
			// unescaped.
			if !hasStructured(res.Structured) && looksJSON(it.Text) {
				var t string
				if json.Unmarshal(it.Text, &t) == nil {
					if b := bytes.TrimSpace([]byte(t)); json.Valid(b) {
						jsonTexts = append(jsonTexts, b)
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	walkURLs := func(doc json.RawMessage, root string) {
		if !mayHoldURL(doc) {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		walk(v, root, func(where func() string, s string) {
			if seen[s] {
				return
			}
			seen[s] = true
			if len(list) == MaxCandidates {
				more++ // counted, not described
				return
			}
			add(Candidate{Kind: KindURL, URI: s, Name: nameOf(s), Where: where()})
		})
	}
	if hasStructured(res.Structured) {
		walkURLs(res.Structured, "structuredContent")
	} else {
		for i, t := range jsonTexts {
			walkURLs(t, fmt.Sprintf("text[%d]", i))
		}
	}
	return list, more
}

// walk calls fn for every string value of v that is a whole http(s) URL, in
// a stable order (object keys sorted). The path is built only for matches:
// a large result is mostly other values.
func walk(v any, root string, fn func(where func() string, s string)) {
	var path []any // string keys and int indexes below root
	var visit func(v any)
	visit = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				path = append(path, k)
				visit(x[k])
				path = path[:len(path)-1]
			}
		case []any:
			for i, e := range x {
				path = append(path, i)
				visit(e)
				path = path[:len(path)-1]
			}
		case string:
			if isURL(x) {
				fn(func() string { return render(root, path) }, strings.TrimSpace(x))
			}
		}
	}
	visit(v)
}

// isURL reports whether s is one whole http(s) URL with a host.
func isURL(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) < len("http://x") || len(s) > 2048 {
		return false
	}
	if !strings.EqualFold(s[:7], "http://") && !strings.EqualFold(s[:8], "https://") {
		return false
	}
	if strings.ContainsAny(s, " \t\n") {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func render(root string, path []any) string {
	var b strings.Builder
	b.WriteString(root)
	for _, p := range path {
		switch x := p.(type) {
		case string:
			b.WriteByte('.')
			b.WriteString(x)
		case int:
			fmt.Fprintf(&b, "[%d]", x)
		}
	}
	return b.String()
}

type embedded struct {
	URI      string  `json:"uri"`
	MimeType string  `json:"mimeType"`
	Text     *string `json:"text"`
	Blob     *string `json:"blob"`
}

func (e *embedded) data() ([]byte, error) {
	switch {
	case e.Blob != nil:
		return base64.StdEncoding.DecodeString(*e.Blob)
	case e.Text != nil:
		return []byte(*e.Text), nil
	}
	return nil, fmt.Errorf("the embedded resource %s has neither text nor blob", e.URI)
}

// embeddedData returns the bytes of an embedded candidate from its result.
func embeddedData(raw []byte, c Candidate) ([]byte, string, error) {
	var res struct {
		Content []struct {
			Resource *embedded `json:"resource"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, "", err
	}
	if c.content >= len(res.Content) || res.Content[c.content].Resource == nil {
		return nil, "", fmt.Errorf("the result no longer holds %s", c.Where)
	}
	r := res.Content[c.content].Resource
	data, err := r.data()
	return data, r.MimeType, err
}

// ResourceData reads the bytes of uri from a raw resources/read result.
func ResourceData(raw []byte, uri string) ([]byte, string, error) {
	var res struct {
		Contents []embedded `json:"contents"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, "", fmt.Errorf("the source's resources/read answer is not readable: %v", err)
	}
	if len(res.Contents) == 0 {
		return nil, "", fmt.Errorf("the source returned no content for %s", uri)
	}
	pick := res.Contents[0]
	for _, c := range res.Contents {
		if c.URI == uri {
			pick = c
			break
		}
	}
	data, err := pick.data()
	return data, pick.MimeType, err
}

// nameOf returns the last path segment of a URI.
func nameOf(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	b := path.Base(p)
	if b == "." || b == "/" {
		return ""
	}
	if s, err := url.PathUnescape(b); err == nil {
		b = s
	}
	return b
}

func hasStructured(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}

// looksJSON reports whether a JSON string literal holds text that starts,
// after white space, with { or [.
func looksJSON(lit json.RawMessage) bool {
	if len(lit) < 2 || lit[0] != '"' {
		return false
	}
	for i := 1; i < len(lit); i++ {
		switch c := lit[i]; {
		case c == ' ':
		case c == '\\' && i+1 < len(lit) && (lit[i+1] == 'n' || lit[i+1] == 't' || lit[i+1] == 'r'):
			i++
		default:
			return c == '{' || c == '['
		}
	}
	return false
}

// mayHoldURL is a fast test that rules out JSON with no URL at all: every
// http(s) URL has "://" (written ":\/\/" when slashes are escaped).
func mayHoldURL(doc []byte) bool {
	return bytes.Contains(doc, []byte("://")) || bytes.Contains(doc, []byte(`:\/\/`))
}
