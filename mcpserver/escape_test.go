package mcpserver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapeCorpusEveryPathTool runs the path-escape corpus through every
// tool that takes a workspace path: none may succeed or show the content of
// a file outside the workspace.
func TestEscapeCorpusEveryPathTool(t *testing.T) {
	p := newProvMCPEnv(t)
	outside := filepath.Join(filepath.Dir(p.dir), "outside")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOPSECRET-CONTENT\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "run.sh"), []byte("#!/bin/sh\necho TOPSECRET-CONTENT\n"), 0o755)
	ws := p.dir
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "abs-link.txt"))
	os.Symlink("../outside/secret.txt", filepath.Join(ws, "rel-link.txt"))
	os.Symlink("../outside", filepath.Join(ws, "dir-link"))
	os.Symlink("/proc/self/root", filepath.Join(ws, "proc-root"))
	corpus := []string{
		"../outside/secret.txt", "sub/../../outside/secret.txt", "/etc/passwd", outside + "/secret.txt",
		ws + "/../outside/secret.txt", "/workspace/../outside/secret.txt", "abs-link.txt", "rel-link.txt",
		"dir-link/secret.txt", "dir-link/run.sh", "proc-root" + outside + "/secret.txt", "proc-root/etc/passwd",
		"a.txt\x00../../outside/secret.txt", strings.Repeat("x/", 2100) + "y", "..", "",
	}
	c := p.connect(t)
	for _, path := range corpus {
		pj, _ := json.Marshal(path)
		for _, tc := range []struct{ tool, args string }{
			{"read_file", `{"path":` + string(pj) + `}`},
			{"run_shell", `{"scriptPath":` + string(pj) + `}`},
			{"get_file_provenance", `{"path":` + string(pj) + `}`},
			{"declare_artifact", `{"path":` + string(pj) + `}`},
			{"declare_artifact", `{"paths":[` + string(pj) + `,"also-missing.txt"]}`},
		} {
			res := call(t, c, tc.tool, tc.args)
			txt := text(res)
			if strings.Contains(txt, "TOPSECRET") {
				t.Fatalf("%s %q leaked the outside file: %s", tc.tool, path, txt)
			}
			failed := res.IsError
			if tc.tool == "declare_artifact" && !res.IsError {
				var out struct {
					Declared int `json:"declared"`
				}
				structured(t, res, &out)
				failed = out.Declared == 0
			}
			if !failed {
				t.Errorf("%s %q succeeded: %.300s", tc.tool, path, txt)
			}
		}
	}
}
