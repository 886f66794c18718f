// Package fetch is scimcp's one HTTP client for content from the internet
// (artifact downloads now, web_fetch later). It refuses what a server that
// acts for a model must not do: URLs with credentials, schemes other than
// http and https, and connections to loopback, private, link-local and other
// non-public addresses, checked on the address actually dialled (so DNS
// rebinding and redirects cannot reach them) unless the configuration allows
// that host. Bodies are streamed with a size cap and the whole request with a
// time cap.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"syscall"
	"time"
)

// Defaults.
const (
	DefaultMaxBytes     = 256 << 20
	DefaultTimeout      = 5 * time.Minute
	DefaultMaxRedirects = 5
	MaxURLLength        = 2048
)

// Policy configures a Client.
type Policy struct {
	// AllowHosts lists "host" or "host:port" entries that may be reached
	// even on non-public addresses (a lab server, a local test fixture).
	AllowHosts   []string
	MaxBytes     int64
	Timeout      time.Duration
	MaxRedirects int
	UserAgent    string
}

// Client fetches URLs under a Policy.
type Client struct {
	p    Policy
	http *http.Client
}

// Error is a refusal the caller can act on.
type Error struct{ Msg string }

func (e *Error) Error() string      { return e.Msg }
func (e *Error) InputProblem() bool { return true }

func refusef(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// New returns a client.
func New(p Policy) *Client {
	if p.MaxBytes <= 0 {
		p.MaxBytes = DefaultMaxBytes
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	if p.MaxRedirects <= 0 {
		p.MaxRedirects = DefaultMaxRedirects
	}
	if p.UserAgent == "" {
		p.UserAgent = "scimcp (+https://github.com/sciencediscovery/scimcp)"
	}
	c := &Client{p: p}
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: c.control}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		Proxy:                 nil, // never through an environment proxy: the address check must see the real target
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
	}
	c.http = &http.Client{Transport: tr, CheckRedirect: c.checkRedirect}
	return c
}

// CheckURL refuses URLs the client would not fetch, before any connection.
func (c *Client) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, refusef("the URL is %d characters long; the limit is %d", len(raw), MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, refusef("%q is not a URL: %v", raw, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, refusef("only http and https URLs can be fetched, not %q", u.Scheme)
	case u.User != nil:
		return nil, refusef("URLs with credentials (user:password@host) are refused; credentials never go in a URL")
	case u.Hostname() == "":
		return nil, refusef("the URL %q has no host", raw)
	}
	return u, nil
}

// control runs before every connection, on the address actually dialled.
func (c *Client) control(network, address string, _ syscall.RawConn) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("refusing to dial %s: not an IP address", address)
	}
	if public(ip) {
		return nil
	}
	if c.allowedIP(ip, port) {
		return nil
	}
	return &Error{Msg: fmt.Sprintf("refusing to connect to %s: it is a loopback, private, link-local or otherwise non-public address (allow the host in the configuration if it is yours)", address)}
}

// allowedIP reports whether an allowed host name or address resolves to ip.
func (c *Client) allowedIP(ip netip.Addr, port string) bool {
	for _, h := range c.p.AllowHosts {
		host, p, err := net.SplitHostPort(h)
		if err != nil {
			host, p = h, ""
		}
		if p != "" && p != port {
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if a == ip {
				return true
			}
			continue
		}
		addrs, _ := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
		if slices.Contains(addrs, ip) {
			return true
		}
	}
	return false
}

// public reports whether ip is a globally routable unicast address.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
}

func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > c.p.MaxRedirects {
		return refusef("more than %d redirects", c.p.MaxRedirects)
	}
	if _, err := c.CheckURL(req.URL.String()); err != nil {
		return err
	}
	return nil
}

// Result describes a fetched body.
type Result struct {
	URL         string // the final URL, after redirects
	Status      int
	ContentType string
	Bytes       int64
	SHA256      string
}

// Fetch GETs raw and streams the body into w, refusing bodies over the size
// cap (nothing more is written past it; the caller discards the partial
// body) and non-2xx answers.
func (c *Client) Fetch(ctx context.Context, raw string, w io.Writer) (Result, error) {
	u, err := c.CheckURL(raw)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.p.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{}, refusef("%v", err)
	}
	req.Header.Set("User-Agent", c.p.UserAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return Result{}, fe
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return Result{}, refusef("fetching %s took longer than %s", u.Redacted(), c.p.Timeout)
		}
		return Result{}, refusef("fetching %s failed: %v", u.Redacted(), err)
	}
	defer resp.Body.Close()
	res := Result{URL: resp.Request.URL.String(), Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return res, refusef("%s answered %s", res.URL, resp.Status)
	}
	if resp.ContentLength > c.p.MaxBytes {
		return res, refusef("%s is %d bytes, over the download cap of %d", res.URL, resp.ContentLength, c.p.MaxBytes)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(resp.Body, c.p.MaxBytes+1))
	if err != nil {
		return res, refusef("reading %s failed after %d bytes: %v", res.URL, n, err)
	}
	if n > c.p.MaxBytes {
		return res, refusef("%s is larger than the download cap of %d bytes", res.URL, c.p.MaxBytes)
	}
	res.Bytes, res.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return res, nil
}
