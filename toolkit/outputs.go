package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sciencediscovery/scimcp/workspace/outputs"
)

// ReadToolOutputIn are read_tool_output's arguments: a ref and exactly one
// mode (line range, character range, or literal query).
type ReadToolOutputIn struct {
	Ref           string `json:"ref" jsonschema:"the ref of a stored result, e.g. ref_0123456789abcdef, as named in that result"`
	Offset        *int   `json:"offset,omitempty" jsonschema:"line mode: lines to skip (0 = first line)"`
	Limit         *int   `json:"limit,omitempty" jsonschema:"line mode: maximum lines (default: as many as fit in about 40 KiB)"`
	CharOffset    *int   `json:"charOffset,omitempty" jsonschema:"character mode: characters (Unicode code points) to skip; for text whose lines are too wide"`
	CharLimit     *int   `json:"charLimit,omitempty" jsonschema:"character mode: maximum characters (default: about 40 KiB)"`
	Query         string `json:"query,omitempty" jsonschema:"search mode: literal text to find (not a regular expression)"`
	ContextChars  *int   `json:"contextChars,omitempty" jsonschema:"search mode: characters of context on each side of a match (default 200)"`
	MaxMatches    *int   `json:"maxMatches,omitempty" jsonschema:"search mode: matches to show (default 20); all are counted"`
	CaseSensitive bool   `json:"caseSensitive,omitempty" jsonschema:"search mode: match case exactly (default false)"`
}

// ReadToolOutputOut is read_tool_output's structured result.
type ReadToolOutputOut struct {
	Ref            string          `json:"ref"`
	Tool           string          `json:"tool" jsonschema:"the tool whose result this is"`
	Mode           string          `json:"mode" jsonschema:"lines, chars or query"`
	TotalBytes     int64           `json:"total_bytes"`
	TotalLines     int             `json:"total_lines"`
	Content        string          `json:"content,omitempty" jsonschema:"the slice read (line and character modes)"`
	Bytes          int             `json:"bytes" jsonschema:"bytes returned"`
	Offset         *int            `json:"offset,omitempty"`
	Lines          *int            `json:"lines,omitempty"`
	NextOffset     *int            `json:"next_offset,omitempty" jsonschema:"line mode: offset that continues; absent at the end"`
	CharOffset     *int            `json:"char_offset,omitempty"`
	Chars          *int            `json:"chars,omitempty"`
	NextCharOffset *int            `json:"next_char_offset,omitempty" jsonschema:"character mode: offset that continues; absent at the end"`
	EOF            bool            `json:"eof"`
	Matches        []outputs.Match `json:"matches,omitempty"`
	TotalMatches   *int            `json:"total_matches,omitempty"`
	MatchesOmitted int             `json:"matches_omitted,omitempty"`
	Advice         []string        `json:"advice,omitempty" jsonschema:"guidance about the reading pattern; reads are never refused"`
}

