package fetch

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func hostOf(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

func TestRefusals(t *testing.T) {
	ok := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("fine")) })
	c := New(Policy{})
	for _, u := range []string{
		ok.URL,                         // loopback, not allowed
		"http://user:pw@example.org/x", // credentials
		"ftp://example.org/x",          // scheme
		"file:///etc/passwd",           // scheme
		"http:///nohost",               // no host
		"http://" + strings.Repeat("a", 3000) + ".org/", // too long
		"http://169.254.169.254/latest/meta-data/",      // link-local (cloud metadata)
		"http://10.0.0.1/", "http://[::1]/", "http://0.0.0.0/",
	} {
		var buf bytes.Buffer
		if _, err := c.Fetch(context.Background(), u, &buf); err == nil {
			t.Errorf("%.60s: fetched", u)
		} else if buf.Len() > 0 {
			t.Errorf("%.60s: wrote %d bytes before refusing", u, buf.Len())
		}
	}
}

func TestAllowedHostAndRedirectRecheck(t *testing.T) {
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("SECRET from the other host")) })
	main := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/paper.pdf":
			w.Write([]byte("%PDF-1.4 body"))
		case "/to-other":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	})
	c := New(Policy{AllowHosts: []string{hostOf(main)}})
	var buf bytes.Buffer
	res, err := c.Fetch(context.Background(), main.URL+"/paper.pdf", &buf)
	if err != nil || buf.String() != "%PDF-1.4 body" || res.Bytes != 13 || len(res.SHA256) != 64 {
		t.Fatalf("allowed host: %v %+v %q", err, res, buf.String())
	}
	buf.Reset()
	if _, err := c.Fetch(context.Background(), main.URL+"/to-other", &buf); err == nil || strings.Contains(buf.String(), "SECRET") {
		t.Fatalf("redirect to a loopback host that is not allowed: %v %q", err, buf.String())
	}
	if _, err := c.Fetch(context.Background(), main.URL+"/loop", &buf); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
}

func TestSizeAndTimeCaps(t *testing.T) {
	big := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		w.Write(bytes.Repeat([]byte("x"), 2<<20))
	})
	slow := serve(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Second) })
	c := New(Policy{AllowHosts: []string{hostOf(big)}, MaxBytes: 1 << 20, Timeout: time.Minute})
	for _, p := range []string{"/", "/chunked"} {
		var buf bytes.Buffer
		if _, err := c.Fetch(context.Background(), big.URL+p, &buf); err == nil || !strings.Contains(err.Error(), "cap") {
			t.Errorf("2 MiB over a 1 MiB cap (%s): %v", p, err)
		}
		if buf.Len() > 1<<20+1 {
			t.Errorf("wrote %d bytes past the cap", buf.Len())
		}
	}
	var buf bytes.Buffer
	quick := New(Policy{AllowHosts: []string{hostOf(slow)}, Timeout: 300 * time.Millisecond})
	if _, err := quick.Fetch(context.Background(), slow.URL, &buf); err == nil {
		t.Error("a 2 s answer passed a 300 ms cap")
	}
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:4700::1111": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "::1": false, "fe80::1": false, "fc00::1": false, "::ffff:127.0.0.1": false, "224.0.0.1": false,
	} {
		if got := public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("public(%s) = %v", addr, got)
		}
	}
}
