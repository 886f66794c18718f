package workspace

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// numbered returns n lines "line 1\n" … "line n\n".
func numbered(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.Bytes()
}

func page(t *testing.T, content []byte, offset, limit int) Page {
	t.Helper()
	p, err := ReadPage(bytes.NewReader(content), int64(len(content)), nil, offset, limit)
	if err != nil {
		t.Fatalf("ReadPage(offset=%d, limit=%d): %v", offset, limit, err)
	}
	return p
}

func TestReadPageLineLimit(t *testing.T) {
	// Exactly MaxPageLines lines: one page, end of file.
	exact := numbered(MaxPageLines)
	p := page(t, exact, 0, 0)
	if p.Lines != MaxPageLines || !p.EOF || p.NextOffset != -1 || p.TotalLines != MaxPageLines {
		t.Fatalf("exactly %d lines: got lines=%d eof=%v next=%d total=%d", MaxPageLines, p.Lines, p.EOF, p.NextOffset, p.TotalLines)
	}
	if p.Text != string(exact) {
		t.Fatal("page text differs from the file")
	}
	// One line more: the page stops at MaxPageLines and continues at it.
	over := numbered(MaxPageLines + 1)
	p = page(t, over, 0, 0)
	if p.Lines != MaxPageLines || p.EOF || p.NextOffset != MaxPageLines {
		t.Fatalf("%d lines: got lines=%d eof=%v next=%d", MaxPageLines+1, p.Lines, p.EOF, p.NextOffset)
	}
	p = page(t, over, MaxPageLines, 0)
	if p.Lines != 1 || !p.EOF || p.Text != fmt.Sprintf("line %d\n", MaxPageLines+1) {
		t.Fatalf("last page: lines=%d eof=%v text=%q", p.Lines, p.EOF, p.Text)
	}
}

func TestReadPageByteLimit(t *testing.T) {
	// 40 lines of exactly 1 KiB (with newline) fill 40 KiB exactly.
	line := strings.Repeat("x", 1023) + "\n"
	exact := []byte(strings.Repeat(line, MaxPageBytes/1024))
	p := page(t, exact, 0, 0)
	if p.Bytes != MaxPageBytes || p.Lines != 40 || !p.EOF {
		t.Fatalf("exactly 40 KiB: bytes=%d lines=%d eof=%v", p.Bytes, p.Lines, p.EOF)
	}
	// One byte more (a 41st line of one char without newline): it must not
	// fit, and must be the next page.
	over := append(append([]byte{}, exact...), 'y')
	p = page(t, over, 0, 0)
	if p.Bytes != MaxPageBytes || p.Lines != 40 || p.EOF || p.NextOffset != 40 {
		t.Fatalf("40 KiB + 1: bytes=%d lines=%d eof=%v next=%d", p.Bytes, p.Lines, p.EOF, p.NextOffset)
	}
	p = page(t, over, 40, 0)
	if p.Text != "y" || !p.EOF || p.TotalLines != 41 {
		t.Fatalf("tail page: %q eof=%v total=%d", p.Text, p.EOF, p.TotalLines)
	}
}

func TestReadPageLongLine(t *testing.T) {
	long := strings.Repeat("é", MaxPageBytes) // 2 bytes per rune, 80 KiB
	content := []byte("short\n" + long + "\nafter\n")
	p := page(t, content, 1, 0)
	if !p.CutLine || p.Lines != 1 || p.NextOffset != 2 || p.EOF {
		t.Fatalf("cut line: cut=%v lines=%d next=%d eof=%v", p.CutLine, p.Lines, p.NextOffset, p.EOF)
	}
	if p.Bytes > MaxPageBytes || !utf8.ValidString(p.Text) || !strings.HasPrefix(long, p.Text) {
		t.Fatalf("cut text: %d bytes, valid=%v", p.Bytes, utf8.ValidString(p.Text))
	}
	if p.CutLineBytes != int64(len(long)+1) {
		t.Fatalf("CutLineBytes = %d, want %d", p.CutLineBytes, len(long)+1)
	}
	if p = page(t, content, 2, 0); p.Text != "after\n" || !p.EOF {
		t.Fatalf("after the long line: %q eof=%v", p.Text, p.EOF)
	}
	// The page before the long line stops before it.
	if p = page(t, content, 0, 0); p.Lines != 1 || p.Text != "short\n" || p.NextOffset != 1 {
		t.Fatalf("page before long line: lines=%d text=%q next=%d", p.Lines, p.Text, p.NextOffset)
	}
	// A single long last line without newline: cut, and EOF.
	p = page(t, []byte(long), 0, 0)
	if !p.CutLine || !p.EOF || p.NextOffset != -1 {
		t.Fatalf("single long line: cut=%v eof=%v next=%d", p.CutLine, p.EOF, p.NextOffset)
	}
}

