package store

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSecondOpenFailsFastNamingOwner(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	start := time.Now()
	_, err = Open(dir, Options{})
	took := time.Since(start)
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second open: got %v, want *LockedError", err)
	}
	if le.Owner == nil || le.Owner.PID != os.Getpid() {
		t.Fatalf("owner = %+v, want PID %d", le.Owner, os.Getpid())
	}
	msg := err.Error()
	if !strings.Contains(msg, dir) || !strings.Contains(msg, strconv.Itoa(os.Getpid())) {
		t.Fatalf("message must name the folder and the PID: %s", msg)
	}
	if took > 3*LockTimeout {
		t.Fatalf("second open took %v", took) // a hang, not a timing benchmark
	}
}

func TestSessionsPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC().Truncate(time.Second)
	if err := s.PutSession(Session{ID: "s1", Transport: "http", ClientName: "c", StartedAt: start}); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession("s1", start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession("unknown", start); err != nil {
		t.Fatalf("ending an unknown session: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/" + OwnerFile); !os.IsNotExist(err) {
		t.Fatalf("owner file left after close: %v", err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, ok, err := s.GetSession("s1")
	if err != nil || !ok || rec.ClientName != "c" || rec.EndedAt == nil || !rec.EndedAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("after reopen: ok=%v err=%v rec=%+v", ok, err, rec)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.db.Update(func(tx *bboltTx) error { return tx.Bucket(BucketMeta).Put([]byte("schema"), []byte("99")) })
	s.Close()
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "newer scimcp") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}
