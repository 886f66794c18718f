package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sciencediscovery/scimcp/workspace"
)

// listDeadline bounds one list_files walk; past it the listing is returned
// with an inexact count rather than hanging on a slow or huge tree.
const listDeadline = 10 * time.Second

// ListFilesIn has no fields: the seed gives list_files no parameters.
type ListFilesIn struct{}

// ListEntry is one listed path.
type ListEntry struct {
	Path  string `json:"path" jsonschema:"path relative to the workspace root"`
	Type  string `json:"type" jsonschema:"file or dir"`
	Size  int64  `json:"size" jsonschema:"size in bytes (0 for directories)"`
	Mtime string `json:"mtime" jsonschema:"last modification time, RFC 3339 UTC"`
}

// ListFilesOut is list_files' structured result.
type ListFilesOut struct {
	Entries             []ListEntry `json:"entries"`
	Count               int         `json:"count" jsonschema:"number of entries returned"`
	Truncated           bool        `json:"truncated" jsonschema:"true when the listing stopped at the 500-entry cap"`
	Omitted             int         `json:"omitted" jsonschema:"entries found but not returned"`
	OmittedIsLowerBound bool        `json:"omitted_is_lower_bound,omitempty" jsonschema:"true when the walk stopped early, so omitted is a minimum"`
	SymlinksSkipped     int         `json:"symlinks_skipped" jsonschema:"symbolic links skipped (never followed)"`
	Unreadable          []string    `json:"unreadable,omitempty" jsonschema:"directories whose contents could not be read"`
}

func listFiles(ws *workspace.Workspace) Tool {
	return Define(Spec{
		Name:  "list_files",
		Title: "List workspace files",
		Description: fmt.Sprintf("Recursively lists the workspace: every file and directory with its size and modification time, breadth-first (all top-level entries first, then one level deeper, and so on), sorted by name within a folder. "+
			"Returns at most %d entries and says how many it left out; symbolic links are skipped and counted, never followed. Takes no arguments. "+
			"Paths are relative to the workspace root and can be passed to read_file as they are.", workspace.MaxListEntries),
		Group:      GroupBase,
		ReadOnly:   true,
		Idempotent: true,
	}, func(ctx context.Context, _ ListFilesIn) (Result[ListFilesOut], error) {
		ctx, cancel := context.WithTimeout(ctx, listDeadline)
		defer cancel()
		l, err := ws.List(ctx)
		if err != nil {
			return Result[ListFilesOut]{}, err
		}
		out := ListFilesOut{
			Entries:             make([]ListEntry, 0, len(l.Entries)),
			Count:               len(l.Entries),
			Truncated:           l.Omitted > 0 || !l.OmittedExact,
			Omitted:             l.Omitted,
			OmittedIsLowerBound: !l.OmittedExact,
			SymlinksSkipped:     l.Symlinks,
			Unreadable:          l.Unreadable,
		}
		var b strings.Builder
		b.WriteString(listHeader(out))
		b.WriteString("\npath\tsize\tmtime\n")
		for _, e := range l.Entries {
			le := ListEntry{Path: e.Path, Type: "file", Size: e.Size, Mtime: e.ModTime.UTC().Format(time.RFC3339)}
			size := fmt.Sprint(e.Size)
			if e.Dir {
				le.Type, size = "dir", "-"
				b.WriteString(e.Path + "/\t")
			} else {
				b.WriteString(e.Path + "\t")
			}
			b.WriteString(size + "\t" + le.Mtime + "\n")
			out.Entries = append(out.Entries, le)
		}
		return Result[ListFilesOut]{Text: b.String(), Data: out}, nil
	})
}

func listHeader(o ListFilesOut) string {
	var h string
	switch {
	case o.Count == 0 && !o.Truncated:
		h = "The workspace is empty."
	case !o.Truncated:
		h = fmt.Sprintf("%d entries (all of them).", o.Count)
	case o.OmittedIsLowerBound:
		h = fmt.Sprintf("%d entries shown; the listing stopped at the cap of %d and at least %d more were left out (the walk stopped early on a very large tree). Read deeper paths directly with read_file.", o.Count, workspace.MaxListEntries, o.Omitted)
	default:
		h = fmt.Sprintf("%d entries shown; the listing stopped at the cap of %d and left out %d more (deeper levels are listed last). Read deeper paths directly with read_file.", o.Count, workspace.MaxListEntries, o.Omitted)
	}
	if o.SymlinksSkipped > 0 {
		h += fmt.Sprintf(" %d symbolic link(s) skipped.", o.SymlinksSkipped)
	}
	if len(o.Unreadable) > 0 {
		h += fmt.Sprintf(" Could not read %d folder(s): %s.", len(o.Unreadable), strings.Join(o.Unreadable, ", "))
	}
	return h
}

// ReadFileIn are read_file's arguments.
type ReadFileIn struct {
	Path   string `json:"path" jsonschema:"file path relative to the workspace root (absolute paths under the workspace or /workspace are accepted)"`
	Offset int    `json:"offset,omitempty" jsonschema:"number of lines to skip before the page; 0 (the default) starts at the first line. Use next_offset from the previous page to continue"`
	Limit  int    `json:"limit,omitempty" jsonschema:"maximum lines to return, 1 to 2000 (default 2000); a page also stops before 40 KiB"`
}

