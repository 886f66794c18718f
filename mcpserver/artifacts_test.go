package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/toolkit"
)

// readAllPages follows read_artifact's continuation until the end and
// returns the text and the number of pages.
func readAllPages(t *testing.T, c *client.Client, args string) (string, int, toolkit.ReadArtifactOut) {
	t.Helper()
	var all strings.Builder
	var out toolkit.ReadArtifactOut
	for pages := 1; ; pages++ {
		res := call(t, c, "read_artifact", args)
		out = toolkit.ReadArtifactOut{}
		structured(t, res, &out)
		if res.IsError || pages > 10 {
			t.Fatalf("read_artifact %s: %s", args, text(res))
		}
		all.WriteString(out.Content)
		if out.EOF {
			return all.String(), pages, out
		}
		txt := text(res)
		i := strings.LastIndex(txt, "More: read_artifact ")
		if i < 0 || out.NextOffset == nil {
			t.Fatalf("no continuation: …%s", txt[max(len(txt)-300, 0):])
		}
		args = strings.TrimSuffix(txt[i+len("More: read_artifact "):], "]")
	}
}

// TestArtifactsAcrossSessions: artifacts declared in one session are listed
// with their versions in another, read page by page, served as MCP
// resources (with list_changed on each declaration), and survive a restart.
func TestArtifactsAcrossSessions(t *testing.T) {
	p := newProvMCPEnv(t)
	c1 := p.connect(t)
	notes := provListen(c1)

	res := call(t, c1, "run_shell", `{"command":"mkdir -p results && seq 1 3000 | sed 's/^/row,/' > results/table.csv && printf '\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR' > results/fig.png"}`)
	var run toolkit.RunShellOut
	structured(t, res, &run)
	if run.State != "succeeded" {
		t.Fatalf("run: %s", text(res))
	}
	res = call(t, c1, "declare_artifact", `{"paths":["results/table.csv","results/fig.png"],"name":"run1","description":"first run"}`)
	var dec toolkit.DeclareArtifactOut
	structured(t, res, &dec)
	if res.IsError || dec.Declared != 2 || dec.Entries[0].Name != "run1/table.csv" || dec.Entries[0].Preview != "table" ||
		dec.Entries[1].Preview != "image" || dec.Entries[0].Origin.ExecutionID != run.ExecutionID {
		t.Fatalf("declare: %s", text(res))
	}
	var links []mcp.ResourceLink
	for _, ct := range res.Content {
		if l, ok := ct.(mcp.ResourceLink); ok {
			links = append(links, l)
		}
	}
	if len(links) != 2 || links[0].URI != dec.Entries[0].URI || links[1].MIMEType != "image/png" {
		t.Fatalf("resource links: %+v", res.Content)
	}
	notes.waitFor(t, mcp.MethodNotificationResourcesListChanged, 1)
	tableID := dec.Entries[0].ArtifactID

	// Another session sees them, changes the table and declares version 2.
	c2 := p.connect(t)
	res = call(t, c2, "list_artifacts", `{}`)
	var list toolkit.ListArtifactsOut
	structured(t, res, &list)
	if res.IsError || list.Count != 2 || len(list.Folders) != 1 || list.Folders[0] != "run1" || list.Artifacts[1].Origin.ExecutionID != run.ExecutionID {
		t.Fatalf("list in session 2: %s", text(res))
	}
	call(t, c2, "run_shell", `{"command":"seq 3001 4500 | sed 's/^/row,/' >> results/table.csv"}`)
	res = call(t, c2, "declare_artifact", `{"path":"results/table.csv","name":"run1/table.csv"}`)
	structured(t, res, &dec)
	if res.IsError || dec.Entries[0].Version != 2 || dec.Entries[0].ArtifactID != tableID {
		t.Fatalf("v2: %s", text(res))
	}
	res = call(t, c1, "list_artifacts", `{}`)
	structured(t, res, &list)
	table := list.Artifacts[1]
	if table.Name != "run1/table.csv" || table.LatestVersion != 2 || table.Creation.Version != 1 || table.Latest.Session == table.Creation.Session ||
		!strings.Contains(text(res), "latest v2") {
		t.Fatalf("list in session 1: %s\n%+v", text(res), table)
	}

	// Page by page: version 2 from session 2, version 1 from session 1.
	body, pages, last := readAllPages(t, c2, `{"name":"run1/table.csv"}`)
	if pages != 3 || last.Version != 2 || *last.TotalLines != 4500 || !strings.HasPrefix(body, "row,1\n") || !strings.HasSuffix(body, "row,4500\n") {
		t.Fatalf("v2: %d pages, %d bytes, %+v", pages, len(body), last)
	}
	body, pages, _ = readAllPages(t, c1, fmt.Sprintf(`{"artifact_id":%q,"version":1,"limit":1000}`, tableID))
	if pages != 3 || strings.Count(body, "\n") != 3000 {
		t.Fatalf("v1: %d pages, %d lines", pages, strings.Count(body, "\n"))
	}
	res = call(t, c1, "read_artifact", `{"name":"run1/fig.png"}`)
	if res.IsError || !strings.Contains(text(res), "is binary") || strings.Contains(text(res), "IHDR") {
		t.Fatalf("binary: %s", text(res))
	}

	// As MCP resources.
	rl, err := c1.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	uris := map[string]mcp.Resource{}
	for _, r := range rl.Resources {
		uris[r.URI] = r
	}
	if r, ok := uris["scimcp://artifacts/"+tableID]; !ok || r.Name != "run1/table.csv" || r.Title != "run1/table.csv (v2)" {
		t.Fatalf("resources/list: %+v", rl.Resources)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = fmt.Sprintf("scimcp://artifacts/%s/v1", tableID)
	rr, err := c1.ReadResource(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := rr.Contents[0].(mcp.TextResourceContents); !ok || strings.Count(tc.Text, "\n") != 3000 || tc.MIMEType != "text/csv" {
		t.Fatalf("resources/read v1: %#v", rr.Contents[0])
	}
	req.Params.URI = "scimcp://artifacts/art_ffffffffffffffff"
	if _, err := c1.ReadResource(context.Background(), req); err == nil || !strings.Contains(err.Error(), "no artifact") {
		t.Fatalf("unknown resource: %v", err)
	}
	notes.waitFor(t, mcp.MethodNotificationResourcesListChanged, 2)

	// After a restart, in a new session, everything is still there.
	p.restart(t)
	c3 := p.connect(t)
	res = call(t, c3, "list_artifacts", `{}`)
	structured(t, res, &list)
	if list.Count != 2 || list.Artifacts[1].LatestVersion != 2 {
		t.Fatalf("after restart: %s", text(res))
	}
	if _, pages, last := readAllPages(t, c3, fmt.Sprintf(`{"artifact_id":%q}`, tableID)); pages != 3 || last.Version != 2 {
		t.Fatalf("after restart: %d pages %+v", pages, last)
	}
	// The file's provenance links its artifact versions.
	out, txt := provOf(t, c3, "results/table.csv")
	if len(out.Artifacts) != 2 || out.Artifacts[1].Version != 2 || !strings.Contains(txt, "run1/table.csv v2") {
		t.Fatalf("provenance links: %s", txt)
	}
}

// TestDeclareArtifactBadInputThroughClient: bad entries fail one by one with
// their reason; a bad call as a whole is an isError result; what was stored
// stays intact.
func TestDeclareArtifactBadInputThroughClient(t *testing.T) {
	p := newProvMCPEnv(t)
	p.write(t, "ok.txt", "fine\n")
	c := p.connect(t)
	res := call(t, c, "declare_artifact", `{"paths":["ok.txt","../etc/passwd","ok.txt","nope.txt"]}`)
	var dec toolkit.DeclareArtifactOut
	structured(t, res, &dec)
	if res.IsError || dec.Declared != 1 || dec.Failed != 3 {
		t.Fatalf("%s", text(res))
	}
	for _, want := range []string{"2. ../etc/passwd: FAILED", "3. ok.txt: FAILED", "same file as entry 1", "4. nope.txt: FAILED"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("result lacks %q:\n%s", want, text(res))
		}
	}
	paths := make([]string, 51)
	for i := range paths {
		paths[i] = fmt.Sprintf("%q", "ok.txt")
	}
	res = call(t, c, "declare_artifact", `{"paths":[`+strings.Join(paths, ",")+`]}`)
	if !res.IsError || !strings.Contains(text(res), "at most 50") {
		t.Fatalf("51: %s", text(res))
	}
	res = call(t, c, "list_artifacts", `{}`)
	var list toolkit.ListArtifactsOut
	structured(t, res, &list)
	if list.Count != 1 || list.Artifacts[0].LatestVersion != 1 {
		t.Fatalf("stored data changed: %s", text(res))
	}
}
