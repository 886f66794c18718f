package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/workspace/artifacts"
)

func TestDeclareArtifactBatchEdges(t *testing.T) {
	e := newProvEnv(t)
	var paths []string
	for i := 0; i < artifacts.MaxDeclarePaths+1; i++ {
		p := fmt.Sprintf("out/%02d.csv", i)
		e.write(t, p, fmt.Sprintf("i,sq\n%d,%d\n", i, i*i))
		paths = append(paths, p)
	}
	args := func(ps []string) string {
		b, _ := json.Marshal(map[string]any{"paths": ps})
		return string(b)
	}
	res := e.call(t, "declare_artifact", args(paths))
	if !res.IsError || !strings.Contains(provText(res), "51 paths given; declare_artifact takes at most 50") {
		t.Fatalf("51: %s", provText(res))
	}
	res = e.call(t, "declare_artifact", args(paths[:50]))
	var out DeclareArtifactOut
	provDecode(t, res, &out)
	if res.IsError || out.Declared != 50 || out.Failed != 0 {
		t.Fatalf("50: %s", provText(res))
	}
	links := 0
	for _, c := range res.Content {
		if l, ok := c.(mcp.ResourceLink); ok && strings.HasPrefix(l.URI, "scimcp://artifacts/art_") && strings.HasSuffix(l.URI, "/v1") {
			links++
		}
	}
	if links != 50 {
		t.Fatalf("%d resource links, want 50", links)
	}
	res = e.call(t, "declare_artifact", `{"path":"out/50.csv","name":"tables/last"}`)
	provDecode(t, res, &out)
	if res.IsError || out.Declared != 1 || out.Entries[0].Name != "tables/last" || out.Entries[0].Preview != "table" || out.Entries[0].Origin.Kind != "unknown" {
		t.Fatalf("1: %s", provText(res))
	}
	// Again: unchanged, said so.
	res = e.call(t, "declare_artifact", `{"path":"out/50.csv","name":"tables/last"}`)
	if res.IsError || !strings.Contains(provText(res), "unchanged") || !strings.Contains(provText(res), "no new version") {
		t.Fatalf("again: %s", provText(res))
	}
	for _, tc := range []struct{ args, want string }{
		{`{}`, "give path (one file) or paths"},
		{`{"paths":[]}`, "at least one path"},
		{`{"path":"a","paths":["b"]}`, "not both"},
		{`{"path":"out/00.csv","name":"/abs"}`, "empty segment"},
		{`{"path":"out/00.csv","name":"` + strings.Repeat("n", artifacts.MaxNameBytes+1) + `"}`, "name must be at most 512 characters long"},
	} {
		res := e.call(t, "declare_artifact", tc.args)
		if !res.IsError || !strings.Contains(provText(res), tc.want) {
			t.Errorf("%.60s: %v %q (want %q)", tc.args, res.IsError, provText(res), tc.want)
		}
	}
	// Per-entry failures are not tool errors.
	res = e.call(t, "declare_artifact", `{"paths":["out/00.csv","missing.csv","out"]}`)
	provDecode(t, res, &out)
	if res.IsError || out.Failed != 2 || !out.Entries[0].OK || !strings.Contains(provText(res), "2. missing.csv: FAILED") {
		t.Fatalf("mixed: %s", provText(res))
	}
}

