package outputs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

func newStoreTB(tb testing.TB) (*Store, error) {
	db, err := store.Open(tb.TempDir(), store.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { db.Close() })
	s, err := New(db, DefaultLimits())
	if s != nil {
		s.noSync = true
	}
	return s, err
}

func newStore(t *testing.T, mutate func(*Limits)) (*Store, *store.Store) {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l := DefaultLimits()
	if mutate != nil {
		mutate(&l)
	}
	s, err := New(db, l)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func lines(n, width int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		l := fmt.Sprintf("line %d ", i)
		b.WriteString(l + strings.Repeat("x", max(width-len(l)-1, 0)) + "\n")
	}
	return b.String()
}

func TestBoundThresholds(t *testing.T) {
	s, _ := newStore(t, nil)
	cases := []struct {
		name            string
		text            string
		stored, preview bool
	}{
		{"exactly 8 KiB", strings.Repeat("a", DefaultStoreAbove), false, false},
		{"8 KiB + 1", strings.Repeat("a", DefaultStoreAbove+1), true, false},
		{"exactly 50 KiB", lines(DefaultPreviewBytes/1024, 1024), true, false},
		{"50 KiB + 1", lines(DefaultPreviewBytes/1024, 1024) + "z", true, true},
		{"exactly 2000 lines", lines(DefaultPreviewLines, 5), true, false},
		{"2001 lines", lines(DefaultPreviewLines+1, 5), true, true},
		{"one 200 KiB line", strings.Repeat("w", 200*1024), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := s.Bound("o", "sess", "tool", tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if b.Stored != tc.stored || b.Preview != tc.preview {
				t.Fatalf("stored=%v preview=%v, want %v %v", b.Stored, b.Preview, tc.stored, tc.preview)
			}
			switch {
			case !tc.stored:
				if b.Text != tc.text {
					t.Fatal("text below the threshold changed")
				}
			case !tc.preview:
				if !strings.HasPrefix(b.Text, tc.text) || !strings.Contains(b.Text, b.Record.Ref) {
					t.Fatal("stored result must keep its full text and name its ref")
				}
			default:
				if len(b.Text) > DefaultPreviewBytes/2 || !strings.Contains(b.Text, b.Record.Ref) || !utf8.ValidString(b.Text) {
					t.Fatalf("preview of %d bytes, valid=%v", len(b.Text), utf8.ValidString(b.Text))
				}
			}
			if tc.stored {
				data, err := os.ReadFile(filepath.Join(s.dir, b.Record.File))
				if err != nil || string(data) != tc.text {
					t.Fatalf("stored file differs from the result (%v)", err)
				}
			}
		})
	}
}

func TestPreviewFavoursTailAndSplitsCharacters(t *testing.T) {
	s, _ := newStore(t, nil)
	text := lines(5000, 40) + "FATAL: the error at the end\n"
	b, err := s.Bound("o", "s", "t", text)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.Text, "line 1 ") || !strings.Contains(b.Text, "FATAL: the error at the end") || strings.Contains(b.Text, "line 2500 ") {
		t.Fatal("preview must show the head and the tail, not the middle")
	}
	// 5001 lines of ≤ 41 bytes: the head is 40 lines, the tail the last 120.
	if b.HeadLines != PreviewHeadLines || b.TailFrom != 5001-PreviewTailLines+1 {
		t.Fatalf("head %d lines, tail from line %d; want %d and %d", b.HeadLines, b.TailFrom, PreviewHeadLines, 5001-PreviewTailLines+1)
	}
	all := strings.SplitAfter(text, "\n")
	wantTail := strings.Join(all[5001-PreviewTailLines:], "")
	wantHead := strings.Join(all[:PreviewHeadLines], "")
	if !strings.HasSuffix(b.Text, wantTail) || !strings.Contains(b.Text, wantHead) {
		t.Fatal("the preview does not hold exactly the head and tail lines it names")
	}
	if strings.Contains(b.Text, all[5001-PreviewTailLines-1]) {
		t.Fatal("the preview holds a line before its tail")
	}
	// A single huge line of 3-byte characters: the cuts must fall on
	// character boundaries.
	wide := strings.Repeat("€", 100_000)
	b, err = s.Bound("o", "s", "t", wide)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(b.Text) || !strings.Contains(b.Text, "€€€") {
		t.Fatal("preview of a wide multi-byte line is not valid UTF-8")
	}
}

