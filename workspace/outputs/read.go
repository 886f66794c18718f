package outputs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"

	"github.com/sciencediscovery/scimcp/workspace"
)

// Search bounds.
const (
	DefaultContextChars = 200
	MaxContextChars     = 4000
	DefaultMaxMatches   = 20
	MaxMatches          = 200
	MaxQueryChars       = 1000
	// matchCountCap stops counting matches in pathological cases (a
	// one-character query over 50 MB); the total is then a lower bound.
	matchCountCap = 1_000_000
	searchChunk   = 1 << 20
)

// Answer is one bounded read of a stored output.
type Answer struct {
	Record Record
	Text   string // the slice, or the rendered matches
	Bytes  int
	// Line ranges: Offset/Lines/NextOffset/EOF as in workspace.Page.
	Offset, Lines, NextOffset int
	EOF                       bool
	// Character ranges.
	CharOffset, Chars, NextCharOffset int
	TotalChars                        int // -1 when not counted
	// Searches.
	Matches        []Match
	TotalMatches   int
	MatchesCapped  bool // TotalMatches is a lower bound
	MatchesOmitted int  // found but not shown (maxMatches or the byte bound)
	// Advice is guidance about the read pattern; never a refusal.
	Advice []string
}

// Match is one literal match.
type Match struct {
	Line       int    `json:"line"`        // 1-based line of the match start
	CharOffset int    `json:"char_offset"` // character offset of the match start in the whole text
	ByteOffset int64  `json:"byte_offset"`
	Context    string `json:"context"` // the match with up to contextChars characters around it
}

// Query is a literal search.
type Query struct {
	Text          string
	ContextChars  int
	MaxMatches    int
	CaseSensitive bool
}

// Lines reads a line range (offset lines skipped, at most limit lines, at
// most ReadBytes bytes).
func (s *Store) Lines(owner, ref string, offset, limit int) (Answer, error) {
	rec, err := s.Get(owner, ref)
	if err != nil {
		return Answer{}, err
	}
	f, err := s.open(rec)
	if err != nil {
		return Answer{}, err
	}
	defer f.Close()
	maxLines := max(rec.Lines, 1)
	if limit > maxLines {
		limit = maxLines
	}
	p, err := workspace.ReadPageWithin(f, rec.Bytes, s.lineIndex(rec), offset, limit, maxLines, s.limits.ReadBytes)
	if err != nil {
		var we *workspace.Error
		if errors.As(err, &we) {
			return Answer{}, &Error{Msg: we.Msg}
		}
		return Answer{}, err
	}
	a := Answer{Record: rec, Text: p.Text, Bytes: p.Bytes, Offset: p.Offset, Lines: p.Lines, NextOffset: p.NextOffset, EOF: p.EOF, TotalChars: -1}
	s.advise(owner, &a, fmt.Sprintf("lines %d+%d", offset, p.Lines))
	return a, nil
}

func (s *Store) lineIndex(rec Record) *workspace.LineIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.index[rec.Ref]
	if !ok {
		if len(s.index) > 256 {
			clear(s.index)
		}
		idx = workspace.NewLineIndex(rec.Bytes)
		s.index[rec.Ref] = idx
	}
	return idx
}

// Chars reads charLimit characters (Unicode code points) from charOffset,
// bounded to ReadBytes bytes: the mode for text whose lines are too wide.
func (s *Store) Chars(owner, ref string, charOffset, charLimit int) (Answer, error) {
	rec, err := s.Get(owner, ref)
	if err != nil {
		return Answer{}, err
	}
	if charOffset < 0 || charLimit < 0 {
		return Answer{}, refusef("charOffset and charLimit must be ≥ 0")
	}
	if charLimit == 0 {
		charLimit = s.limits.ReadBytes
	}
	f, err := s.open(rec)
	if err != nil {
		return Answer{}, err
	}
	defer f.Close()
	start, total, err := byteOfChar(f, rec.Bytes, charOffset)
	if err != nil {
		return Answer{}, err
	}
	if start < 0 {
		return Answer{}, refusef("charOffset %d is past the end of %s (%d characters); use a charOffset below %d", charOffset, ref, total, total)
	}
	buf := make([]byte, min(int64(s.limits.ReadBytes), rec.Bytes-start))
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return Answer{}, err
	}
	// Take up to charLimit whole characters within the byte bound.
	n, chars := 0, 0
	for n < len(buf) && chars < charLimit {
		_, size := utf8.DecodeRune(buf[n:])
		if size == 1 && !utf8.FullRune(buf[n:]) && start+int64(len(buf)) < rec.Bytes {
			break // a character cut by the byte bound
		}
		n += size
		chars++
	}
	a := Answer{Record: rec, Text: string(bytes.ToValidUTF8(buf[:n], []byte("\uFFFD"))), CharOffset: charOffset, Chars: chars, TotalChars: -1}
	a.Bytes = len(a.Text)
	a.EOF = start+int64(n) >= rec.Bytes
	a.NextCharOffset = -1
	if !a.EOF {
		a.NextCharOffset = charOffset + chars
	}
	s.advise(owner, &a, fmt.Sprintf("chars %d+%d", charOffset, chars))
	return a, nil
}