func readToolOutput(st *outputs.Store) Tool {
	l := st.Limits()
	return Define(Spec{
		Name:  "read_tool_output",
		Title: "Read a stored tool result",
		Description: fmt.Sprintf("Recovers part of a large tool result that was stored under a ref (results over %d bytes are stored verbatim; over %d bytes or %d lines you saw only a head/tail preview). "+
			"Give the ref and exactly one mode: a literal search (query, with optional contextChars, maxMatches, caseSensitive) — try this first to find one fact; "+
			"a line range (offset, limit) for normal text; or a character range (charOffset, charLimit) only when a single line is too wide. "+
			"Every answer is bounded to about %d KiB and says where it is in the whole and how to continue. Only refs of your own session can be read.",
			l.StoreAbove, l.PreviewBytes, l.PreviewLines, l.ReadBytes/1024),
		Group:       GroupBase,
		SelfBounded: true,
		ReadOnly:    true,
		Idempotent:  true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["ref"].Pattern = `^ref_[0-9a-f]{16}$`
			s.Properties["offset"].Minimum = ptr(0.0)
			s.Properties["limit"].Minimum = ptr(1.0)
			s.Properties["charOffset"].Minimum = ptr(0.0)
			s.Properties["charLimit"].Minimum = ptr(1.0)
			s.Properties["query"].MaxLength = ptr(outputs.MaxQueryChars)
			s.Properties["contextChars"].Minimum = ptr(0.0)
			s.Properties["contextChars"].Maximum = ptr(float64(outputs.MaxContextChars))
			s.Properties["maxMatches"].Minimum = ptr(1.0)
			s.Properties["maxMatches"].Maximum = ptr(float64(outputs.MaxMatches))
		},
	}, func(ctx context.Context, in ReadToolOutputIn) (Result[ReadToolOutputOut], error) {
		lineMode := in.Offset != nil || in.Limit != nil
		charMode := in.CharOffset != nil || in.CharLimit != nil
		queryMode := in.Query != "" || in.ContextChars != nil || in.MaxMatches != nil || in.CaseSensitive
		modes := 0
		for _, m := range []bool{lineMode, charMode, queryMode} {
			if m {
				modes++
			}
		}
		if modes > 1 {
			return Result[ReadToolOutputOut]{}, Errorf("give exactly one mode: a line range (offset, limit), a character range (charOffset, charLimit), or a search (query …); this call mixes them")
		}
		if queryMode && in.Query == "" {
			return Result[ReadToolOutputOut]{}, Errorf("contextChars, maxMatches and caseSensitive belong to a search; give the query text too")
		}
		owner := CallerFrom(ctx).Owner
		var (
			a    outputs.Answer
			err  error
			mode string
		)
		switch {
		case queryMode:
			mode = "query"
			a, err = st.Search(owner, in.Ref, outputs.Query{Text: in.Query, ContextChars: deref(in.ContextChars), MaxMatches: deref(in.MaxMatches), CaseSensitive: in.CaseSensitive})
		case charMode:
			mode = "chars"
			a, err = st.Chars(owner, in.Ref, deref(in.CharOffset), deref(in.CharLimit))
		default:
			mode = "lines"
			a, err = st.Lines(owner, in.Ref, deref(in.Offset), deref(in.Limit))
		}
		if err != nil {
			return Result[ReadToolOutputOut]{}, err
		}
		rec := a.Record
		out := ReadToolOutputOut{Ref: rec.Ref, Tool: rec.Tool, Mode: mode, TotalBytes: rec.Bytes, TotalLines: rec.Lines, Bytes: a.Bytes, EOF: a.EOF, Advice: a.Advice}
		var b strings.Builder
		switch mode {
		case "lines":
			out.Content, out.Offset, out.Lines = a.Text, ptr(a.Offset), ptr(a.Lines)
			b.WriteString(a.Text)
			if a.Text != "" && !strings.HasSuffix(a.Text, "\n") {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "[%s (%s result, %d lines, %d bytes): lines %d–%d.", rec.Ref, rec.Tool, rec.Lines, rec.Bytes, a.Offset+1, a.Offset+a.Lines)
			if a.NextOffset >= 0 {
				out.NextOffset = ptr(a.NextOffset)
				fmt.Fprintf(&b, " More: read_tool_output {\"ref\":%q,\"offset\":%d}]", rec.Ref, a.NextOffset)
			} else {
				b.WriteString(" End of the stored result.]")
			}
		case "chars":
			out.Content, out.CharOffset, out.Chars = a.Text, ptr(a.CharOffset), ptr(a.Chars)
			b.WriteString(a.Text)
			fmt.Fprintf(&b, "\n[%s (%s result, %d bytes): characters %d–%d.", rec.Ref, rec.Tool, rec.Bytes, a.CharOffset, a.CharOffset+a.Chars)
			if a.NextCharOffset >= 0 {
				out.NextCharOffset = ptr(a.NextCharOffset)
				fmt.Fprintf(&b, " More: read_tool_output {\"ref\":%q,\"charOffset\":%d}]", rec.Ref, a.NextCharOffset)
			} else {
				b.WriteString(" End of the stored result.]")
			}
		case "query":
			out.Matches, out.TotalMatches, out.MatchesOmitted = a.Matches, ptr(a.TotalMatches), a.MatchesOmitted
			q, _ := json.Marshal(in.Query)
			total := fmt.Sprint(a.TotalMatches)
			if a.MatchesCapped {
				total = "at least " + total
			}
			fmt.Fprintf(&b, "[%s (%s result, %d lines, %d bytes): %s match(es) of %s", rec.Ref, rec.Tool, rec.Lines, rec.Bytes, total, q)
			if !in.CaseSensitive {
				b.WriteString(" ignoring case")
			}
			if a.MatchesOmitted > 0 {
				fmt.Fprintf(&b, "; showing %d, %d not shown (narrow the query, or read around a match by line with offset)", len(a.Matches), a.MatchesOmitted)
			}
			b.WriteString(".]\n")
			b.WriteString(a.Text)
		}
		for _, adv := range a.Advice {
			b.WriteString("\n[advice: " + adv + "]")
		}
		return Result[ReadToolOutputOut]{Text: b.String(), Data: out}, nil
	})
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
