package provenance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

// Retention defaults.
const (
	// DefaultMaxContentBytes caps the revision content the CAS keeps for
	// provenance, counted once per distinct content.
	DefaultMaxContentBytes = 10 << 30
	// SweepGrace is how long a blob put into the CAS is safe from a sweep
	// although no record names it yet (a declaration puts its blob before
	// it commits the version).
	SweepGrace = time.Hour
)

// RetainOptions configures one Retain pass.
type RetainOptions struct {
	// MaxBytes caps the distinct content kept by revisions that are not a
	// file's current one (0: DefaultMaxContentBytes; negative: no cap, only
	// the sweep of unreferenced blobs runs).
	MaxBytes int64
	// Protected claims blobs other records need (artifact versions): their
	// content is never counted, dropped or swept.
	Protected func(hash string) bool
	// SweepBefore: unreferenced blobs last put before it are removed
	// (zero: now minus SweepGrace).
	SweepBefore time.Time
}

// RetainReport says what a Retain pass did.
type RetainReport struct {
	KeptBytes    int64 // distinct revision content kept, after the pass (protected content not counted)
	Dropped      int   // revisions whose content was dropped
	DroppedBytes int64 // distinct content those revisions held
	Swept        int   // blobs removed from the CAS
	SweptBytes   int64
}

// Retain bounds the content provenance keeps. Each file's current revision
// keeps its content (the next change is diffed against it), and so does any
// content an artifact version uses. Past MaxBytes, the content of the
// oldest other revisions is dropped, oldest last use first: each such
// revision keeps its hash, size and writer, and its content_note says when
// and why its bytes went. Then blobs no record names are removed from the
// CAS.
//
// Scans go on while it runs. Revision records are only ever appended,
// except by Retain, so a revision committed during the pass is merely not
// considered; the blob it names was put (or, deduplicated, touched) after
// SweepBefore and survives the sweep.
func (x *Index) Retain(ctx context.Context, o RetainOptions) (RetainReport, error) {
	max := o.MaxBytes
	if max == 0 {
		max = DefaultMaxContentBytes
	}
	protected := o.Protected
	if protected == nil {
		protected = func(string) bool { return false }
	}
	before := o.SweepBefore
	if before.IsZero() {
		before = time.Now().Add(-SweepGrace)
	}
	x.retainMu.Lock()
	defer x.retainMu.Unlock()

	// Every revision that keeps content, by content.
	type use struct {
		size    int64
		last    uint64   // newest revision using it
		current bool     // some file's current revision uses it
		revs    []uint64 // revisions that keep it
	}
	uses := map[string]*use{}
	x.mu.RLock()
	current := make(map[uint64]bool, len(x.files))
	for _, e := range x.files {
		current[e.rev] = true
	}
	x.mu.RUnlock()
	err := x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRevisions).ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var r struct {
				Hash        string `json:"hash"`
				Size        int64  `json:"size"`
				ContentKept bool   `json:"content_kept"`
			}
			if len(k) != 8 || json.Unmarshal(v, &r) != nil || !r.ContentKept || r.Hash == "" {
				return nil
			}
			seq := binary.BigEndian.Uint64(k)
			u := uses[r.Hash]
			if u == nil {
				u = &use{size: r.Size}
				uses[r.Hash] = u
			}
			u.revs = append(u.revs, seq)
			u.last = max64(u.last, seq)
			u.current = u.current || current[seq]
			return nil
		})
	})
	if err != nil {
		return RetainReport{}, fmt.Errorf("provenance: retain: %w", err)
	}
	var rep RetainReport
	var droppable []string
	for h, u := range uses {
		if protected(h) {
			continue
		}
		rep.KeptBytes += u.size
		if !u.current {
			droppable = append(droppable, h)
		}
	}
	// Oldest last use first.
	sort.Slice(droppable, func(i, j int) bool { return uses[droppable[i]].last < uses[droppable[j]].last })
	var drop []uint64
	for _, h := range droppable {
		if max < 0 || rep.KeptBytes <= max {
			break
		}
		u := uses[h]
		drop = append(drop, u.revs...)
		rep.KeptBytes -= u.size
		rep.DroppedBytes += u.size
		delete(uses, h)
	}
	if len(drop) > 0 {
		note := fmt.Sprintf("content removed on %s by retention: revision content kept for provenance passed %d bytes, and this was among the oldest (the hash and size remain)",
			time.Now().UTC().Format("2006-01-02"), max)
		err := x.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketRevisions)
			for _, seq := range drop {
				// The stored form is rewritten as it is: an execution
				// writer stays a reference to prov_writers.
				var stored Revision
				if err := json.Unmarshal(b.Get(be64(seq)), &stored); err != nil {
					return err
				}
				stored.ContentKept, stored.ContentNote = false, note
				if err := store.PutJSON(b, be64(seq), stored); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("provenance: retain: %w", err)
		}
		rep.Dropped = len(drop)
	}
	rep.Swept, rep.SweptBytes, err = x.cas.Sweep(func(h string) bool { return uses[h] != nil || protected(h) }, before)
	if err != nil {
		return rep, fmt.Errorf("provenance: sweep: %w", err)
	}
	return rep, nil
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