// byteOfChar returns the byte offset of character number char, or -1 and the
// total character count when the text is shorter.
func byteOfChar(r io.ReaderAt, size int64, char int) (int64, int, error) {
	buf := make([]byte, 256<<10)
	var pos int64
	count := 0
	for pos < size {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		chunk := buf[:n]
		i := 0
		for i < len(chunk) {
			if count == char {
				return pos + int64(i), count, nil
			}
			if chunk[i] < utf8.RuneSelf {
				i++
			} else {
				_, sz := utf8.DecodeRune(chunk[i:])
				if sz == 1 && !utf8.FullRune(chunk[i:]) && pos+int64(n) < size {
					break // continue this character in the next chunk
				}
				i += sz
			}
			count++
		}
		pos += int64(i)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		if i == 0 {
			break
		}
	}
	if count == char && pos < size {
		return pos, count, nil
	}
	return -1, count, nil
}

// Search finds literal occurrences of q.Text. Matches do not overlap. Case
// folding, when asked for, is simple per-character lower-casing that keeps
// byte offsets (characters whose lower case is longer are compared as they
// are).
func (s *Store) Search(owner, ref string, q Query) (Answer, error) {
	rec, err := s.Get(owner, ref)
	if err != nil {
		return Answer{}, err
	}
	if q.Text == "" {
		return Answer{}, refusef("query is empty; give the literal text to find")
	}
	if utf8.RuneCountInString(q.Text) > MaxQueryChars {
		return Answer{}, refusef("query is longer than %d characters; search for a shorter distinctive part", MaxQueryChars)
	}
	if q.ContextChars == 0 {
		q.ContextChars = DefaultContextChars
	}
	if q.MaxMatches == 0 {
		q.MaxMatches = DefaultMaxMatches
	}
	if q.ContextChars < 0 || q.ContextChars > MaxContextChars {
		return Answer{}, refusef("contextChars must be 0 to %d", MaxContextChars)
	}
	if q.MaxMatches < 0 || q.MaxMatches > MaxMatches {
		return Answer{}, refusef("maxMatches must be 1 to %d", MaxMatches)
	}
	f, err := s.open(rec)
	if err != nil {
		return Answer{}, err
	}
	defer f.Close()

	needle := []byte(q.Text)
	if !q.CaseSensitive {
		needle = foldSameLength(needle)
	}
	a := Answer{Record: rec, TotalChars: -1, NextOffset: -1, NextCharOffset: -1}
	var text bytes.Buffer
	budget := s.limits.ReadBytes

	var (
		buf      = make([]byte, searchChunk)
		carry    []byte
		pos      int64 // file offset of carry[0]
		lastEnd  int64 // end of the previous match (non-overlapping)
		lineNo   = 1   // line number at countPos
		charNo   = 0   // character number at countPos
		countPos int64 // position up to which lineNo/charNo are counted
	)
	for read := int64(0); read < rec.Bytes; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), rec.Bytes-read)], read)
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Answer{}, err
		}
		window := append(carry, buf[:n]...)
		hay := window
		if !q.CaseSensitive {
			hay = foldSameLength(window)
		}
		for i := 0; ; {
			j := bytes.Index(hay[i:], needle)
			if j < 0 {
				break
			}
			at := pos + int64(i+j)
			i += j + len(needle)
			if at < lastEnd {
				continue
			}
			lastEnd = at + int64(len(needle))
			// Advance the line and character counters to the match.
			seg := window[countPos-pos : at-pos]
			lineNo += bytes.Count(seg, []byte{'\n'})
			charNo += utf8.RuneCount(seg)
			countPos = at
			a.TotalMatches++
			if a.TotalMatches >= matchCountCap {
				a.MatchesCapped = true
				break
			}
			if len(a.Matches) >= q.MaxMatches || budget <= 0 {
				a.MatchesOmitted++
				continue
			}
			m := Match{Line: lineNo, CharOffset: charNo, ByteOffset: at}
			ctx, err := contextAround(f, rec.Bytes, at, len(needle), q.ContextChars)
			if err != nil {
				return Answer{}, err
			}
			m.Context = ctx
			entry := fmt.Sprintf("--- match %d: line %d, char %d ---\n%s\n", a.TotalMatches, m.Line, m.CharOffset, m.Context)
			if len(entry) > budget {
				a.MatchesOmitted++
				budget = 0
				continue
			}
			budget -= len(entry)
			text.WriteString(entry)
			a.Matches = append(a.Matches, m)
		}
		if a.MatchesCapped {
			break
		}
		read += int64(n)
		// Keep the last len(needle)-1 bytes: a match across the chunk
		// boundary starts there, and no whole match fits in them.
		keep := min(len(needle)-1, len(window))
		// Count lines/chars of what leaves the window.
		leave := pos + int64(len(window)-keep)
		if leave > countPos {
			seg := window[countPos-pos : leave-pos]
			lineNo += bytes.Count(seg, []byte{'\n'})
			charNo += utf8.RuneCount(seg)
			countPos = leave
		}
		carry = append([]byte(nil), window[len(window)-keep:]...)
		pos = leave
	}
	a.Text = text.String()
	a.Bytes = len(a.Text)
	a.EOF = true
	key := fmt.Sprintf("query %q cs=%v", q.Text, q.CaseSensitive)
	s.advise(owner, &a, key)
	return a, nil
}

