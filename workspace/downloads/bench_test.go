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
