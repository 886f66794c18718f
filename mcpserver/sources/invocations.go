package sources

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sciencediscovery/scimcp/workspace/store"
)

var invBucket = []byte("mcp_invocations")

// Invocation records one call of an upstream tool.
type Invocation struct {
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Session    string    `json:"session"`
	Source     string    `json:"source"`
	Tool       string    `json:"tool"`
	ArgsSHA256 string    `json:"args_sha256"`
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended"`
	// Outcome is ok, tool_error (an isError result), rpc_error,
	// unavailable, invalid_arguments or cancelled.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Result is the raw result, kept for artifact_download's candidates.
	Result []byte `json:"result,omitempty"`
}

// Invocations stores invocation records in bbolt. Records are written
// behind the call, in batches, by one goroutine: a commit (an fsync) per
// call would cost more than the call itself. Until written they are served
// from memory; Close writes what is left. A crash can lose the records of
// the last few milliseconds of calls, never a record's integrity.
type Invocations struct {
	db      *store.Store
	mu      sync.Mutex
	pending map[string]Invocation
	queue   chan Invocation
	done    chan struct{}
	once    sync.Once
}

// invocationBatch bounds one commit.
const invocationBatch = 256

// NewInvocations opens the invocation records.
func NewInvocations(db *store.Store) (*Invocations, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(invBucket)
		return err
	})
	iv := &Invocations{db: db, pending: map[string]Invocation{}, queue: make(chan Invocation, 4096), done: make(chan struct{})}
	go iv.writer()
	return iv, err
}

func (iv *Invocations) writer() {
	defer close(iv.done)
	for first := range iv.queue {
		batch := []Invocation{first}
	fill:
		for len(batch) < invocationBatch {
			select {
			case inv, ok := <-iv.queue:
				if !ok {
					break fill
				}
				batch = append(batch, inv)
			default:
				break fill
			}
		}
		iv.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(invBucket)
			for _, inv := range batch {
				if err := store.PutJSON(b, []byte(inv.ID), inv); err != nil {
					return err
				}
			}
			return nil
		})
		iv.mu.Lock()
		for _, inv := range batch {
			if cur, ok := iv.pending[inv.ID]; ok && cur.Ended.Equal(inv.Ended) {
				delete(iv.pending, inv.ID)
			}
		}
		iv.mu.Unlock()
	}
}

// Close writes the records still queued.
func (iv *Invocations) Close() {
	iv.once.Do(func() {
		close(iv.queue)
		<-iv.done
	})
}

// NewInvocationID returns a fresh mcpInvocationId.
func NewInvocationID() string {
	var b [8]byte
	rand.Read(b[:])
	return "inv_" + hex.EncodeToString(b[:])
}

// HashArgs returns the sha256 of a call's arguments.
func HashArgs(args []byte) string {
	s := sha256.Sum256(args)
	return hex.EncodeToString(s[:])
}

// Put stores an invocation (written behind; see Invocations).
func (iv *Invocations) Put(inv Invocation) error {
	iv.mu.Lock()
	iv.pending[inv.ID] = inv
	iv.mu.Unlock()
	iv.queue <- inv
	return nil
}

// Get returns an invocation of owner.
func (iv *Invocations) Get(owner, id string) (Invocation, bool, error) {
	iv.mu.Lock()
	if inv, ok := iv.pending[id]; ok {
		iv.mu.Unlock()
		if inv.Owner != owner {
			return Invocation{}, false, nil
		}
		return inv, true, nil
	}
	iv.mu.Unlock()
	var inv Invocation
	var ok bool
	err := iv.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = store.GetJSON(tx.Bucket(invBucket), []byte(id), &inv)
		return err
	})
	if ok && inv.Owner != owner {
		return Invocation{}, false, nil
	}
	return inv, ok, err
}

// Prune removes the records of invocations that ended before t (with their
// raw results) and reports how many. Records still queued are left for the
// next call.
func (iv *Invocations) Prune(t time.Time) (int, error) {
	var old [][]byte
	err := iv.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(invBucket).ForEach(func(k, v []byte) error {
			var inv struct {
				Ended time.Time `json:"ended"`
			}
			if json.Unmarshal(v, &inv) == nil && !inv.Ended.IsZero() && inv.Ended.Before(t) {
				old = append(old, append([]byte(nil), k...))
			}
			return nil
		})
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	err = iv.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(invBucket)
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(old), nil
}
