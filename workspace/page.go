package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Page limits from the seed: read_file and read_artifact return "at most 2000
// lines or 40 KiB" per call, continued with offset.
const (
	MaxPageLines = 2000
	MaxPageBytes = 40 * 1024
)

// Page is one page of a text file.
type Page struct {
	// Offset is the number of lines skipped before this page (0 = first line).
	Offset int
	// Lines is the number of lines returned, counting a cut line as one.
	Lines int
	// NextOffset is the offset that continues after this page, or -1 when the
	// page reaches the end of the file.
	NextOffset int
	// EOF reports that the page reaches the end of the file.
	EOF bool
	// TotalLines is the number of lines in the file, or -1 when the file is
	// too large to have been counted yet.
	TotalLines int
	// Size is the file's size in bytes.
	Size int64
	// Text is the page, verbatim but for invalid UTF-8 sequences, which are
	// replaced by U+FFFD (InvalidUTF8 says so).
	Text string
	// Bytes is len(Text).
	Bytes int
	// CutLine reports that the first line alone exceeds MaxPageBytes: Text
	// holds its first MaxPageBytes bytes (at a character boundary), and
	// CutLineBytes is the line's full length.
	CutLine      bool
	CutLineBytes int64
	// InvalidUTF8 reports that invalid UTF-8 bytes were replaced.
	InvalidUTF8 bool
	// CRLF reports that the page holds Windows line endings ("\r\n"); they
	// are returned as they are.
	CRLF bool
}

// ReadPage reads one page of text starting at line offset. limit is the
// maximum number of lines (0 means MaxPageLines); the page also stops before
// the line that would take it past MaxPageBytes. idx may be nil; a shared
// LineIndex for the same content makes far offsets cheap.
func ReadPage(r io.ReaderAt, size int64, idx *LineIndex, offset, limit int) (Page, error) {
	return ReadPageWithin(r, size, idx, offset, limit, MaxPageLines, MaxPageBytes)
}

// ReadPageWithin is ReadPage with other page bounds: at most maxLines lines
// and maxBytes bytes (read_tool_output pages stored outputs with its own
// configurable bound).
func ReadPageWithin(r io.ReaderAt, size int64, idx *LineIndex, offset, limit, maxLines, maxBytes int) (Page, error) {
	if offset < 0 {
		return Page{}, errorf(CodeInvalidRange, nil, "offset %d is negative; offset is the number of lines to skip, 0 for the start", offset)
	}
	if limit == 0 {
		limit = maxLines
	}
	if limit < 0 || limit > maxLines {
		return Page{}, errorf(CodeInvalidRange, nil, "limit %d is out of range; use 1 to %d lines (or omit it for %d)", limit, maxLines, maxLines)
	}
	if idx == nil {
		idx = NewLineIndex(size)
	}
	if err := idx.extendTo(r, offset); err != nil {
		return Page{}, err
	}
	if size <= fullIndexBytes {
		if err := idx.extendTo(r, -1); err != nil {
			return Page{}, err
		}
	}
	total := idx.Total()
	if size == 0 && offset == 0 {
		return Page{Offset: 0, NextOffset: -1, EOF: true, TotalLines: 0, Size: 0}, nil
	}
	start, ok, err := idx.lineStart(r, offset)
	if err != nil {
		return Page{}, err
	}
	if !ok {
		return Page{}, errorf(CodeOffsetPastEnd, nil, "offset %d is past the end of the file (%d lines); use an offset from 0 to %d", offset, total, max(total-1, 0))
	}

	n := int64(maxBytes)
	if rest := size - start; rest < n {
		n = rest
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return Page{}, fmt.Errorf("read at %d: %w", start, err)
	}
	reachesEnd := start+n == size
	valid := utf8.Valid(buf)

	p := Page{Offset: offset, TotalLines: total, Size: size, InvalidUTF8: !valid}
	used, cost, lines := 0, 0, 0
	for lines < limit && used < len(buf) {
		nl := bytes.IndexByte(buf[used:], '\n')
		var end int
		switch {
		case nl >= 0:
			end = used + nl + 1
		case reachesEnd:
			end = len(buf) // the last line of the file, without a newline
		default:
			end = -1 // the line continues past the buffer: it does not fit
		}
		if end < 0 {
			break
		}
		c := end - used
		if !valid {
			c = len(toValidUTF8(buf[used:end]))
		}
		if cost+c > maxBytes {
			break
		}
		used, cost, lines = end, cost+c, lines+1
	}

	text := buf[:used]
	if lines == 0 {
		// The first line alone is longer than a page: return its head, cut at a
		// character boundary, and move on to the next line.
		cut := cutAtRuneStart(buf, maxBytes)
		if !valid {
			for cut > 0 && len(toValidUTF8(buf[:cut])) > maxBytes {
				cut = cutAtRuneStart(buf, cut-1)
			}
		}
		full, err := lineLength(r, start, size)
		if err != nil {
			return Page{}, err
		}
		text, lines = buf[:cut], 1
		p.CutLine, p.CutLineBytes = true, full
		used = int(full) // for the end-of-file test below
	}
	p.Lines = lines
	p.EOF = start+int64(used) >= size || (total >= 0 && offset+lines >= total)
	p.NextOffset = -1
	if !p.EOF {
		p.NextOffset = offset + lines
	}
	if valid {
		p.Text = string(text)
	} else {
		p.Text = string(toValidUTF8(text))
		p.InvalidUTF8 = !utf8.Valid(text)
	}
	p.Bytes = len(p.Text)
	p.CRLF = strings.Contains(p.Text, "\r\n")
	return p, nil
}

// lineLength returns the length of the line starting at start, including its
// newline.
func lineLength(r io.ReaderAt, start, size int64) (int64, error) {
	buf := make([]byte, 64*1024)
	for pos := start; pos < size; {
		n, err := r.ReadAt(buf, pos)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return pos + int64(i) + 1 - start, nil
		}
		pos += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, fmt.Errorf("read at %d: %w", pos, err)
		}
	}
	return size - start, nil
}

// cutAtRuneStart returns the largest n' ≤ n such that b[:n'] does not end in
// the middle of a UTF-8 sequence.
func cutAtRuneStart(b []byte, n int) int {
	if n >= len(b) {
		return len(b)
	}
	for i := n; i > 0 && n-i < utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

func toValidUTF8(b []byte) []byte { return bytes.ToValidUTF8(b, []byte("\uFFFD")) }
