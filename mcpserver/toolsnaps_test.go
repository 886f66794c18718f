package mcpserver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sciencediscovery/scimcp/toolkit"
)

// TestToolSnapshots freezes the definitions of the tools mcpserver itself
// defines (tool_search, artifact_download), as toolkit's test does for the
// catalogue. Regenerate with UPDATE_TOOLSNAPS=true go test ./mcpserver.
func TestToolSnapshots(t *testing.T) {
	s := &Server{}
	update := os.Getenv("UPDATE_TOOLSNAPS") == "true"
	for _, tool := range []toolkit.Tool{s.toolSearch(), s.artifactDownload()} {
		got, err := json.MarshalIndent(tool.Def, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		name := filepath.Join("testdata", "toolsnaps", tool.Name()+".snap.json")
		if update {
			if err := os.WriteFile(name, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: no snapshot (%v); run UPDATE_TOOLSNAPS=true go test ./mcpserver and review the new file", tool.Name(), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: definition differs from %s; if the change is intended, run UPDATE_TOOLSNAPS=true go test ./mcpserver and review the diff.\n got: %s", tool.Name(), name, got)
		}
	}
}
