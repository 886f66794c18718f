package provenance

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
)

// Diff limits.
const (
	// MaxDiffInputBytes bounds each side of a diff: larger revisions are
	// refused rather than loaded into memory.
	MaxDiffInputBytes = 8 << 20
	// DiffContext is the number of unchanged lines around each change.
	DiffContext = 3
	// diffBudget bounds the work of the line comparison (diagonal steps).
	// Past it, the remaining differing block is shown as removed and added
	// whole: a correct diff, but not the shortest (DiffResult.Minimal false).
	diffBudget = 100_000_000
)

// DiffResult is a unified diff between two revisions.
type DiffResult struct {
	From, To Revision
	// Text is the unified diff, "" when the contents are identical.
	Text      string
	Identical bool
	// Minimal is false when the comparison ran out of budget and part of
	// the diff shows a block replaced whole instead of line by line.
	Minimal        bool
	Added, Removed int // lines
}

// Diff compares the content of two text revisions (usually of one file, but
// any two will do) and returns a unified diff from `from` to `to`. A deletion
// counts as empty content. Revisions whose content was not kept, binary
// content, and content over MaxDiffInputBytes are refused.
func (x *Index) Diff(fromID, toID string) (DiffResult, error) {
	from, err := x.Revision(fromID)
	if err != nil {
		return DiffResult{}, err
	}
	to, err := x.Revision(toID)
	if err != nil {
		return DiffResult{}, err
	}
	a, err := x.textOf(from)
	if err != nil {
		return DiffResult{}, err
	}
	b, err := x.textOf(to)
	if err != nil {
		return DiffResult{}, err
	}
	res := DiffResult{From: from, To: to, Minimal: true}
	if bytes.Equal(a, b) {
		res.Identical = true
		return res, nil
	}
	la, lb := splitLines(a), splitLines(b)
	ops, minimal := diffLines(la, lb)
	res.Minimal = minimal
	for _, op := range ops {
		switch op.kind {
		case '+':
			res.Added++
		case '-':
			res.Removed++
		}
	}
	nameA, nameB := "a/"+from.Path+" ("+from.ID+")", "b/"+to.Path+" ("+to.ID+")"
	if from.Change == Deleted {
		nameA = "/dev/null (" + from.ID + ", deleted)"
	}
	if to.Change == Deleted {
		nameB = "/dev/null (" + to.ID + ", deleted)"
	}
	res.Text = unified(nameA, nameB, la, lb, ops, DiffContext)
	return res, nil
}

// textOf loads a revision's content for a diff.
func (x *Index) textOf(r Revision) ([]byte, error) {
	if r.Change == Deleted {
		return nil, nil
	}
	if !r.ContentKept {
		return nil, errorf(CodeNoContent, nil, "the content of revision %s (%d bytes) was not kept, so it cannot be compared: %s", r.ID, r.Size, orNone(r.ContentNote))
	}
	if r.Size > MaxDiffInputBytes {
		return nil, errorf(CodeTooLarge, nil, "revision %s has %d bytes; diffs compare revisions of at most %d bytes. Read the revisions page by page instead", r.ID, r.Size, MaxDiffInputBytes)
	}
	b, err := x.cas.ReadAll(r.Hash, MaxDiffInputBytes)
	switch {
	case errors.Is(err, cas.ErrCorrupt):
		return nil, errorf(CodeCorrupt, err, "the stored content of revision %s is damaged (its bytes no longer match hash %s); scimcp will not serve it", r.ID, r.Hash)
	case errors.Is(err, cas.ErrNotFound):
		return nil, errorf(CodeCorrupt, err, "the stored content of revision %s (hash %s) is missing from the data folder", r.ID, r.Hash)
	case err != nil:
		return nil, err
	}
	if mt, bin := workspace.Sniff(r.Path, b); bin {
		return nil, errorf(CodeNotText, nil, "revision %s of %s is binary (%s); only text revisions can be compared", r.ID, r.Path, mt)
	}
	return b, nil
}

// splitLines splits text into lines, each keeping its newline; a last line
// without one is kept as it is.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	lines := make([]string, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// op is one line of an edit script: ' ' kept, '-' removed from a, '+' added
// from b; i and j index the lines of a and b.
type op struct {
	kind byte
	i, j int
}

// diffLines returns an edit script from a to b: the shortest one (Myers'
// O(ND) algorithm in linear space) unless the work budget runs out.
func diffLines(a, b []string) ([]op, bool) {
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := &differ{a: intern(a), b: intern(b), budget: diffBudget, minimal: true}
	d.del = make([]bool, len(a))
	d.ins = make([]bool, len(b))
	d.compare(0, len(a), 0, len(b))
	ops := make([]op, 0, max(len(a), len(b)))
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case i < len(a) && d.del[i]:
			ops = append(ops, op{'-', i, j})
			i++
		case j < len(b) && d.ins[j]:
			ops = append(ops, op{'+', i, j})
			j++
		default:
			ops = append(ops, op{' ', i, j})
			i++
			j++
		}
	}
	return ops, d.minimal
}