// contextAround returns the match with up to n characters on each side.
func contextAround(r io.ReaderAt, size, at int64, matchLen, n int) (string, error) {
	lo := max(at-int64(n*utf8.UTFMax), 0)
	hi := min(at+int64(matchLen)+int64(n*utf8.UTFMax), size)
	buf := make([]byte, hi-lo)
	if _, err := r.ReadAt(buf, lo); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	before := buf[:at-lo]
	after := buf[at-lo+int64(matchLen):]
	// Keep the last n characters before and the first n after.
	for utf8.RuneCount(before) > n {
		_, sz := utf8.DecodeRune(before)
		before = before[sz:]
	}
	cut := 0
	for i := 0; i < n && cut < len(after); i++ {
		_, sz := utf8.DecodeRune(after[cut:])
		cut += sz
	}
	var b bytes.Buffer
	b.Write(before)
	b.Write(buf[at-lo : at-lo+int64(matchLen)])
	b.Write(after[:cut])
	return string(bytes.ToValidUTF8(b.Bytes(), []byte("\uFFFD"))), nil
}

// foldSameLength lower-cases b character by character wherever the lower
// case has the same UTF-8 length, so offsets in the result are offsets in b.
func foldSameLength(b []byte) []byte {
	out := make([]byte, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out[i] = c
			i++
			continue
		}
		r, sz := utf8.DecodeRune(b[i:])
		l := unicode.ToLower(r)
		if r != utf8.RuneError && utf8.RuneLen(l) == sz {
			utf8.EncodeRune(out[i:], l)
		} else {
			copy(out[i:i+sz], b[i:i+sz])
		}
		i += sz
	}
	return out
}

// readLog is what one owner has read of one ref.
type readLog struct {
	seen  map[string]bool
	bytes int
}

// advise records a read and attaches guidance: after a repeated range or
// query, and once cumulative reads of the ref pass AdviseBytes and
// WarnBytes. It never refuses.
func (s *Store) advise(owner string, a *Answer, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := owner + "\x00" + a.Record.Ref
	l, ok := s.reads[k]
	if !ok {
		l = &readLog{seen: map[string]bool{}}
		s.reads[k] = l
	}
	if l.seen[key] {
		a.Advice = append(a.Advice, fmt.Sprintf("You already read this exact part of %s (%s) in this session; the stored text has not changed, so use what you read before.", a.Record.Ref, key))
	}
	l.seen[key] = true
	before := l.bytes
	l.bytes += a.Bytes
	switch {
	case l.bytes >= s.limits.WarnBytes:
		a.Advice = append(a.Advice, fmt.Sprintf("You have read %d KiB of %s so far, close to its whole size. Stop paging: search for the one fact you need with query, or re-run the command with narrower output (grep, head, tail).", l.bytes/1024, a.Record.Ref))
	case l.bytes >= s.limits.AdviseBytes && before < s.limits.AdviseBytes:
		a.Advice = append(a.Advice, fmt.Sprintf("You have read %d KiB of %s so far. A literal query search usually finds a specific fact faster than paging.", l.bytes/1024, a.Record.Ref))
	}
}
