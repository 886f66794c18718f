package artifacts

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/sciencediscovery/scimcp/workspace"
)

// Preview is how a client should show an artifact version.
type Preview string

const (
	PreviewText     Preview = "text"
	PreviewMarkdown Preview = "markdown"
	PreviewTable    Preview = "table" // CSV, TSV and other delimited tables
	PreviewJSON     Preview = "json"  // JSON, and JSON Lines
	PreviewImage    Preview = "image"
	PreviewPDF      Preview = "pdf"
	PreviewHTML     Preview = "html"
	PreviewBinary   Preview = "binary"
)

// tableRowsNeeded: a file whose name does not say it is a table must show
// at least this many consistent delimited rows before it is called one, so
// ordinary prose with a comma per line stays text.
const tableRowsNeeded = 3

// codeExts are text formats that must never be previewed as markdown or a
// table whatever their content looks like.
var codeExts = map[string]bool{
	".py": true, ".r": true, ".sh": true, ".bash": true, ".go": true, ".c": true, ".h": true, ".cpp": true,
	".js": true, ".ts": true, ".java": true, ".jl": true, ".m": true, ".pl": true, ".rb": true, ".rs": true,
	".yaml": true, ".yml": true, ".toml": true, ".xml": true, ".tex": true, ".css": true, ".sql": true,
}

// InferPreview decides, from a file's first bytes (head, up to
// workspace.SniffBytes) and its name, how it should be previewed, its media
// type and whether it is binary. The content decides; the name refines
// (a .csv that holds binary bytes is binary; a .txt that holds JSON is
// json). complete reports that head is the whole file.
func InferPreview(name string, head []byte, complete bool) (Preview, string, bool) {
	mt, binary := workspace.Sniff(name, head)
	ext := strings.ToLower(path.Ext(name))
	if binary {
		switch {
		case strings.HasPrefix(mt, "image/"):
			return PreviewImage, mt, true
		case mt == "application/pdf":
			return PreviewPDF, mt, true
		}
		return PreviewBinary, mt, true
	}
	trimmed := bytes.TrimLeft(head, " \t\r\n\ufeff")
	switch {
	case mt == "image/svg+xml" || (ext == ".svg" && bytes.Contains(head, []byte("<svg"))):
		return PreviewImage, "image/svg+xml", false
	case mt == "text/html" || looksHTML(trimmed):
		return PreviewHTML, "text/html", false
	case looksJSON(trimmed, complete):
		if mt == "text/plain" {
			mt = "application/json"
		}
		return PreviewJSON, mt, false
	case codeExts[ext]:
		return PreviewText, mt, false
	case (ext == ".csv" || ext == ".tsv") && looksTable(head, complete, 2):
		return PreviewTable, mt, false
	case ext == ".md" || ext == ".markdown" || ext == ".rmd":
		return PreviewMarkdown, mt, false
	case looksTable(head, complete, tableRowsNeeded):
		if mt == "text/plain" {
			mt = "text/csv"
			if bytes.Count(firstLine(head), []byte("\t")) > 0 {
				mt = "text/tab-separated-values"
			}
		}
		return PreviewTable, mt, false
	case looksMarkdown(head):
		if mt == "text/plain" {
			mt = "text/markdown"
		}
		return PreviewMarkdown, mt, false
	}
	return PreviewText, mt, false
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

func looksHTML(b []byte) bool {
	head := strings.ToLower(string(b[:min(len(b), 64)]))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html")
}

// looksJSON reports whether b is JSON (or JSON Lines): it starts like a
// value and decodes without a syntax error; a head cut short may end in the
// middle of a value.
func looksJSON(b []byte, complete bool) bool {
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	values := 0
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		switch {
		case err == nil:
			values++
			continue
		case errors.Is(err, io.EOF):
			return values > 0
		case errors.Is(err, io.ErrUnexpectedEOF):
			return !complete
		}
		var se *json.SyntaxError
		if !complete && errors.As(err, &se) && se.Offset >= int64(len(b))-1 {
			return true // cut in the middle of a token
		}
		return false
	}
}

// looksTable reports whether the complete lines of b parse as delimited
// rows (comma, tab or semicolon) with the same number of fields, at least
// two, in at least rows rows.
func looksTable(b []byte, complete bool, rows int) bool {
	if !complete {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		} else {
			return false
		}
	}
	for _, delim := range []rune{',', '\t', ';'} {
		if bytes.Count(firstLine(b), []byte(string(delim))) == 0 {
			continue
		}
		r := csv.NewReader(bytes.NewReader(b))
		r.Comma, r.LazyQuotes, r.ReuseRecord = delim, true, true
		n, fields, ok := 0, 0, true
		for {
			rec, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				ok = false
				break
			}
			if n == 0 {
				fields = len(rec)
			}
			n++
		}
		if ok && n >= rows && fields >= 2 {
			return true
		}
	}
	return false
}

var markdownSignals = []*regexp.Regexp{
	regexp.MustCompile(`(?m)^#{1,6} \S`),                // ATX heading
	regexp.MustCompile("(?m)^```"),                      // fenced code
	regexp.MustCompile(`\[[^\]\n]+\]\([^)\s]+\)`),       // link
	regexp.MustCompile(`(?m)^\s{0,3}[-*+] \S`),          // bullet list
	regexp.MustCompile(`(?m)^\|.*\|\s*$\n^\|[-:| ]+\|`), // table
	regexp.MustCompile(`\*\*[^*\n]+\*\*`),               // strong emphasis
}

// looksMarkdown needs two different markdown signals: one alone (a "# "
// comment line, a dash list) is common in plain text.
func looksMarkdown(b []byte) bool {
	n := 0
	for _, re := range markdownSignals {
		if re.Match(b) {
			n++
		}
	}
	return n >= 2
}
