package outputs

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Preview sizes: a preview shows a short head and a longer tail (errors and
// summaries come last), each cut at line boundaries where it can be.
const (
	PreviewHeadBytes = 4 * 1024
	PreviewTailBytes = 12 * 1024
	PreviewHeadLines = 40
	PreviewTailLines = 120
)

// Bounded is a result after the bound.
type Bounded struct {
	Text    string // what the model gets
	Stored  bool   // the full text was stored under Record.Ref
	Preview bool   // Text is a head/tail preview, not the full text
	Record  Record
	// Shown line ranges of a preview (1-based, inclusive).
	HeadLines, TailFrom int
}

// Bound applies the seed's bound to a result text: at most StoreAbove bytes
// pass unchanged; larger texts are stored verbatim and get a ref; above
// PreviewBytes or PreviewLines the model gets a head/tail preview instead of
// the text.
func (s *Store) Bound(owner, session, tool, text string) (Bounded, error) {
	if len(text) <= s.limits.StoreAbove {
		return Bounded{Text: text}, nil
	}
	rec, err := s.Put(owner, session, tool, text)
	if err != nil {
		return Bounded{}, err
	}
	b := Bounded{Stored: true, Record: rec}
	if len(text) <= s.limits.PreviewBytes && rec.Lines <= s.limits.PreviewLines {
		b.Text = text
		if !strings.HasSuffix(text, "\n") {
			b.Text += "\n"
		}
		b.Text += fmt.Sprintf("[scimcp: this result (%d bytes, %d lines) is stored verbatim as %s. If it leaves your context, recover a detail with read_tool_output {\"ref\":%q,\"query\":\"…\"}.]", rec.Bytes, rec.Lines, rec.Ref, rec.Ref)
		return b, nil
	}
	b.Preview = true
	headBytes := min(PreviewHeadBytes, s.limits.PreviewBytes/8)
	tailBytes := min(PreviewTailBytes, s.limits.PreviewBytes/4)
	head, headLines := headOf(text, headBytes, PreviewHeadLines)
	tail, tailLines := tailOf(text[len(head):], tailBytes, PreviewTailLines)
	tailFrom := rec.Lines - tailLines + 1
	omittedBytes := len(text) - len(head) - len(tail)
	omittedLines := rec.Lines - headLines - tailLines
	b.HeadLines, b.TailFrom = headLines, tailFrom

	var sb strings.Builder
	fmt.Fprintf(&sb, "[scimcp: this result is %d bytes in %d lines, too large to show whole; it is stored verbatim as %s. Shown: the first %d and the last %d lines. "+
		"Read the rest with read_tool_output: a literal search {\"ref\":%q,\"query\":\"error\"}, or a line range {\"ref\":%q,\"offset\":%d,\"limit\":200}.]\n",
		rec.Bytes, rec.Lines, rec.Ref, headLines, tailLines, rec.Ref, rec.Ref, headLines)
	sb.WriteString(head)
	if !strings.HasSuffix(head, "\n") && head != "" {
		sb.WriteByte('\n')
	}
	fmt.Fprintf(&sb, "[… %d lines (%d bytes) omitted; they are in %s …]\n", max(omittedLines, 0), omittedBytes, rec.Ref)
	sb.WriteString(tail)
	b.Text = sb.String()
	return b, nil
}

// headOf returns the longest prefix of whole lines within maxBytes and
// maxLines; if the first line alone is too long, its head cut at a character
// boundary.
func headOf(s string, maxBytes, maxLines int) (string, int) {
	end, lines := 0, 0
	for lines < maxLines && end < len(s) {
		i := strings.IndexByte(s[end:], '\n')
		next := len(s)
		if i >= 0 {
			next = end + i + 1
		}
		if next > maxBytes {
			break
		}
		end, lines = next, lines+1
	}
	if lines == 0 && len(s) > 0 {
		cut := min(maxBytes, len(s))
		for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut], 1
	}
	return s[:end], lines
}

// tailOf returns the longest suffix of whole lines within maxBytes and
// maxLines; if the last line alone is too long, its tail cut at a character
// boundary.
func tailOf(s string, maxBytes, maxLines int) (string, int) {
	// body is s without its final newline; each step moves start to the
	// beginning of the line before it.
	body := strings.TrimSuffix(s, "\n")
	start, lines := len(body), 0
	for lines < maxLines && start > 0 {
		prev := strings.LastIndexByte(body[:start-1], '\n') + 1
		if start == len(body) {
			prev = strings.LastIndexByte(body, '\n') + 1
		}
		if len(s)-prev > maxBytes {
			break
		}
		start, lines = prev, lines+1
	}
	if lines == 0 && len(s) > 0 {
		cut := max(len(s)-maxBytes, 0)
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		return s[cut:], 1
	}
	return s[start:], lines
}
