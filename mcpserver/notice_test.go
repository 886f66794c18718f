package mcpserver

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestDeliverNoticeAndSessionEnd(t *testing.T) {
	var mu sync.Mutex
	var ended []string
	e := newEnv(t, func(o *Options) {
		o.OnSessionEnd = func(id string) { mu.Lock(); ended = append(ended, id); mu.Unlock() }
	}, fakeTool("whoami", "base"))
	c := e.connect(t)
	other := e.connect(t)
	var got []mcp.JSONRPCNotification
	var nmu sync.Mutex
	c.OnNotification(func(n mcp.JSONRPCNotification) { nmu.Lock(); got = append(got, n); nmu.Unlock() })
	id := strings.TrimPrefix(text(call(t, c, "whoami", "")), "ran whoami for ")

	if !e.srv.Deliver(id, Notice{Kind: "timer", Text: "check the assay results", Data: map[string]any{"timer_id": "t1"}}) {
		t.Fatal("Deliver: session not found")
	}
	if e.srv.Deliver("no-such-session", Notice{Kind: "timer", Text: "x"}) {
		t.Fatal("Deliver to an unknown session reported success")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		nmu.Lock()
		n := len(got)
		nmu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	nmu.Lock()
	if len(got) == 0 || got[0].Method != "notifications/message" {
		t.Fatalf("notifications: %+v", got)
	}
	nmu.Unlock()
	// The next tool result of that session carries the notice, once; the
	// other session's does not.
	if r := call(t, other, "list_files", ""); strings.Contains(text(r), "assay") {
		t.Fatal("another session got the notice")
	}
	r := call(t, c, "list_files", "")
	if !strings.Contains(text(r), "[scimcp timer] check the assay results") || r.Meta == nil || r.Meta.AdditionalFields["scimcp/notices"] == nil {
		t.Fatalf("next result lacks the notice: %s", text(r))
	}
	if r := call(t, c, "list_files", ""); strings.Contains(text(r), "assay") {
		t.Fatal("the notice was attached twice")
	}
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(ended) != 1 || ended[0] != id {
		t.Fatalf("OnSessionEnd: %v, want [%s]", ended, id)
	}
}
