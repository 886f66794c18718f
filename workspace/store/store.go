// Package store owns the server's bbolt database, <data>/state.db.
//
// One server process owns a data folder: bbolt holds an exclusive flock on the
// file for as long as the store is open. A second process that opens the same
// folder gives up after LockTimeout with a *LockedError naming the owner's PID
// (from owner.json, written once the lock is held), instead of waiting forever
// as bbolt does by default.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

const (
	// FileName is the database file inside the data folder.
	FileName = "state.db"
	// OwnerFile records which process holds the database.
	OwnerFile = "owner.json"
	// LockTimeout bounds how long Open waits for another process's lock.
	LockTimeout = time.Second
	// SchemaVersion is the layout of the buckets this code reads and writes.
	SchemaVersion = 1
)

// Bucket names. Each domain package owns the buckets it names here.
var (
	BucketMeta     = []byte("meta")
	BucketSessions = []byte("sessions")
)

// Owner describes the process that holds a data folder.
type Owner struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Version   string    `json:"version,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
}

// LockedError reports that another process owns the data folder.
type LockedError struct {
	Dir   string
	Owner *Owner // nil when owner.json could not be read
}

func (e *LockedError) Error() string {
	if e.Owner == nil {
		return fmt.Sprintf("data folder %s is in use by another scimcp process (owner unknown: %s is locked); stop that process or pass another --data folder", e.Dir, FileName)
	}
	return fmt.Sprintf("data folder %s is in use by another scimcp process (PID %d, started %s); stop that process or pass another --data folder",
		e.Dir, e.Owner.PID, e.Owner.StartedAt.Format(time.RFC3339))
}

// Store is the open database of one data folder.
type Store struct {
	db  *bolt.DB
	dir string
}

// Options tune Open.
type Options struct {
	Version   string // recorded in owner.json
	Workspace string // recorded in owner.json
	// NoSync skips fsync on commit. Only for benchmarks and tests: a crash
	// may then lose acknowledged writes.
	NoSync bool
}

// Open creates the data folder if needed and opens its database, failing
// within LockTimeout if another process holds it.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(abs, FileName), 0o600, &bolt.Options{
		Timeout:      LockTimeout,
		FreelistType: bolt.FreelistMapType,
		NoSync:       opts.NoSync,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, &LockedError{Dir: abs, Owner: readOwner(abs)}
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(abs, FileName), err)
	}
	s := &Store{db: db, dir: abs}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	owner := Owner{PID: os.Getpid(), StartedAt: time.Now().UTC(), Version: opts.Version, Workspace: opts.Workspace}
	if err := writeFileAtomic(filepath.Join(abs, OwnerFile), mustJSON(owner), 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("record owner: %w", err)
	}
	return s, nil
}

func (s *Store) init() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{BucketMeta, BucketSessions} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		meta := tx.Bucket(BucketMeta)
		if v := meta.Get([]byte("schema")); v != nil {
			var have int
			if err := json.Unmarshal(v, &have); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			if have > SchemaVersion {
				return fmt.Errorf("%s was written by a newer scimcp (schema %d, this build reads %d); upgrade scimcp", FileName, have, SchemaVersion)
			}
		}
		return meta.Put([]byte("schema"), mustJSON(SchemaVersion))
	})
}

// Dir returns the absolute path of the data folder.
func (s *Store) Dir() string { return s.dir }

// DB returns the bbolt handle for domain packages that keep their own buckets.
func (s *Store) DB() *bolt.DB { return s.db }

// Update runs fn in a read-write transaction.
func (s *Store) Update(fn func(*bolt.Tx) error) error { return s.db.Update(fn) }

// View runs fn in a read-only transaction.
func (s *Store) View(fn func(*bolt.Tx) error) error { return s.db.View(fn) }

// Close closes the database and removes the owner record.
func (s *Store) Close() error {
	err := s.db.Close()
	if o := readOwner(s.dir); o != nil && o.PID == os.Getpid() {
		os.Remove(filepath.Join(s.dir, OwnerFile))
	}
	return err
}

// PutJSON stores v as JSON under key in b.
func PutJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

// GetJSON decodes the JSON value under key in b into v; it reports false if
// the key is absent.
func GetJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	return true, json.Unmarshal(data, v)
}

func readOwner(dir string) *Owner {
	data, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	if err != nil {
		return nil
	}
	var o Owner
	if json.Unmarshal(data, &o) != nil || o.PID == 0 {
		return nil
	}
	return &o
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// writeFileAtomic writes data to a temporary file beside name, syncs it and
// renames it into place, so readers see the old content or the new, never a
// torn file.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}
