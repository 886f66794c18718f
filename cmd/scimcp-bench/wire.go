package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// wire watches one connection's bytes. It counts them (In: server → client,
// Out: client → server) and times every request at the wire: from just
// before its frame is written until the last byte of the response frame with
// the same id is read off the pipe (stdio) or the response body ends (HTTP).
// That round trip leaves out what the client spends decoding, which for a
// 40 KiB page is more than the server's own work; the client-side time is
// reported beside it.
type wire struct {
	in, out atomic.Int64

	mu   sync.Mutex
	sent map[string]sentFrame
	lat  map[string][]time.Duration // by method
	scan frameScanner               // incoming stdio stream
}

type sentFrame struct {
	at     time.Time
	method string
}

func (w *wire) snapshot() (in, out int64) { return w.in.Load(), w.out.Load() }

// sending notes a request frame about to go out. Notifications and
// responses (no id, or no method) are not timed.
func (w *wire) sending(frame []byte, at time.Time) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(frame, &head) != nil || len(head.ID) == 0 || head.Method == "" {
		return
	}
	w.mu.Lock()
	if w.sent == nil {
		w.sent = map[string]sentFrame{}
	}
	w.sent[string(bytes.TrimSpace(head.ID))] = sentFrame{at, head.Method}
	w.mu.Unlock()
}

// received notes that the response with this id has fully arrived.
func (w *wire) received(id string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.sent[id]
	if !ok {
		return
	}
	delete(w.sent, id)
	if w.lat == nil {
		w.lat = map[string][]time.Duration{}
	}
	w.lat[s.method] = append(w.lat[s.method], at.Sub(s.at))
}

// take returns and forgets the wire latencies of one method.
func (w *wire) take(method string) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.lat[method]
	delete(w.lat, method)
	return d
}

// reset forgets every latency recorded so far.
func (w *wire) reset() {
	w.mu.Lock()
	w.lat = nil
	w.mu.Unlock()
}

// frameScanner follows a stream of newline-delimited JSON-RPC messages byte
// by byte and finds, in each, the top-level "id" and whether it has a
// top-level "method" (a request or notification, not a response). It never
// builds the message, so it costs one pass and no allocation per frame.
type frameScanner struct {
	depth     int
	inStr     bool
	esc       bool
	expectKey bool
	keyOn     bool   // collecting a top-level key
	key       []byte // the last top-level key
	idOn      bool   // collecting the top-level id value
	id        []byte
	hasMethod bool
}

// feed scans p; for each complete response frame it calls done with the id.
func (s *frameScanner) feed(p []byte, done func(id string)) {
	for _, c := range p {
		if s.idOn && s.depth == 1 && !s.inStr && (c == ',' || c == '}') {
			s.idOn = false
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				if s.keyOn {
					s.keyOn = false
					s.expectKey = false
				}
				if s.idOn {
					s.id = append(s.id, c)
				}
				continue
			}
			if s.keyOn && len(s.key) < 16 {
				s.key = append(s.key, c)
			}
			if s.idOn {
				s.id = append(s.id, c)
			}
			continue
		}
		switch c {
		case '"':
			s.inStr = true
			if s.depth == 1 && s.expectKey {
				s.keyOn = true
				s.key = s.key[:0]
			}
			if s.idOn {
				s.id = append(s.id, c)
			}
		case '{', '[':
			s.depth++
			if s.depth == 1 && c == '{' {
				s.expectKey = true
			}
		case '}', ']':
			s.depth--
		case ',':
			if s.depth == 1 {
				s.expectKey = true
			}
		case ':':
			if s.depth == 1 {
				switch string(s.key) {
				case "id":
					s.idOn = true
					s.id = s.id[:0]
				case "method":
					s.hasMethod = true
				}
				s.key = s.key[:0]
			}
		case '\n':
			if s.depth <= 0 {
				if len(s.id) > 0 && !s.hasMethod {
					done(string(s.id))
				}
				*s = frameScanner{key: s.key[:0], id: s.id[:0]}
			}
		case ' ', '\t', '\r':
		default:
			if s.idOn {
				s.id = append(s.id, c)
			}
		}
	}
}

// countingReader is the child's stdout as the client reads it.
type countingReader struct {
	r io.Reader
	w *wire
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		now := time.Now()
		c.w.in.Add(int64(n))
		c.w.scan.feed(p[:n], func(id string) { c.w.received(id, now) })
	}
	return n, err
}

// countingWriteCloser is the child's stdin as the client writes it; mcp-go
// writes one whole frame per Write.
type countingWriteCloser struct {
	wc io.WriteCloser
	w  *wire
}

func (c countingWriteCloser) Write(p []byte) (int, error) {
	c.w.sending(p, time.Now())
	n, err := c.wc.Write(p)
	c.w.out.Add(int64(n))
	return n, err
}

func (c countingWriteCloser) Close() error { return c.wc.Close() }

// countingBody counts a response body and marks the response to the
// request as arrived when its JSON-RPC frame is complete: a JSON body, or an
// SSE event's data line, followed by a newline; failing that, at the end of
// the body. (The client may decode a body before it reads to its end, so the
// end of the body alone would count the decoding.)
type countingBody struct {
	io.ReadCloser
	w    *wire
	id   string
	scan frameScanner
	done bool
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.w.in.Add(int64(n))
	if n > 0 && !c.done && c.id != "" {
		now := time.Now()
		c.scan.feed(p[:n], func(id string) {
			if id == c.id && !c.done {
				c.done = true
				c.w.received(id, now)
			}
		})
	}
	if err == io.EOF && !c.done && c.id != "" {
		c.done = true
		c.w.received(c.id, time.Now())
	}
	return n, err
}

// countingTransport wraps an http.RoundTripper: it counts request and
// response lines, headers (as HTTP/1.1 would send them) and bodies, and
// times requests as wire.sending/received do.
type countingTransport struct {
	next http.RoundTripper
	w    *wire
}

func headerBytes(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	out := int64(len(r.Method)+len(r.URL.RequestURI())+len(" HTTP/1.1\r\n")) + headerBytes(r.Header) + int64(len("Host: \r\n\r\n")+len(r.URL.Host))
	var id string
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		out += int64(len(body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var head struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &head) == nil && len(head.ID) > 0 && head.Method != "" {
			id = string(bytes.TrimSpace(head.ID))
		}
		t.w.sending(body, time.Now())
	}
	t.w.out.Add(out)
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.w.in.Add(int64(len("HTTP/1.1 200 OK\r\n\r\n")) + headerBytes(resp.Header))
	resp.Body = &countingBody{ReadCloser: resp.Body, w: t.w, id: id}
	return resp, nil
}
