package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Session is the record of one MCP session: the seed's Session. stdio has one
// per process; streamable HTTP has one per Mcp-Session-Id.
type Session struct {
	ID              string `json:"id"`
	Transport       string `json:"transport"` // "stdio" or "http"
	ClientName      string `json:"client_name,omitempty"`
	ClientVersion   string `json:"client_version,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// FormElicitation records that the client declared form elicitation
	// at initialize (an HTTP client resuming after a restart does not
	// initialize again).
	FormElicitation bool `json:"form_elicitation,omitempty"`
	// Promoted lists the deferred tools tool_search loaded into the
	// session (HTTP sessions, which clients resume after a restart).
	Promoted  []string   `json:"promoted,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// PutSession records or updates a session.
func (s *Store) PutSession(rec Session) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return PutJSON(tx.Bucket(BucketSessions), []byte(rec.ID), rec)
	})
}

// EndSession marks a session ended at t; unknown ids are ignored.
func (s *Store) EndSession(id string, t time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(BucketSessions)
		var rec Session
		ok, err := GetJSON(b, []byte(id), &rec)
		if err != nil || !ok {
			return err
		}
		t = t.UTC()
		rec.EndedAt = &t
		return PutJSON(b, []byte(id), rec)
	})
}

// GetSession returns the record of a session.
func (s *Store) GetSession(id string) (Session, bool, error) {
	var rec Session
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ok, err = GetJSON(tx.Bucket(BucketSessions), []byte(id), &rec)
		return err
	})
	return rec, ok, err
}
