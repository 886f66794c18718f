package sources

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

// Invocations stores invocation records in bbolt.
type Invocations struct{ db *store.Store }

// NewInvocations opens the invocation records.
func NewInvocations(db *store.Store) (*Invocations, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(invBucket)
		return err
	})
	return &Invocations{db: db}, err
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

// Put stores an invocation.
func (iv *Invocations) Put(inv Invocation) error {
	return iv.db.Update(func(tx *bolt.Tx) error {
		return store.PutJSON(tx.Bucket(invBucket), []byte(inv.ID), inv)
	})
}

// Get returns an invocation of owner.
func (iv *Invocations) Get(owner, id string) (Invocation, bool, error) {
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