type differ struct {
	a, b     []int
	del, ins []bool
	vf, vb   []int
	budget   int
	minimal  bool
}

// compare marks the lines of a[a0:a1] to delete and of b[b0:b1] to insert.
func (d *differ) compare(a0, a1, b0, b1 int) {
	for a0 < a1 && b0 < b1 && d.a[a0] == d.b[b0] {
		a0, b0 = a0+1, b0+1
	}
	for a1 > a0 && b1 > b0 && d.a[a1-1] == d.b[b1-1] {
		a1, b1 = a1-1, b1-1
	}
	switch {
	case a0 == a1:
		for j := b0; j < b1; j++ {
			d.ins[j] = true
		}
		return
	case b0 == b1:
		for i := a0; i < a1; i++ {
			d.del[i] = true
		}
		return
	}
	x, y, ok := d.split(a0, a1, b0, b1)
	if !ok || (x == a0 && y == b0) || (x == a1 && y == b1) {
		d.minimal = d.minimal && ok
		for i := a0; i < a1; i++ {
			d.del[i] = true
		}
		for j := b0; j < b1; j++ {
			d.ins[j] = true
		}
		return
	}
	d.compare(a0, x, b0, y)
	d.compare(x, a1, y, b1)
}

// split finds the middle snake of a[a0:a1] against b[b0:b1] (both
// non-empty, no common first or last line) and returns a point on a
// shortest edit path that splits it into two smaller problems. It reports
// false when the work budget runs out.
func (d *differ) split(a0, a1, b0, b1 int) (int, int, bool) {
	n, m := a1-a0, b1-b0
	delta := n - m
	odd := delta&1 != 0
	maxD := (n + m + 1) / 2
	off := maxD + 1
	size := 2*maxD + 3
	if cap(d.vf) < size {
		d.vf, d.vb = make([]int, size), make([]int, size)
	}
	vf, vb := d.vf[:size], d.vb[:size]
	vf[off+1], vb[off+1] = 0, 0
	for e := 0; e <= maxD; e++ {
		if d.budget <= 0 {
			return 0, 0, false
		}
		// Forward: the furthest-reaching e-paths from the start.
		for k := -e; k <= e; k += 2 {
			var x int
			if k == -e || (k != e && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1]
			} else {
				x = vf[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && d.a[a0+x] == d.b[b0+y] {
				x, y = x+1, y+1
				d.budget--
			}
			d.budget--
			vf[off+k] = x
			if kb := delta - k; odd && kb >= -(e-1) && kb <= e-1 && x+vb[off+kb] >= n {
				return a0 + x, b0 + y, true
			}
		}
		// Backward: the furthest-reaching e-paths from the end, in
		// coordinates counted from the end.
		for k := -e; k <= e; k += 2 {
			var x int
			if k == -e || (k != e && vb[off+k-1] < vb[off+k+1]) {
				x = vb[off+k+1]
			} else {
				x = vb[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && d.a[a1-1-x] == d.b[b1-1-y] {
				x, y = x+1, y+1
				d.budget--
			}
			d.budget--
			vb[off+k] = x
			if kf := delta - k; !odd && kf >= -e && kf <= e && x+vf[off+kf] >= n {
				return a1 - x, b1 - y, true
			}
		}
	}
	return 0, 0, false
}

// unified renders an edit script as a unified diff with ctx lines of
// context around each change.
func unified(nameA, nameB string, a, b []string, ops []op, ctx int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	for start := 0; start < len(ops); {
		// Find the next change.
		for start < len(ops) && ops[start].kind == ' ' {
			start++
		}
		if start == len(ops) {
			break
		}
		first := max(start-ctx, 0)
		end := start // last change included so far
		for i := start + 1; i < len(ops); i++ {
			if ops[i].kind == ' ' {
				continue
			}
			if i-end > 2*ctx {
				break
			}
			end = i
		}
		last := min(end+ctx, len(ops)-1)
		// Line numbers of the hunk.
		aStart, bStart := ops[first].i, ops[first].j
		aLen, bLen := 0, 0
		for _, o := range ops[first : last+1] {
			if o.kind != '+' {
				aLen++
			}
			if o.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, o := range ops[first : last+1] {
			var line string
			switch o.kind {
			case '-':
				line = a[o.i]
			case '+':
				line = b[o.j]
			default:
				line = a[o.i]
			}
			sb.WriteByte(o.kind)
			sb.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		start = last + 1
	}
	return sb.String()
}

// hunkRange renders "start,len" the way diff -u does: 1-based start, the
// length omitted when it is 1, and the line before the hunk when it is 0.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