// ReadFileOut is read_file's structured result.
type ReadFileOut struct {
	Path        string `json:"path"`
	Size        int64  `json:"size" jsonschema:"file size in bytes"`
	Mtime       string `json:"mtime"`
	MediaType   string `json:"media_type"`
	Binary      bool   `json:"binary" jsonschema:"true for binary files, which are described but never returned"`
	Offset      int    `json:"offset" jsonschema:"lines skipped before this page"`
	Lines       int    `json:"lines" jsonschema:"lines returned"`
	NextOffset  *int   `json:"next_offset,omitempty" jsonschema:"offset of the next page; absent at the end of the file"`
	EOF         bool   `json:"eof" jsonschema:"true when this page reaches the end of the file"`
	TotalLines  *int   `json:"total_lines,omitempty" jsonschema:"lines in the file, when known"`
	Bytes       int    `json:"bytes" jsonschema:"bytes of content returned"`
	Content     string `json:"content,omitempty" jsonschema:"the page's text"`
	LineCut     bool   `json:"line_cut,omitempty" jsonschema:"true when one line was longer than 40 KiB and only its head is shown"`
	LineBytes   int64  `json:"line_bytes,omitempty" jsonschema:"full length of the cut line"`
	InvalidUTF8 bool   `json:"invalid_utf8,omitempty" jsonschema:"true when invalid UTF-8 bytes were replaced by U+FFFD"`
	CRLF        bool   `json:"crlf,omitempty" jsonschema:"true when the page has Windows line endings, returned as they are"`
}

func readFile(ws *workspace.Workspace) Tool {
	return Define(Spec{
		Name:  "read_file",
		Title: "Read a workspace file",
		Description: fmt.Sprintf("Reads one page of a text file in the workspace: at most %d lines or 40 KiB, whichever comes first, starting after `offset` lines. "+
			"The result states which lines it holds, whether the file ended, and the next_offset to continue with. "+
			"Binary files (detected from content, not the name) return their media type and size only, never their bytes. "+
			"A single line longer than 40 KiB is cut, and the result says so.", workspace.MaxPageLines),
		Group:       GroupBase,
		SelfBounded: true,
		ReadOnly:    true,
		Idempotent:  true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["path"].MinLength = ptr(1)
			pageBounds(s)
		},
	}, func(ctx context.Context, in ReadFileIn) (Result[ReadFileOut], error) {
		r, err := ws.ReadFile(in.Path, in.Offset, in.Limit)
		if err != nil {
			return Result[ReadFileOut]{}, err
		}
		out := ReadFileOut{
			Path: r.Path, Size: r.Size, Mtime: r.ModTime.UTC().Format(time.RFC3339),
			MediaType: r.MediaType, Binary: r.Binary,
		}
		if r.Binary {
			out.EOF = true
			text := fmt.Sprintf("%s is a binary file (%s, %d bytes). read_file never returns the bytes of binary files; inspect it with a program that understands the format.", r.Path, r.MediaType, r.Size)
			return Result[ReadFileOut]{Text: text, Data: out}, nil
		}
		p := r.Page
		out.Offset, out.Lines, out.EOF, out.Bytes = p.Offset, p.Lines, p.EOF, p.Bytes
		out.Content, out.LineCut, out.LineBytes = p.Text, p.CutLine, p.CutLineBytes
		out.InvalidUTF8, out.CRLF = p.InvalidUTF8, p.CRLF
		if p.NextOffset >= 0 {
			out.NextOffset = ptr(p.NextOffset)
		}
		if p.TotalLines >= 0 {
			out.TotalLines = ptr(p.TotalLines)
		}
		var b strings.Builder
		b.WriteString(p.Text)
		if p.Text != "" && !strings.HasSuffix(p.Text, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(pageFooter(r.Path, out))
		return Result[ReadFileOut]{Text: b.String(), Data: out}, nil
	})
}

// pageBounds sets the bounds every paged tool shares (read_file,
// read_artifact, get_file_provenance): offset ≥ 0, limit 1 to
// workspace.MaxPageLines.
func pageBounds(s *jsonschema.Schema) {
	s.Properties["offset"].Minimum = ptr(0.0)
	s.Properties["limit"].Minimum = ptr(1.0)
	s.Properties["limit"].Maximum = ptr(float64(workspace.MaxPageLines))
}

// pageFooter tells the model where the page sits in the file and how to go on.
func pageFooter(path string, o ReadFileOut) string {
	if o.Size == 0 {
		return fmt.Sprintf("[%s is empty (0 bytes).]", path)
	}
	total := "?"
	if o.TotalLines != nil {
		total = fmt.Sprint(*o.TotalLines)
	}
	first, last := o.Offset+1, o.Offset+o.Lines
	var b strings.Builder
	fmt.Fprintf(&b, "[%s: lines %d–%d of %s (offset %d, %d lines, %d bytes).", path, first, last, total, o.Offset, o.Lines, o.Bytes)
	if o.LineCut {
		fmt.Fprintf(&b, " Line %d is %d bytes long; only its first %d bytes are shown.", first, o.LineBytes, o.Bytes)
	}
	if o.InvalidUTF8 {
		b.WriteString(" Invalid UTF-8 bytes were replaced by U+FFFD.")
	}
	if o.EOF {
		b.WriteString(" End of file.]")
	} else {
		p, _ := json.Marshal(path)
		fmt.Fprintf(&b, " More: read_file {\"path\":%s,\"offset\":%d}]", p, *o.NextOffset)
	}
	return b.String()
}