func TestListAndReadArtifact(t *testing.T) {
	e := newProvEnv(t)
	res := e.call(t, "list_artifacts", `{}`)
	if res.IsError || !strings.Contains(provText(res), "No Project Artifacts yet") {
		t.Fatalf("empty: %s", provText(res))
	}
	var big strings.Builder
	for i := 1; i <= 4500; i++ {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	e.write(t, "report.txt", big.String())
	e.write(t, "fig.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	e.call(t, "declare_artifact", `{"path":"report.txt","name":"reports/run1/report"}`)
	e.call(t, "declare_artifact", `{"path":"fig.png","name":"figures/fig"}`)
	e.write(t, "report.txt", "short now\n")
	e.call(t, "declare_artifact", `{"path":"report.txt","name":"reports/run1/report"}`)

	res = e.call(t, "list_artifacts", `{}`)
	var lo ListArtifactsOut
	provDecode(t, res, &lo)
	if res.IsError || lo.Count != 2 || strings.Join(lo.Folders, ",") != "figures,reports,reports/run1" || lo.Artifacts[1].LatestVersion != 2 || lo.Artifacts[1].Creation.Version != 1 {
		t.Fatalf("list: %s\n%+v", provText(res), lo)
	}
	for _, want := range []string{"figures/\n  fig — art_", "reports/\n  run1/\n    report — art_", "latest v2"} {
		if !strings.Contains(provText(res), want) {
			t.Errorf("list text lacks %q:\n%s", want, provText(res))
		}
	}
	// Version 1, page by page, as the footer says.
	args := `{"name":"reports/run1/report","version":1}`
	var ro ReadArtifactOut
	var all strings.Builder
	for pages := 0; ; pages++ {
		res = e.call(t, "read_artifact", args)
		provDecode(t, res, &ro)
		if res.IsError || ro.Version != 1 || ro.LatestVersion != 2 || pages > 5 {
			t.Fatalf("page %d: %s", pages, provText(res))
		}
		all.WriteString(ro.Content)
		if ro.EOF {
			if pages != 2 || *ro.TotalLines != 4500 {
				t.Fatalf("pages %d, total %v", pages, ro.TotalLines)
			}
			break
		}
		txt := provText(res)
		i := strings.Index(txt, "More: read_artifact ")
		if i < 0 {
			t.Fatalf("no continuation: %s", txt[len(txt)-200:])
		}
		args = strings.TrimSuffix(txt[i+len("More: read_artifact "):], "]")
	}
	if all.String() != big.String() {
		t.Fatal("pages do not add up to version 1")
	}
	res = e.call(t, "read_artifact", `{"name":"reports/run1/report"}`)
	provDecode(t, res, &ro)
	if ro.Version != 2 || ro.Content != "short now\n" || !strings.Contains(provText(res), "End of artifact") {
		t.Fatalf("latest: %s", provText(res))
	}
	res = e.call(t, "read_artifact", `{"name":"figures/fig"}`)
	ro = ReadArtifactOut{}
	provDecode(t, res, &ro)
	if res.IsError || !ro.Binary || ro.Content != "" || ro.MediaType != "image/png" || !strings.Contains(provText(res), "never returns the bytes") {
		t.Fatalf("binary: %s", provText(res))
	}
	for _, tc := range []struct{ args, want string }{
		{`{}`, "exactly one of artifact_id or name"},
		{`{"name":"reports"}`, "virtual folder"},
		{`{"name":"reports/run1/report","version":3}`, "versions are 1 to 2"},
		{`{"name":"reports/run1/report","version":0}`, "version must be at least 1"},
		{`{"artifact_id":"art_ffffffffffffffff"}`, "no artifact art_ffffffffffffffff"},
		{`{"name":"reports/run1/report","limit":2001}`, "limit must be at most 2000"},
	} {
		res := e.call(t, "read_artifact", tc.args)
		if !res.IsError || !strings.Contains(provText(res), tc.want) {
			t.Errorf("%s: %v %q (want %q)", tc.args, res.IsError, provText(res), tc.want)
		}
	}
}

// TestProvenanceToolDefinitions: the definitions the model sees carry the
// seed's limits (the golden snapshots freeze them once the tools are in
// the catalogue).
func TestProvenanceToolDefinitions(t *testing.T) {
	e := newProvEnv(t)
	for name, want := range map[string][]string{
		"get_file_provenance": {`"history_limit"`, `"maximum":100`, `"prov-json"`, `"maximum":2000`},
		"declare_artifact":    {`"paths"`, `"maxLength":512`},
		"list_artifacts":      {`"properties":{}`},
		"read_artifact":       {`"artifact_id"`, `"maximum":2000`},
	} {
		def, _ := json.Marshal(e.tool[name].Def)
		for _, w := range want {
			if !strings.Contains(string(def), w) {
				t.Errorf("%s definition lacks %s: %s", name, w, def)
			}
		}
		if e.tool[name].Group != GroupBase {
			t.Errorf("%s is not a base tool", name)
		}
	}
	if !e.tool["read_artifact"].SelfBounded || !e.tool["get_file_provenance"].SelfBounded || e.tool["list_artifacts"].SelfBounded {
		t.Error("self-bounded flags")
	}
}

// TestProvenanceToolSnapshots freezes the definitions of
// get_file_provenance, declare_artifact, list_artifacts and read_artifact
// under testdata/toolsnaps/provenance until the catalogue serves them; once
// the files move up to testdata/toolsnaps (where TestToolSnapshots checks
// the catalogue), this test checks those.
// Regenerate with UPDATE_TOOLSNAPS=true go test ./toolkit -run TestProvenanceToolSnapshots.
func TestProvenanceToolSnapshots(t *testing.T) {
	dir := filepath.Join("testdata", "toolsnaps", "provenance")
	update := os.Getenv("UPDATE_TOOLSNAPS") == "true"
	e := newProvEnv(t)
	for _, name := range []string{"get_file_provenance", "declare_artifact", "list_artifacts", "read_artifact"} {
		tool := e.tool[name]
		got, err := json.MarshalIndent(tool.Def, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		file := filepath.Join("testdata", "toolsnaps", name+".snap.json")
		if _, err := os.Stat(file); err != nil {
			file = filepath.Join(dir, name+".snap.json")
		}
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: no snapshot (%v); run UPDATE_TOOLSNAPS=true go test ./toolkit -run TestProvenanceToolSnapshots and review the new file", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: definition differs from %s; if the change is intended, regenerate and review the diff.\n got: %s", name, file, got)
		}
	}
}
