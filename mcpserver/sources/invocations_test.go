package sources

import (
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

func TestInvocationsKeptAndPruned(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	iv, err := NewInvocations(db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	old := Invocation{ID: NewInvocationID(), Owner: "o", Source: "s", Tool: "t", Started: now.Add(-9 * 24 * time.Hour), Ended: now.Add(-8 * 24 * time.Hour), Outcome: "ok", Result: []byte(`{"content":[]}`)}
	fresh := Invocation{ID: NewInvocationID(), Owner: "o", Source: "s", Tool: "t", Started: now, Ended: now, Outcome: "ok", Result: []byte(`{"content":[]}`)}
	iv.Put(old)
	iv.Put(fresh)
	iv.Close() // writes what is queued
	db.Close()

	// A reopened store serves both, to their owner only.
	db, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	iv, err = NewInvocations(db)
	if err != nil {
		t.Fatal(err)
	}
	defer iv.Close()
	for _, want := range []Invocation{old, fresh} {
		got, ok, err := iv.Get("o", want.ID)
		if err != nil || !ok || got.Tool != "t" || string(got.Result) != string(want.Result) || !got.Ended.Equal(want.Ended) {
			t.Fatalf("Get(%s) = %+v %v %v", want.ID, got, ok, err)
		}
		if _, ok, _ := iv.Get("other", want.ID); ok {
			t.Fatal("another owner reads the record")
		}
	}
	n, err := iv.Prune(now.Add(-7 * 24 * time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	if _, ok, _ := iv.Get("o", old.ID); ok {
		t.Fatal("the old record survived")
	}
	if _, ok, _ := iv.Get("o", fresh.ID); !ok {
		t.Fatal("the fresh record was pruned")
	}
}
