package provenance

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// lcs is the length of the longest common subsequence, by dynamic
// programming: the reference the diff's length is checked against.
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// apply replays an edit script on a.
func apply(a, b []string, ops []op) []string {
	var out []string
	for _, o := range ops {
		switch o.kind {
		case ' ':
			if a[o.i] != b[o.j] {
				panic("kept line differs")
			}
			out = append(out, a[o.i])
		case '+':
			out = append(out, b[o.j])
		}
	}
	return out
}

func TestDiffLinesIsShortestAndCorrect(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	gen := func(n, alphabet int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(rng.Intn(alphabet)) + "\n"
		}
		return out
	}
	for trial := 0; trial < 2000; trial++ {
		a, b := gen(rng.Intn(30), 1+rng.Intn(6)), gen(rng.Intn(30), 1+rng.Intn(6))
		ops, minimal := diffLines(a, b)
		if !minimal {
			t.Fatal("small diff ran out of budget")
		}
		if got := apply(a, b, ops); strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("trial %d: script does not turn a into b\na=%q\nb=%q", trial, a, b)
		}
		edits := 0
		for _, o := range ops {
			if o.kind != ' ' {
				edits++
			}
		}
		if want := len(a) + len(b) - 2*lcs(a, b); edits != want {
			t.Fatalf("trial %d: %d edits, shortest is %d\na=%q\nb=%q", trial, edits, want, a, b)
		}
	}
}

func TestUnifiedFormat(t *testing.T) {
	a := splitLines([]byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"))
	b := splitLines([]byte("a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn"))
	ops, _ := diffLines(a, b)
	got := unified("a/x", "b/x", a, b, ops, 3)
	want := "--- a/x\n+++ b/x\n" +
		"@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n" +
		"@@ -11,3 +11,4 @@\n k\n l\n m\n+n\n\\ No newline at end of file\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Into an empty file, and out of one.
	ops, _ = diffLines(nil, []string{"x\n"})
	if got := unified("a", "b", nil, []string{"x\n"}, ops, 3); got != "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Fatalf("from empty: %q", got)
	}
	ops, _ = diffLines([]string{"x\n", "y\n"}, nil)
	if got := unified("a", "b", []string{"x\n", "y\n"}, nil, ops, 3); got != "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n" {
		t.Fatalf("to empty: %q", got)
	}
}

func TestDiffBudgetFallsBackToACorrectDiff(t *testing.T) {
	var a, b []string
	for i := 0; i < 3000; i++ {
		a = append(a, fmt.Sprintf("a%d\n", i))
		b = append(b, fmt.Sprintf("b%d\n", i))
		if i%2 == 0 {
			b[i] = a[i]
		}
	}
	d := &differ{a: make([]int, len(a)), b: make([]int, len(b)), budget: 1000, minimal: true}
	ids := map[string]int{}
	for i, l := range a {
		if _, ok := ids[l]; !ok {
			ids[l] = len(ids)
		}
		d.a[i] = ids[l]
	}
	for i, l := range b {
		if _, ok := ids[l]; !ok {
			ids[l] = len(ids)
		}
		d.b[i] = ids[l]
	}
	d.del, d.ins = make([]bool, len(a)), make([]bool, len(b))
	d.compare(0, len(a), 0, len(b))
	if d.minimal {
		t.Fatal("a budget of 1000 steps should not suffice")
	}
	// The result still transforms a into b.
	var out []string
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case i < len(a) && d.del[i]:
			i++
		case j < len(b) && d.ins[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	if strings.Join(out, "") != strings.Join(b, "") {
		t.Fatal("fallback diff is wrong")
	}
}

func TestDiffRevisions(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "notes.md", "# Title\nline one\nline two\n")
	scan(t, e, unknown("start"))
	e.write(t, "notes.md", "# Title\nline one\nline 2\nline three\n")
	scan(t, e, unknown("edit"))
	fp := file(t, e, "notes.md")
	d, err := e.x.Diff(fp.History[1].ID, fp.Current.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Added != 2 || d.Removed != 1 || !d.Minimal || d.Identical {
		t.Fatalf("%+v", d)
	}
	if !strings.Contains(d.Text, "-line two\n+line 2\n+line three\n") || !strings.HasPrefix(d.Text, "--- a/notes.md ("+fp.History[1].ID+")\n+++ b/notes.md ("+fp.Current.ID+")\n") {
		t.Fatalf("text:\n%s", d.Text)
	}
	if d, err := e.x.Diff(fp.Current.ID, fp.Current.ID); err != nil || !d.Identical || d.Text != "" {
		t.Fatalf("identical: %+v %v", d, err)
	}
	// Binary content is refused.
	e.write(t, "img.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	if _, err := e.x.Observe(context.Background(), "img.png", "t"); err != nil {
		t.Fatal(err)
	}
	img := file(t, e, "img.png").Current
	if _, err := e.x.Diff(img.ID, fp.Current.ID); !IsCode(err, CodeNotText) {
		t.Fatalf("binary: %v", err)
	}
}
