package outputs

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzBound: a preview is valid UTF-8, names its ref, stays under the
// preview threshold, and the stored text is the input verbatim.
func FuzzBound(f *testing.F) {
	f.Add(strings.Repeat("a", 9000))
	f.Add(strings.Repeat("€", 30000))
	f.Add(strings.Repeat("line\n", 3000))
	f.Add(strings.Repeat("x\xff", 30000))
	s, err := newStoreTB(f)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		b, err := s.Bound("o", "s", "t", text)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Stored {
			if b.Text != text || len(text) > DefaultStoreAbove {
				t.Fatal("unstored text changed, or a large text was not stored")
			}
			return
		}
		if !strings.Contains(b.Text, b.Record.Ref) {
			t.Fatal("no ref in the bounded text")
		}
		if b.Preview && (len(b.Text) > DefaultPreviewBytes || (utf8.ValidString(text) && !utf8.ValidString(b.Text))) {
			t.Fatalf("preview of %d bytes, valid=%v", len(b.Text), utf8.ValidString(b.Text))
		}
		a, err := s.Chars("o", b.Record.Ref, 0, 1)
		if err != nil || (len(text) > 0 && a.Chars != 1) {
			t.Fatalf("stored text unreadable: %v", err)
		}
	})
}

// FuzzPreview: the head and tail of a preview are a prefix and a suffix of
// the text, within their byte and line bounds, cut at character boundaries.
func FuzzPreview(f *testing.F) {
	f.Add("a\nb\nc\n", 4, 2)
	f.Add(strings.Repeat("€", 5000), 4096, 40)
	f.Add(strings.Repeat("line\n\n", 300), 100, 7)
	f.Add("x\xffy\n\n\n", 3, 1)
	f.Fuzz(func(t *testing.T, s string, maxBytes, maxLines int) {
		if maxBytes < 4 || maxBytes > 1<<16 || maxLines < 1 || maxLines > 1000 {
			return
		}
		head, hl := headOf(s, maxBytes, maxLines)
		tail, tl := tailOf(s, maxBytes, maxLines)
		if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
			t.Fatal("head is not a prefix or tail not a suffix")
		}
		if len(head) > maxBytes || len(tail) > maxBytes || hl > maxLines || tl > maxLines {
			t.Fatalf("bounds: head %d bytes %d lines, tail %d bytes %d lines (max %d, %d)", len(head), hl, len(tail), tl, maxBytes, maxLines)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(head) || !utf8.ValidString(tail)) {
			t.Fatal("a cut split a character")
		}
	})
}
