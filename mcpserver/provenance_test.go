package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
)

// provMCPEnv is a test server wired the way cmd/scimcp wires provenance and
// artifacts: executions whose OnEnd scans the workspace, a scan at start,
// get_file_provenance and the artifact tools, and artifacts served as
// resources with notifications/resources/list_changed on every declaration.
type provMCPEnv struct {
	*testEnv
	prov  *provenance.Index
	arts  *artifacts.Store
	execs *runner.Executions
}

func newProvMCPEnv(t *testing.T) *provMCPEnv {
	t.Helper()
	p := &provMCPEnv{}
	p.testEnv = newEnv(t, p.wire(t))
	p.serveResources()
	return p
}

// restart stops the server and starts it again over the same folders.
func (p *provMCPEnv) restart(t *testing.T) {
	t.Helper()
	p.stop()
	p.start(t, p.wire(t))
	p.serveResources()
}

// wire replaces the catalogue's execution tools with ones whose executions
// run the provenance scan when they end, and adds the tools under test.
func (p *provMCPEnv) wire(t *testing.T) func(*Options) {
	return func(o *Options) {
		data := o.Store.Dir()
		wsDir := filepath.Join(filepath.Dir(data), "ws") // newEnv's layout
		ws, err := workspace.Open(wsDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		blobs, err := cas.Open(data, cas.Options{})
		if err != nil {
			t.Fatal(err)
		}
		prov, err := provenance.New(provenance.Config{Store: o.Store, Workspace: ws, CAS: blobs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { prov.Close() })
		if _, err := prov.Scan(context.Background(), provenance.Writer{Kind: provenance.KindUnknown, Note: "server start"}); err != nil {
			t.Fatal(err)
		}
		arts, err := artifacts.New(artifacts.Config{Store: o.Store, Workspace: ws, CAS: blobs, Provenance: prov, OnChange: p.syncResources})
		if err != nil {
			t.Fatal(err)
		}
		local, err := runner.NewLocal(runner.LocalConfig{
			Workspace: wsDir, StateDir: filepath.Join(data, "sandbox-prov"),
			Helper: []string{os.Args[0]}, HelperEnv: []string{"SCIMCP_TEST_HELPER=1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := any(local).(interface{ Ready() error }); ok {
			t.Cleanup(func() { r.Ready() }) // a sandbox prepared in the background
		}
		execs, err := runner.NewExecutions(runner.Config{Store: o.Store, Runners: []runner.Runner{local}, CancelGrace: time.Second,
			OnEnd: func(rec runner.Execution) {
				if _, err := prov.Scan(context.Background(), toolkit.ExecutionWriter(rec)); err != nil {
					t.Errorf("scan after %s: %v", rec.ID, err)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { execs.Shutdown(5 * time.Second) })
		o.Tools = append(toolkit.Catalogue(toolkit.Services{Workspace: ws, Outputs: o.Outputs, Executions: execs}), toolkit.GetFileProvenance(prov, arts))
		o.Tools = append(o.Tools, toolkit.ArtifactTools(arts)...)
		p.prov, p.arts, p.execs = prov, arts, execs
	}
}

// serveResources registers the artifact resource templates and the current
// artifacts (what cmd/scimcp does once the server exists).
func (p *provMCPEnv) serveResources() {
	read := toolkit.ReadArtifactResource(p.arts)
	for _, tpl := range toolkit.ArtifactResourceTemplates() {
		p.srv.MCP().AddResourceTemplate(tpl, read)
	}
	p.syncResources()
}

// syncResources is artifacts.Config.OnChange: (re)register every artifact
// and tell clients the list changed.
func (p *provMCPEnv) syncResources() {
	if p.testEnv == nil || p.srv == nil || p.arts == nil {
		return
	}
	list, err := toolkit.ArtifactResourceList(p.arts)
	if err != nil {
		return
	}
	read := toolkit.ReadArtifactResource(p.arts)
	for _, r := range list {
		p.srv.MCP().AddResource(r, read)
	}
	p.srv.MCP().SendNotificationToAllClients(mcp.MethodNotificationResourcesListChanged, nil)
}

// provNotes counts the notifications a client receives, by method.
type provNotes struct {
	mu sync.Mutex
	n  map[string]int
}

func provListen(c *client.Client) *provNotes {
	pn := &provNotes{n: map[string]int{}}
	c.OnNotification(func(n mcp.JSONRPCNotification) { pn.mu.Lock(); pn.n[n.Method]++; pn.mu.Unlock() })
	return pn
}

func (pn *provNotes) waitFor(t *testing.T, method string, atLeast int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pn.mu.Lock()
		n := pn.n[method]
		pn.mu.Unlock()
		if n >= atLeast {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s notification(s), want at least %d", n, method, atLeast)
		}
	}
}

// outsideWindow waits until a change made before it can no longer fall
// into the window of an execution started after it (file times come from
// the kernel's coarse clock; provenance allows 50 ms of slack).
func outsideWindow() { time.Sleep(150 * time.Millisecond) }

func provOf(t *testing.T, c *client.Client, path string) (toolkit.FileProvenanceOut, string) {
	t.Helper()
	res := call(t, c, "get_file_provenance", fmt.Sprintf(`{"path":%q}`, path))
	if res.IsError {
		t.Fatalf("get_file_provenance %s: %s", path, text(res))
	}
	var out toolkit.FileProvenanceOut
	structured(t, res, &out)
	return out, text(res)
}

// TestProvenanceEndToEnd: a script run by run_shell writes three files, and
// get_file_provenance on each names that execution and its script; files
// placed by hand say origin unknown; a second run's change is a new revision
// whose diff and PROV export can be read.
func TestProvenanceEndToEnd(t *testing.T) {
	p := newProvMCPEnv(t)
	p.write(t, "make_results.sh", "mkdir -p results\n"+
		"printf 'hello\\n' > results/a.txt\n"+
		"printf 'x,y\\n1,2\\n' > results/b.csv\n"+
		"printf '{\"ok\": true}\\n' > results/c.json\n")
	p.write(t, "data/by-hand.csv", "x\n1\n")
	outsideWindow()
	c := p.connect(t)

	res := call(t, c, "run_shell", `{"scriptPath":"make_results.sh"}`)
	var run toolkit.RunShellOut
	structured(t, res, &run)
	if res.IsError || run.State != "succeeded" {
		t.Fatalf("run_shell: %s", text(res))
	}
	for _, f := range []string{"results/a.txt", "results/b.csv", "results/c.json"} {
		out, txt := provOf(t, c, f)
		if out.Origin != "execution" || out.Execution == nil || out.Execution.ExecutionID != run.ExecutionID ||
			out.Execution.ScriptPath != "make_results.sh" || out.Execution.State != "succeeded" || *out.Execution.ExitCode != 0 ||
			out.Execution.Runner == "" || out.Execution.Session == "" || out.HistoryTotal != 1 || out.History[0].Change != "created" {
			t.Fatalf("%s: %s\n%+v", f, txt, out)
		}
		if !strings.Contains(txt, "Origin: execution "+run.ExecutionID+" (make_results.sh)") {
			t.Fatalf("%s text: %s", f, txt)
		}
		if out.Execution.ScriptRevision == "" {
			t.Errorf("%s: the script's revision is not recorded", f)
		}
	}
	// Placed by hand before the run: unknown, said plainly.
	for _, f := range []string{"data/by-hand.csv", "make_results.sh"} {
		out, txt := provOf(t, c, f)
		if out.Origin != "unknown" || out.Execution != nil || !strings.Contains(txt, "Origin: unknown") || !strings.Contains(txt, "do not guess") {
			t.Fatalf("%s: %s", f, txt)
		}
	}
	// Copied in by hand after the run, with no scan since: still unknown.
	p.write(t, "data/late.csv", "z\n9\n")
	if out, txt := provOf(t, c, "data/late.csv"); out.Origin != "unknown" || out.History[0].SeenBy != "get_file_provenance" {
		t.Fatalf("late: %s", txt)
	}

	// A second run changes one file: a new revision, its parent the first.
	outsideWindow()
	res = call(t, c, "run_shell", `{"command":"echo 3,4 >> results/b.csv"}`)
	var run2 toolkit.RunShellOut
	structured(t, res, &run2)
	out, txt := provOf(t, c, "results/b.csv")
	if out.Execution == nil || out.Execution.ExecutionID != run2.ExecutionID || out.Execution.Command != "echo 3,4 >> results/b.csv" ||
		out.HistoryTotal != 2 || out.Parent == nil || out.Parent.PreviousRevision != out.History[1].RevisionID || out.History[1].Writer.ExecutionID != run.ExecutionID {
		t.Fatalf("b.csv after the second run: %s", txt)
	}
	res = call(t, c, "get_file_provenance", fmt.Sprintf(`{"path":"results/b.csv","diff_from":%q}`, out.History[1].RevisionID))
	if res.IsError || !strings.Contains(text(res), " x,y\n 1,2\n+3,4\n") {
		t.Fatalf("diff: %s", text(res))
	}
	res = call(t, c, "get_file_provenance", fmt.Sprintf(`{"path":"results/b.csv","revision":%q}`, out.History[1].RevisionID))
	if res.IsError || !strings.HasPrefix(text(res), "x,y\n1,2\n[results/b.csv at ") {
		t.Fatalf("earlier revision: %s", text(res))
	}
	// The PROV-JSON export parses and names both executions.
	res = call(t, c, "get_file_provenance", `{"path":"results/b.csv","format":"prov-json"}`)
	var pout toolkit.FileProvenanceOut
	structured(t, res, &pout)
	var doc provenance.PROV
	if res.IsError || pout.Page == nil || json.Unmarshal([]byte(pout.Page.Content), &doc) != nil {
		t.Fatalf("prov-json: %s", text(res))
	}
	for _, id := range []string{run.ExecutionID, run2.ExecutionID} {
		if _, ok := doc.Activity["scimcp:"+id]; !ok {
			t.Errorf("PROV export lacks activity %s", id)
		}
	}
	// Deleted by a run: the last revision says so, and the file's history
	// stays readable.
	outsideWindow()
	call(t, c, "run_shell", `{"command":"rm results/a.txt"}`)
	if out, txt := provOf(t, c, "results/a.txt"); out.Exists || out.History[0].Change != "deleted" || out.History[0].Origin != "execution" {
		t.Fatalf("deleted: %s", txt)
	}
}
