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