func TestReadPageEdges(t *testing.T) {
	t.Run("empty file", func(t *testing.T) {
		p := page(t, nil, 0, 0)
		if p.Lines != 0 || !p.EOF || p.TotalLines != 0 || p.Text != "" {
			t.Fatalf("empty: %+v", p)
		}
		_, err := ReadPage(bytes.NewReader(nil), 0, nil, 1, 0)
		if !IsCode(err, CodeOffsetPastEnd) {
			t.Fatalf("offset 1 of empty file: %v", err)
		}
	})
	t.Run("no trailing newline", func(t *testing.T) {
		p := page(t, []byte("a\nb"), 0, 0)
		if p.Lines != 2 || p.TotalLines != 2 || p.Text != "a\nb" || !p.EOF {
			t.Fatalf("%+v", p)
		}
		p = page(t, []byte("a\nb"), 1, 0)
		if p.Text != "b" || p.Lines != 1 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("offset past end", func(t *testing.T) {
		_, err := ReadPage(bytes.NewReader(numbered(10)), int64(len(numbered(10))), nil, 10, 0)
		if !IsCode(err, CodeOffsetPastEnd) || !strings.Contains(err.Error(), "10 lines") || !strings.Contains(err.Error(), "0 to 9") {
			t.Fatalf("offset 10 of 10 lines: %v", err)
		}
		// The last line is fine.
		if p := page(t, numbered(10), 9, 0); p.Text != "line 10\n" {
			t.Fatalf("offset 9: %q", p.Text)
		}
	})
	t.Run("bad ranges", func(t *testing.T) {
		c := numbered(3)
		for _, tc := range []struct{ off, lim int }{{-1, 0}, {0, -1}, {0, MaxPageLines + 1}, {1 << 60, 0}} {
			_, err := ReadPage(bytes.NewReader(c), int64(len(c)), nil, tc.off, tc.lim)
			if err == nil {
				t.Errorf("offset=%d limit=%d: no error", tc.off, tc.lim)
			}
		}
	})
	t.Run("limit", func(t *testing.T) {
		p := page(t, numbered(10), 2, 3)
		if p.Text != "line 3\nline 4\nline 5\n" || p.NextOffset != 5 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("crlf", func(t *testing.T) {
		p := page(t, []byte("a\r\nb\r\nc\r\n"), 1, 1)
		if p.Text != "b\r\n" || !p.CRLF || p.TotalLines != 3 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("invalid utf8", func(t *testing.T) {
		p := page(t, []byte("ok\nbad \xff\xfe here\n"), 0, 0)
		if !p.InvalidUTF8 || !utf8.ValidString(p.Text) || !strings.Contains(p.Text, "bad \uFFFD here") {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("only newlines", func(t *testing.T) {
		p := page(t, []byte("\n\n\n"), 0, 0)
		if p.Lines != 3 || p.TotalLines != 3 || !p.EOF {
			t.Fatalf("%+v", p)
		}
	})
}

// TestReadPageEveryOffset pages through a file with a shared index at every
// offset and checks each page against a naive split.
func TestReadPageEveryOffset(t *testing.T) {
	content := numbered(3*indexStep + 17)
	lines := strings.SplitAfter(string(content), "\n")
	lines = lines[:len(lines)-1]
	idx := NewLineIndex(int64(len(content)))
	for off := 0; off < len(lines); off += 7 {
		p, err := ReadPage(bytes.NewReader(content), int64(len(content)), idx, off, 5)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join(lines[off:min(off+5, len(lines))], "")
		if p.Text != want {
			t.Fatalf("offset %d: got %q want %q", off, p.Text, want)
		}
	}
}

// TestPagingCoversFile follows next_offset from the start and checks that
// the pages put together are the file, for sizes around the limits.
func TestPagingCoversFile(t *testing.T) {
	for _, content := range [][]byte{
		numbered(5000),
		[]byte(strings.Repeat(strings.Repeat("z", 5000)+"\n", 30)),
	} {
		var got bytes.Buffer
		off, pages := 0, 0
		for {
			p := page(t, content, off, 0)
			pages++
			got.WriteString(p.Text)
			if p.EOF {
				break
			}
			off = p.NextOffset
		}
		if !bytes.Equal(got.Bytes(), content) {
			t.Fatalf("reassembled %d bytes in %d pages, want %d", got.Len(), pages, len(content))
		}
	}
}