func TestReadModes(t *testing.T) {
	s, _ := newStore(t, nil)
	text := lines(3000, 30)
	rec, err := s.Put("alice", "s1", "t", text)
	if err != nil {
		t.Fatal(err)
	}
	// Line range.
	a, err := s.Lines("alice", rec.Ref, 2990, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Lines != 10 || !a.EOF || !strings.HasPrefix(a.Text, "line 2991 ") {
		t.Fatalf("lines: %+v", a)
	}
	if _, err := s.Lines("alice", rec.Ref, 3000, 0); err == nil {
		t.Fatal("offset past the end accepted")
	}
	// Character range in the middle of a line.
	a, err = s.Chars("alice", rec.Ref, 35, 10)
	if err != nil || a.Text != text[35:45] || a.NextCharOffset != 45 {
		t.Fatalf("chars: %v %+v", err, a)
	}
	// Another owner sees nothing, exactly as for a missing ref.
	_, err1 := s.Lines("mallory", rec.Ref, 0, 0)
	_, err2 := s.Lines("alice", "ref_0000000000000000", 0, 0)
	if err1 == nil || err2 == nil || strings.Replace(err1.Error(), rec.Ref, "X", 1) != strings.Replace(err2.Error(), "ref_0000000000000000", "X", 1) {
		t.Fatalf("foreign ref: %v / %v", err1, err2)
	}
	for _, bad := range []string{"", "ref_xyz", "../../state.db", "ref_0123456789abcdef0"} {
		if _, err := s.Lines("alice", bad, 0, 0); err == nil || !strings.Contains(err.Error(), "not a stored-output ref") {
			t.Errorf("malformed ref %q: %v", bad, err)
		}
	}
}

func TestCharsMultibyte(t *testing.T) {
	s, _ := newStore(t, nil)
	text := strings.Repeat("αβγ", 20_000) // 2 bytes per character
	rec, _ := s.Put("o", "s", "t", text)
	a, err := s.Chars("o", rec.Ref, 30_001, 3)
	if err != nil || a.Text != "βγα" {
		t.Fatalf("chars at 30001: %v %q", err, a.Text)
	}
	a, err = s.Chars("o", rec.Ref, 0, 0)
	if err != nil || a.Bytes > DefaultReadBytes || !utf8.ValidString(a.Text) || a.EOF {
		t.Fatalf("default char read: %v bytes=%d", err, a.Bytes)
	}
	if _, err := s.Chars("o", rec.Ref, 60_000, 1); err == nil || !strings.Contains(err.Error(), "60000 characters") {
		t.Fatalf("char offset past the end: %v", err)
	}
}

func TestSearch(t *testing.T) {
	s, _ := newStore(t, nil)
	var b strings.Builder
	for i := 1; i <= 50_000; i++ {
		fmt.Fprintf(&b, "row %d ok\n", i)
		if i == 31_337 {
			b.WriteString("Traceback: ZeroDivisionError in Straße\n")
		}
	}
	text := b.String()
	rec, _ := s.Put("o", "s", "t", text)

	a, err := s.Search("o", rec.Ref, Query{Text: "zerodivisionerror"})
	if err != nil || a.TotalMatches != 1 || a.Matches[0].Line != 31_338 || !strings.Contains(a.Matches[0].Context, "Traceback") {
		t.Fatalf("case-insensitive single match: %v %+v", err, a.Matches)
	}
	if a.Matches[0].CharOffset != strings.Index(text, "ZeroDivisionError") {
		t.Fatalf("char offset %d, want %d", a.Matches[0].CharOffset, strings.Index(text, "ZeroDivisionError"))
	}
	if a, _ = s.Search("o", rec.Ref, Query{Text: "zerodivisionerror", CaseSensitive: true}); a.TotalMatches != 0 {
		t.Fatal("case-sensitive search matched a different case")
	}
	if a, _ = s.Search("o", rec.Ref, Query{Text: "STRASSE"}); a.TotalMatches != 0 {
		t.Fatal("simple folding must not expand ß")
	}
	if a, _ = s.Search("o", rec.Ref, Query{Text: "straße"}); a.TotalMatches != 1 {
		t.Fatal("non-ASCII folding failed")
	}
	// Thousands of matches: all counted, few shown, bounded.
	a, err = s.Search("o", rec.Ref, Query{Text: " ok", MaxMatches: 5})
	if err != nil || a.TotalMatches != 50_000 || len(a.Matches) != 5 || a.MatchesOmitted != 49_995 || a.Bytes > DefaultReadBytes {
		t.Fatalf("many matches: total=%d shown=%d omitted=%d bytes=%d", a.TotalMatches, len(a.Matches), a.MatchesOmitted, a.Bytes)
	}
	a, _ = s.Search("o", rec.Ref, Query{Text: "row", MaxMatches: MaxMatches, ContextChars: MaxContextChars})
	if a.Bytes > DefaultReadBytes || len(a.Matches) == MaxMatches {
		t.Fatalf("byte bound not applied to matches: %d bytes, %d matches", a.Bytes, len(a.Matches))
	}
	// A match across the 1 MiB chunk boundary is found once.
	boundary := strings.Repeat("a", searchChunk-3) + "NEEDLE" + strings.Repeat("b", 100)
	r2, _ := s.Put("o", "s", "t", boundary)
	if a, _ = s.Search("o", r2.Ref, Query{Text: "NEEDLE", CaseSensitive: true}); a.TotalMatches != 1 || a.Matches[0].ByteOffset != searchChunk-3 {
		t.Fatalf("boundary match: %+v", a.Matches)
	}
	if _, err := s.Search("o", rec.Ref, Query{}); err == nil {
		t.Fatal("empty query accepted")
	}
}

func TestAdvice(t *testing.T) {
	s, _ := newStore(t, nil)
	rec, _ := s.Put("o", "s", "t", lines(20_000, 60))
	a, _ := s.Lines("o", rec.Ref, 0, 500)
	if len(a.Advice) != 0 {
		t.Fatalf("advice on a first read: %v", a.Advice)
	}
	a, _ = s.Lines("o", rec.Ref, 0, 500)
	if len(a.Advice) != 1 || !strings.Contains(a.Advice[0], "already read") {
		t.Fatalf("duplicate range: %v", a.Advice)
	}
	// Cumulative: reads of ~30 KiB each cross 64 KiB on the third read and
	// 96 KiB on the fourth; every read still succeeds.
	var got []string
	for off := 500; off < 500+4*500; off += 500 {
		a, err := s.Lines("o", rec.Ref, off, 500)
		if err != nil || a.Lines != 500 {
			t.Fatalf("read refused at offset %d: %v", off, err)
		}
		got = append(got, strings.Join(a.Advice, "|"))
	}
	if !strings.Contains(strings.Join(got, "\n"), "A literal query search") || !strings.Contains(got[len(got)-1], "Stop paging") {
		t.Fatalf("cumulative advice: %q", got)
	}
	// Advice is per owner.
	if a, _ := s.Lines("o2", rec.Ref, 0, 1); len(a.Advice) != 0 {
		t.Fatal("another owner got advice (or read a foreign ref)")
	}
}

func TestRecoverAndRestart(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := s.Put("o", "s", "t", lines(100, 100))
	lost, _ := s.Put("o", "s", "t", lines(101, 100))
	// Simulate a crash: a torn temporary file, an unindexed file, and an
	// index entry whose file vanished.
	os.WriteFile(filepath.Join(s.dir, "s", ".tmp-123"), []byte("torn"), 0o600)
	os.WriteFile(filepath.Join(s.dir, "s", "ref_ffffffffffffffff.txt"), []byte("orphan"), 0o600)
	os.Remove(filepath.Join(s.dir, lost.File))
	db.Close()

	db, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err = New(db, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if a, err := s.Lines("o", keep.Ref, 99, 1); err != nil || !strings.HasPrefix(a.Text, "line 100 ") {
		t.Fatalf("kept ref after restart: %v", err)
	}
	if _, err := s.Lines("o", lost.Ref, 0, 1); err == nil {
		t.Fatal("ref whose file vanished is still served")
	}
	entries, _ := os.ReadDir(filepath.Join(s.dir, "s"))
	if len(entries) != 1 {
		t.Fatalf("after recovery the folder holds %d files, want 1", len(entries))
	}
}

func TestPrune(t *testing.T) {
	s, _ := newStore(t, func(l *Limits) { l.MaxTotalBytes = 25_000 })
	var refs []Record
	for i := 0; i < 4; i++ {
		r, _ := s.Put("o", "s", "t", strings.Repeat(string(rune('a'+i)), 10_000))
		refs = append(refs, r)
		time.Sleep(2 * time.Millisecond)
	}
	// Age: nothing is older than 7 days yet; size: 40,000 > 25,000 drops the
	// two oldest.
	removed, freed, err := s.Prune(time.Now())
	if err != nil || removed != 2 || freed != 20_000 {
		t.Fatalf("prune by size: removed=%d freed=%d err=%v", removed, freed, err)
	}
	if _, err := s.Get("o", refs[0].Ref); err == nil {
		t.Fatal("oldest output survived")
	}
	if _, err := s.Get("o", refs[3].Ref); err != nil {
		t.Fatal("newest output removed")
	}
	// Age: 8 days later everything goes.
	removed, _, _ = s.Prune(time.Now().Add(8 * 24 * time.Hour))
	if removed != 2 {
		t.Fatalf("prune by age removed %d, want 2", removed)
	}
}

func TestIdenticalResultReusesRef(t *testing.T) {
	s, _ := newStore(t, nil)
	text := lines(500, 40)
	a, _ := s.Put("o", "s", "list_files", text)
	b, _ := s.Put("o", "s", "list_files", text)
	c, _ := s.Put("o2", "s2", "list_files", text)
	d, _ := s.Put("o", "s", "list_files", text+"x")
	if a.Ref != b.Ref || a.Ref == c.Ref || a.Ref == d.Ref {
		t.Fatalf("refs %s %s %s %s: same owner and content must share, others not", a.Ref, b.Ref, c.Ref, d.Ref)
	}
}
