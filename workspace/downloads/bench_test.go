package downloads

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sciencediscovery/scimcp/workspace/fetch"
)

// BenchmarkDownloadHTTP measures one whole artifact_download of an http
// body from a loopback server: fetch into the data folder, copy into the
// workspace with its provenance revision (content kept in the CAS), and the
// artifact version (a second CAS copy is deduplicated by hash).
func BenchmarkDownloadHTTP(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		body := bytes.Repeat([]byte("%PDF-1.4 benchmark body\n"), size/24+1)[:size]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			e := newEnv(b, fetch.Policy{AllowHosts: []string{strings.TrimPrefix(srv.URL, "http://")}}, 0)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				j, err := e.s.Download(context.Background(), Request{Owner: "o", Session: "s", InvocationID: "inv", Source: "bench", Tool: "t",
					Candidate: Candidate{ID: "c1", Kind: KindURL, URI: srv.URL + "/paper.pdf"}, Destination: fmt.Sprintf("bench/%d.pdf", i)})
				if err != nil || j.State != StateCompleted {
					b.Fatalf("%+v %v", j, err)
				}
			}
		})
		srv.Close()
	}
}

// BenchmarkCandidates measures the scan every upstream result gets (when
// artifact_download is offered): a structured result of 10,000 records with
// a URL each, about 1 MB, and a 1 MB plain text result.
func BenchmarkCandidates(b *testing.B) {
	var recs []string
	for i := range 10_000 {
		recs = append(recs, fmt.Sprintf(`{"id":%d,"title":"record %d about binding","pdf_url":"https://example.org/papers/%d.pdf","score":0.%d}`, i, i, i, i))
	}
	structured := []byte(`{"content":[{"type":"text","text":"10000 records"}],"structuredContent":{"results":[` + strings.Join(recs, ",") + `]}}`)
	text := []byte(fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, strings.Repeat("plain words of a long answer ", 36_000)))
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"structured1MB", structured}, {"text1MB", text}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			for b.Loop() {
				list, more := Candidates(c.raw)
				if c.name == "structured1MB" && (len(list) != MaxCandidates || more != 10_000-MaxCandidates) {
					b.Fatalf("%d candidates, %d more", len(list), more)
				}
			}
		})
	}
}
