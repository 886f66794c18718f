package provenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func hashText(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func TestRetainDropsOldestContentAndSweeps(t *testing.T) {
	e := newEnv(t, nil)
	v := func(c byte) string { return strings.Repeat(string(c), 1000) }
	var revs []string
	for i, c := range []byte{'a', 'b', 'c', 'd'} {
		w := execution("exec_000000000000000"+string('1'+rune(i)), "step "+string(c))
		e.write(t, "a.txt", v(c))
		if c == 'b' {
			e.write(t, "b.txt", v('b')) // b.txt keeps this content as its current revision
		}
		scan(t, e, end(w))
		revs = append(revs, file(t, e, "a.txt").Current.ID)
		settle()
	}
	protected := map[string]bool{hashText(v('c')): true} // an artifact version uses a.txt's third content
	ctx := context.Background()
	after := time.Now().Add(time.Minute) // sweep what is unreferenced now

	// 3,000 distinct unprotected bytes (a, b, d) over a 2,500 cap: the
	// oldest, a, goes; b (current in b.txt), c (protected) and d (current) stay.
	rep, err := e.x.Retain(ctx, RetainOptions{MaxBytes: 2500, Protected: func(h string) bool { return protected[h] }, SweepBefore: after})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dropped != 1 || rep.DroppedBytes != 1000 || rep.KeptBytes != 2000 || rep.Swept != 1 || rep.SweptBytes != 1000 {
		t.Fatalf("report: %+v", rep)
	}
	r1, err := e.x.Revision(revs[0])
	if err != nil {
		t.Fatal(err)
	}
	if r1.ContentKept || !strings.Contains(r1.ContentNote, "retention") || r1.Hash != hashText(v('a')) || r1.Size != 1000 {
		t.Fatalf("dropped revision: %+v", r1)
	}
	// The writer survives the rewrite, joined from its execution record.
	if r1.Writer.Kind != KindExecution || r1.Writer.Command != "step a" {
		t.Fatalf("writer after retention: %+v", r1.Writer)
	}
	if _, err := e.x.ReadRevision(revs[0], 0, 10); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("reading a dropped revision: %v", err)
	}
	if _, err := os.Stat(e.cas.Path(hashText(v('a')))); !os.IsNotExist(err) {
		t.Fatalf("the dropped content is still in the CAS: %v", err)
	}
	for i, c := range []byte{'b', 'c', 'd'} {
		if _, err := e.x.ReadRevision(revs[i+1], 0, 10); err != nil {
			t.Fatalf("revision with %c: %v", c, err)
		}
	}
	// The diff across the dropped revision says why it cannot be made.
	if _, err := e.x.Diff(revs[0], revs[1]); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("diff from a dropped revision: %v", err)
	}

	// Nothing left to drop: b and d are current, c protected.
	rep, err = e.x.Retain(ctx, RetainOptions{MaxBytes: 1, Protected: func(h string) bool { return protected[h] }, SweepBefore: after})
	if err != nil || rep.Dropped != 0 || rep.Swept != 0 || rep.KeptBytes != 2000 {
		t.Fatalf("second pass: %+v %v", rep, err)
	}
	// Without the protection, c is the oldest droppable content.
	rep, err = e.x.Retain(ctx, RetainOptions{MaxBytes: 1, SweepBefore: after})
	if err != nil || rep.Dropped != 1 || rep.Swept != 1 {
		t.Fatalf("unprotected pass: %+v %v", rep, err)
	}
	// A restart reads the dropped state back.
	e.close()
	e.open(t, nil)
	if r, _ := e.x.Revision(revs[2]); r.ContentKept {
		t.Fatal("a dropped revision kept its content across a reopen")
	}
	if r, _ := e.x.Revision(revs[3]); !r.ContentKept {
		t.Fatal("the current revision lost its content")
	}
}

func TestRetainUncappedOnlySweeps(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "x.txt", "kept")
	scan(t, e, unknown("test"))
	orphan, err := e.cas.Put(strings.NewReader("no record names this"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.x.Retain(context.Background(), RetainOptions{MaxBytes: -1})
	if err != nil || rep.Swept != 0 {
		t.Fatalf("a fresh orphan inside the grace was swept: %+v %v", rep, err)
	}
	rep, err = e.x.Retain(context.Background(), RetainOptions{MaxBytes: -1, SweepBefore: time.Now().Add(time.Minute)})
	if err != nil || rep.Swept != 1 || rep.Dropped != 0 {
		t.Fatalf("uncapped pass: %+v %v", rep, err)
	}
	if _, err := os.Stat(e.cas.Path(orphan.Hash)); !os.IsNotExist(err) {
		t.Fatal("the orphan blob survived")
	}
	if _, err := e.x.ReadRevision(file(t, e, "x.txt").Current.ID, 0, 1); err != nil {
		t.Fatal(err)
	}
}

// Retention runs beside scans: every revision that says it keeps its
// content can still be read afterwards.
func TestRetainBesideScans(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 60 {
			e.write(t, fmt.Sprintf("f%d.txt", i%3), strings.Repeat(fmt.Sprint(i), 300))
			if _, err := e.x.Scan(ctx, unknown("test")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	passes := 0
	for running := true; running; passes++ {
		select {
		case <-done:
			running = false
		default:
		}
		// A tight cap and a one-second grace, far longer than a scan takes
		// here between its put and its commit.
		if _, err := e.x.Retain(ctx, RetainOptions{MaxBytes: 2000, SweepBefore: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.x.Retain(ctx, RetainOptions{MaxBytes: 2000, SweepBefore: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	kept, dropped := 0, 0
	for _, f := range []string{"f0.txt", "f1.txt", "f2.txt"} {
		fp, err := e.x.File(ctx, f, MaxHistory, "test")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range fp.History {
			if !r.ContentKept {
				dropped++
				continue
			}
			kept++
			if _, err := e.x.ReadRevision(r.ID, 0, 1); err != nil {
				t.Fatalf("%s says it keeps its content but: %v", r.ID, err)
			}
		}
	}
	if dropped == 0 || kept < 3 {
		t.Fatalf("%d passes: %d revisions kept content, %d dropped", passes, kept, dropped)
	}
}
