package toolkit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/outputs"
	"github.com/sciencediscovery/scimcp/workspace/plans"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
	"github.com/sciencediscovery/scimcp/workspace/store"
	"github.com/sciencediscovery/scimcp/workspace/timers"
)

// TestToolSnapshots freezes what the model sees of every tool: name,
// description, input and output schema, annotations. A change is a reviewed
// diff: regenerate with UPDATE_TOOLSNAPS=true go test ./toolkit.
func TestToolSnapshots(t *testing.T) {
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	outs, err := outputs.New(db, outputs.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	local, err := runner.NewLocal(runner.LocalConfig{Workspace: ws.Dir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Ready() }) // the sandbox is prepared in the background
	execs, err := runner.NewExecutions(runner.Config{Store: db, Runners: []runner.Runner{local}})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plans.New(db, plans.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := timers.New(timers.Config{Store: db, Executions: execs})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	blobs, err := cas.Open(db.Dir(), cas.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := provenance.New(provenance.Config{Store: db, Workspace: ws, CAS: blobs})
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	arts, err := artifacts.New(artifacts.Config{Store: db, Workspace: ws, CAS: blobs, Provenance: prov})
	if err != nil {
		t.Fatal(err)
	}
	update := os.Getenv("UPDATE_TOOLSNAPS") == "true"
	seen := map[string]bool{}
	for _, tool := range Catalogue(Services{Workspace: ws, Outputs: outs, Executions: execs, PaperRunner: local, Plans: pl, Timers: tm, Provenance: prov, Artifacts: arts}) {
		got, err := json.MarshalIndent(tool.Def, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		name := filepath.Join("testdata", "toolsnaps", tool.Name()+".snap.json")
		seen[filepath.Base(name)] = true
		if update {
			if err := os.WriteFile(name, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: no snapshot (%v); run UPDATE_TOOLSNAPS=true go test ./toolkit and review the new file", tool.Name(), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: definition differs from %s; if the change is intended, run UPDATE_TOOLSNAPS=true go test ./toolkit and review the diff.\n got: %s", tool.Name(), name, got)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "toolsnaps", "*.snap.json"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("snapshot %s has no tool; delete it", f)
		}
	}
}
