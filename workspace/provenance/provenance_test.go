package provenance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/cas"
	"github.com/sciencediscovery/scimcp/workspace/store"
)

type env struct {
	dir  string // workspace folder
	data string
	ws   *workspace.Workspace
	db   *store.Store
	cas  *cas.Store
	x    *Index
}

func newEnv(tb testing.TB, mutate func(*Config)) *env {
	tb.Helper()
	base := tb.TempDir()
	e := &env{dir: filepath.Join(base, "ws"), data: filepath.Join(base, "data")}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	ws, err := workspace.Open(e.dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ws.Close() })
	e.ws, e.dir = ws, ws.Dir()
	e.open(tb, mutate)
	return e
}

// open opens the data folder and the index (again, after close: a restart).
func (e *env) open(tb testing.TB, mutate func(*Config)) {
	tb.Helper()
	db, err := store.Open(e.data, store.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	c, err := cas.Open(e.data, cas.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Store: db, Workspace: e.ws, CAS: c}
	if mutate != nil {
		mutate(&cfg)
	}
	x, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.db, e.cas, e.x = db, c, x
	tb.Cleanup(func() { x.Close(); db.Close() })
}

func (e *env) close() { e.x.Close(); e.db.Close() }

func (e *env) write(tb testing.TB, rel, content string) {
	tb.Helper()
	p := filepath.Join(e.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func unknown(note string) Writer { return Writer{Kind: KindUnknown, Note: note} }

// execution returns a writer whose window opens now; call end to close it.
func execution(id, command string) *Writer {
	now := time.Now()
	return &Writer{Kind: KindExecution, ExecutionID: id, Command: command, Runner: "local", Session: "s1", Created: &now, Started: &now}
}

func end(w *Writer) Writer {
	now := time.Now()
	w.Ended = &now
	code := 0
	w.ExitCode, w.State = &code, "succeeded"
	return *w
}

// settle waits past the clock slack so the next change falls outside the
// window just closed.
func settle() { time.Sleep(2*clockSlack + 20*time.Millisecond) }

func scan(t *testing.T, e *env, w Writer) ScanReport {
	t.Helper()
	rep, err := e.x.Scan(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func file(t *testing.T, e *env, p string) FileProvenance {
	t.Helper()
	fp, err := e.x.File(context.Background(), p, 0, "test")
	if err != nil {
		t.Fatalf("File(%s): %v", p, err)
	}
	return fp
}

func TestScanRecordsCreatedModifiedDeleted(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.txt", "one\n")
	e.write(t, "sub/b.txt", "bee\n")
	rep := scan(t, e, unknown("server start"))
	if rep.Files != 2 || rep.Created != 2 || rep.Unknown != 2 || rep.Hashed != 2 {
		t.Fatalf("first scan: %+v", rep)
	}
	// Nothing changed: nothing is read, nothing recorded.
	rep = scan(t, e, unknown("again"))
	if rep.Hashed != 0 || rep.Created+rep.Modified+rep.Deleted != 0 {
		t.Fatalf("unchanged scan: %+v", rep)
	}
	settle()
	w := execution("exec_0000000000000001", "python make.py")
	e.write(t, "a.txt", "two\n")
	os.Remove(filepath.Join(e.dir, "sub/b.txt"))
	e.write(t, "c.txt", "sea\n")
	rep = scan(t, e, end(w))
	if rep.Created != 1 || rep.Modified != 1 || rep.Deleted != 1 || rep.Unknown != 0 {
		t.Fatalf("execution scan: %+v", rep)
	}
	fp := file(t, e, "a.txt")
	if fp.Total != 2 || len(fp.History) != 2 || fp.Current.Change != Modified || fp.Current.Writer.ExecutionID != "exec_0000000000000001" ||
		fp.Current.Writer.Command != "python make.py" || fp.Current.Previous != fp.History[1].ID || fp.History[1].Writer.Kind != KindUnknown {
		t.Fatalf("a.txt: %+v", fp)
	}
	if fp.History[1].SeenBy != "server start" || !strings.Contains(fp.History[1].Writer.Note, "server start") {
		t.Fatalf("unknown revision does not say who saw it: %+v", fp.History[1])
	}
	fp = file(t, e, "sub/b.txt")
	if fp.Exists || fp.Current.Change != Deleted || fp.Current.Writer.Kind != KindExecution || fp.Total != 2 {
		t.Fatalf("deleted b: %+v", fp)
	}
	// Earlier content stays readable.
	f, err := e.x.OpenContent(fp.History[1])
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "bee\n" {
		t.Fatalf("earlier content %q", got)
	}
	if _, err := e.x.OpenContent(*fp.Current); !IsCode(err, CodeNoContent) {
		t.Fatalf("content of a deletion: %v", err)
	}
}

// TestOriginRules: a change made before an execution's window is unknown;
// one inside is the execution's, even with its mtime set back (ctime
// decides); one after is left for a later scan.
func TestOriginRules(t *testing.T) {
	e := newEnv(t, nil)
	scan(t, e, unknown("server start"))
	e.write(t, "by-hand.csv", "x\n1\n")
	settle()
	w := execution("exec_00000000000000aa", "make all")
	e.write(t, "made.csv", "y\n2\n")
	e.write(t, "old-mtime.dat", "extracted\n")
	past := time.Now().Add(-72 * time.Hour)
	os.Chtimes(filepath.Join(e.dir, "old-mtime.dat"), past, past)
	ew := end(w)
	settle()
	e.write(t, "later.txt", "after the run\n")
	rep := scan(t, e, ew)
	if rep.Created != 3 || rep.Unknown != 1 || rep.Deferred != 1 {
		t.Fatalf("scan: %+v", rep)
	}
	if fp := file(t, e, "by-hand.csv"); fp.Current.Writer.Kind != KindUnknown || fp.Current.SeenBy != "scan after execution exec_00000000000000aa" {
		t.Fatalf("by hand: %+v", fp.Current)
	}
	for _, p := range []string{"made.csv", "old-mtime.dat"} {
		if fp := file(t, e, p); fp.Current.Writer.Kind != KindExecution || fp.Current.Writer.ExecutionID != "exec_00000000000000aa" {
			t.Fatalf("%s: %+v", p, fp.Current)
		}
	}
	// later.txt was left alone by the scan; asking about it records it now,
	// with origin unknown.
	fp := file(t, e, "later.txt")
	if !fp.Recorded || fp.Current.Writer.Kind != KindUnknown || fp.Current.SeenBy != "test" {
		t.Fatalf("later: %+v", fp)
	}
}

func TestRunningExecutionsDeferUnknownChanges(t *testing.T) {
	var running []Window
	e := newEnv(t, func(c *Config) { c.Running = func() []Window { return running } })
	scan(t, e, unknown("start"))
	running = []Window{{ExecutionID: "exec_00000000000000bb", Start: time.Now()}}
	e.write(t, "in-progress.txt", "partial")
	rep := scan(t, e, unknown("another scan"))
	if rep.Deferred != 1 || rep.Created != 0 {
		t.Fatalf("scan while running: %+v", rep)
	}
	obs, err := e.x.Observe(context.Background(), "in-progress.txt", "test")
	if err != nil || obs.Pending == "" || obs.Current != nil {
		t.Fatalf("observe while running: %+v %v", obs, err)
	}
}

func TestContentCap(t *testing.T) {
	const keep = 100
	e := newEnv(t, func(c *Config) { c.KeepBytes = keep })
	e.write(t, "at-cap.bin", strings.Repeat("a", keep))
	e.write(t, "over-cap.bin", strings.Repeat("b", keep+1))
	scan(t, e, unknown("start"))
	at := file(t, e, "at-cap.bin").Current
	over := file(t, e, "over-cap.bin").Current
	if !at.ContentKept || at.ContentNote != "" {
		t.Fatalf("at cap: %+v", at)
	}
	if over.ContentKept || over.Size != keep+1 || over.Hash == "" || !strings.Contains(over.ContentNote, "above the 100-byte cap") {
		t.Fatalf("over cap: %+v", over)
	}
	if _, err := e.x.OpenContent(*over); !IsCode(err, CodeNoContent) || !strings.Contains(err.Error(), "not kept") {
		t.Fatalf("open over cap: %v", err)
	}
}

func TestSymlinksAndSpecialFilesAreSkipped(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "real.txt", "real\n")
	os.Symlink("real.txt", filepath.Join(e.dir, "link.txt"))
	os.Symlink("/etc", filepath.Join(e.dir, "etc"))
	os.Mkdir(filepath.Join(e.dir, "d"), 0o755)
	syscall.Mkfifo(filepath.Join(e.dir, "fifo"), 0o644)
	rep := scan(t, e, unknown("start"))
	if rep.Files != 1 || rep.Created != 1 {
		t.Fatalf("scan: %+v", rep)
	}
	for p, want := range map[string]string{
		"link.txt":     "symbolic link",
		"etc/passwd":   "symbolic link",
		"d":            "directory",
		"fifo":         "not a regular file",
		".":            "workspace folder itself",
		"../x":         "leaves the workspace",
		"/etc/passwd":  "outside the workspace",
		"missing.txt":  "does not exist",
		"real.txt/sub": "does not exist",
	} {
		_, err := e.x.File(context.Background(), p, 0, "test")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("File(%q) = %v, want %q", p, err, want)
		}
		var ip interface{ InputProblem() bool }
		if err != nil && (!errors.As(err, &ip) || !ip.InputProblem()) {
			t.Errorf("File(%q): %v is not an input problem", p, err)
		}
	}
}

func TestDataFolderInsideWorkspaceIsExcluded(t *testing.T) {
	base := t.TempDir()
	ws, err := workspace.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	db, err := store.Open(filepath.Join(base, ".scimcp"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, _ := cas.Open(db.Dir(), cas.Options{})
	x, err := New(Config{Store: db, Workspace: ws, CAS: c})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	os.WriteFile(filepath.Join(base, "a.txt"), []byte("a"), 0o644)
	rep, err := x.Scan(context.Background(), unknown("start"))
	if err != nil || rep.Files != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	// Twice: the blobs the first scan stored are not picked up.
	rep, _ = x.Scan(context.Background(), unknown("again"))
	if rep.Created != 0 {
		t.Fatalf("the data folder was scanned: %+v", rep)
	}
}

func TestHistoryNewestFirstAndBounded(t *testing.T) {
	e := newEnv(t, nil)
	for i := 0; i < MaxHistory+5; i++ {
		e.write(t, "log.txt", strings.Repeat("x", i+1))
		if _, err := e.x.Observe(context.Background(), "log.txt", "test"); err != nil {
			t.Fatal(err)
		}
	}
	fp, err := e.x.File(context.Background(), "log.txt", 1000, "test")
	if err != nil {
		t.Fatal(err)
	}
	if fp.Total != MaxHistory+5 || len(fp.History) != MaxHistory || fp.History[0].Size != MaxHistory+5 || fp.History[0].ID != fp.Current.ID {
		t.Fatalf("total %d, returned %d, newest size %d", fp.Total, len(fp.History), fp.History[0].Size)
	}
	fp = file(t, e, "log.txt")
	if len(fp.History) != DefaultHistory {
		t.Fatalf("default history %d", len(fp.History))
	}
	for i := 1; i < len(fp.History); i++ {
		if fp.History[i-1].Previous != fp.History[i].ID {
			t.Fatalf("history not chained at %d", i)
		}
	}
}

func TestIndexSurvivesRestart(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.txt", "a")
	scan(t, e, unknown("start"))
	e.close()
	e.open(t, nil)
	if rep := scan(t, e, unknown("restart")); rep.Created+rep.Modified+rep.Deleted != 0 || rep.Hashed != 0 {
		t.Fatalf("after restart: %+v", rep)
	}
	e.write(t, "a.txt", "b")
	if rep := scan(t, e, unknown("restart")); rep.Modified != 1 {
		t.Fatalf("after restart and change: %+v", rep)
	}
}

func TestTouchWithoutChangeRecordsNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.txt", "same")
	scan(t, e, unknown("start"))
	now := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(e.dir, "a.txt"), now, now)
	rep := scan(t, e, unknown("touch"))
	if rep.Hashed != 1 || rep.Modified != 0 || rep.Unchanged != 1 {
		t.Fatalf("%+v", rep)
	}
	if rep = scan(t, e, unknown("again")); rep.Hashed != 0 {
		t.Fatalf("the index did not learn the new times: %+v", rep)
	}
}

func TestCorruptRevisionContentIsNotServed(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "r.txt", "result 42\n")
	scan(t, e, unknown("start"))
	cur := file(t, e, "r.txt").Current
	p := e.cas.Path(cur.Hash)
	os.Chmod(p, 0o600)
	os.WriteFile(p, []byte("result 43\n"), 0o600)
	if _, err := e.x.OpenContent(*cur); !IsCode(err, CodeCorrupt) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("corrupt: %v", err)
	}
	e.write(t, "r.txt", "result 44\n")
	cur2 := file(t, e, "r.txt").Current
	if _, err := e.x.Diff(cur.ID, cur2.ID); !IsCode(err, CodeCorrupt) {
		t.Fatalf("diff of corrupt: %v", err)
	}
}

func TestRecordWrite(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "copy.csv", "a,b\n")
	src := &Source{ArtifactID: "art_0123456789abcdef", ArtifactVersion: 2, Hash: "x"}
	r, err := e.x.RecordWrite(context.Background(), "copy.csv", Writer{Kind: KindArtifact, Source: src})
	if err != nil || r.Writer.Kind != KindArtifact || r.Change != Created {
		t.Fatalf("%+v %v", r, err)
	}
	// The scan after it sees nothing new.
	if rep := scan(t, e, unknown("after")); rep.Created != 0 {
		t.Fatalf("%+v", rep)
	}
	if _, err := e.x.RecordWrite(context.Background(), "x", Writer{Kind: KindExecution}); err == nil {
		t.Fatal("RecordWrite accepted an execution writer")
	}
}

func TestRevisionLookup(t *testing.T) {
	e := newEnv(t, nil)
	for _, id := range []string{"", "rev_", "rev_zz", "rev_0000000000000000", "exec_0000000000000001"} {
		if _, err := e.x.Revision(id); !IsCode(err, CodeUnknownRevision) {
			t.Errorf("Revision(%q): %v", id, err)
		}
	}
	if _, err := e.x.Revision("rev_00000000000000ff"); !IsCode(err, CodeUnknownRevision) || !strings.Contains(err.Error(), "no revision") {
		t.Errorf("unknown: %v", err)
	}
}

// TestPROVExport parses the export back and checks every relation points
// at a record of the document, and the relations the contract names.
func TestPROVExport(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "tools/run.py", "print('hi')\n")
	e.write(t, "out.txt", "by hand\n")
	scan(t, e, unknown("server start"))
	settle()
	w := execution("exec_00000000000000cc", "")
	w.Script = "tools/run.py"
	e.write(t, "out.txt", "by the script\n")
	scan(t, e, end(w))
	fp := file(t, e, "out.txt")
	links := []ArtifactLink{{ArtifactID: "art_00000000000000aa", Name: "results/out", Version: 1, Hash: fp.Current.Hash, Size: fp.Current.Size,
		SourcePath: "out.txt", RevisionID: fp.Current.ID, Declared: time.Now(), Session: "s2", URI: "scimcp://artifacts/art_00000000000000aa/v1"}}
	raw, err := ExportPROV(fp, links)
	if err != nil {
		t.Fatal(err)
	}
	var doc PROV
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("parse back: %v\n%s", err, raw)
	}
	if doc.Prefix["scimcp"] != Namespace {
		t.Fatalf("prefix: %v", doc.Prefix)
	}
	defined := func(id string) bool {
		_, a := doc.Entity[id]
		_, b := doc.Activity[id]
		_, c := doc.Agent[id]
		return a || b || c
	}
	for name, rels := range map[string]map[string]map[string]any{
		"wasGeneratedBy": doc.WasGeneratedBy, "used": doc.Used, "wasDerivedFrom": doc.WasDerivedFrom,
		"wasAssociatedWith": doc.WasAssociatedWith, "specializationOf": doc.SpecializationOf, "wasInvalidatedBy": doc.WasInvalidatedBy,
	} {
		for id, r := range rels {
			if !strings.HasPrefix(id, "_:") {
				t.Errorf("%s relation id %q", name, id)
			}
			for k, v := range r {
				if s, ok := v.(string); ok && strings.HasPrefix(k, "prov:") && k != "prov:time" && !defined(s) {
					t.Errorf("%s %s: %s = %q is not defined", name, id, k, s)
				}
			}
		}
	}
	cur, prev := "scimcp:"+fp.Current.ID, "scimcp:"+fp.History[1].ID
	has := func(rels map[string]map[string]any, kv ...string) bool {
		for _, r := range rels {
			ok := true
			for i := 0; i < len(kv); i += 2 {
				if r[kv[i]] != kv[i+1] {
					ok = false
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	if !has(doc.WasGeneratedBy, "prov:entity", cur, "prov:activity", "scimcp:exec_00000000000000cc") {
		t.Error("current revision not generated by the execution")
	}
	if has(doc.WasGeneratedBy, "prov:entity", prev) {
		t.Error("the unknown revision has a generating activity")
	}
	if doc.Entity[prev]["scimcp:origin"] != "unknown" {
		t.Errorf("unknown origin not stated: %v", doc.Entity[prev])
	}
	if !has(doc.WasDerivedFrom, "prov:generatedEntity", cur, "prov:usedEntity", prev) {
		t.Error("no derivation from the previous revision")
	}
	script := "scimcp:" + file(t, e, "tools/run.py").Current.ID
	if !has(doc.Used, "prov:activity", "scimcp:exec_00000000000000cc", "prov:entity", script) {
		t.Error("execution did not use its script")
	}
	if !has(doc.WasDerivedFrom, "prov:generatedEntity", "scimcp:art_00000000000000aa.v1", "prov:usedEntity", cur) {
		t.Error("artifact version not derived from the revision")
	}
	if !has(doc.Used, "prov:activity", "scimcp:declare-art_00000000000000aa.v1", "prov:entity", cur) {
		t.Error("declaration did not use the revision")
	}
	if !has(doc.WasAssociatedWith, "prov:activity", "scimcp:exec_00000000000000cc", "prov:agent", "scimcp:runner-local") {
		t.Error("execution not associated with its runner")
	}
	if a := doc.Activity["scimcp:exec_00000000000000cc"]; a["prov:startTime"] == nil || a["prov:endTime"] == nil || a["scimcp:exitCode"] != float64(0) {
		t.Errorf("activity: %v", a)
	}
}

// TestMaxFiles: a scan tracks at most MaxFiles files, says it was truncated,
// and records no deletions it could not see.
func TestMaxFiles(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxFiles = 3 })
	for i := 0; i < 3; i++ {
		e.write(t, fmt.Sprintf("f%d.txt", i), "x")
	}
	if rep := scan(t, e, unknown("start")); rep.Truncated || rep.Files != 3 || rep.Created != 3 {
		t.Fatalf("at the limit: %+v", rep)
	}
	e.write(t, "f3.txt", "x")
	rep := scan(t, e, unknown("more"))
	if !rep.Truncated || rep.Files != 3 || rep.Deleted != 0 {
		t.Fatalf("over the limit: %+v", rep)
	}
}

func TestDiffInputCap(t *testing.T) {
	e := newEnv(t, nil)
	line := strings.Repeat("x", 1023) + "\n"
	at := strings.Repeat(line, MaxDiffInputBytes/len(line))
	e.write(t, "at.txt", at)
	e.write(t, "over.txt", at+"y")
	scan(t, e, unknown("start"))
	e.write(t, "at.txt", "changed\n"+at[len("changed\n"):])
	e.write(t, "over.txt", "changed\n"+at[len("changed\n"):]+"y")
	scan(t, e, unknown("edit"))
	fa, fo := file(t, e, "at.txt"), file(t, e, "over.txt")
	if d, err := e.x.Diff(fa.History[1].ID, fa.Current.ID); err != nil || d.Added != 2 || d.Removed != 1 { // the first line split in two
		t.Fatalf("at the cap: %+v %v", d.Added, err)
	}
	if _, err := e.x.Diff(fo.History[1].ID, fo.Current.ID); !IsCode(err, CodeTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
}

// TestCancelledScanRecordsNothingHalfDone: a scan whose context has ended
// stops, says it was truncated, and leaves every change for the next scan.
func TestCancelledScanRecordsNothingHalfDone(t *testing.T) {
	e := newEnv(t, nil)
	e.write(t, "a.txt", "a")
	scan(t, e, unknown("start"))
	os.Remove(filepath.Join(e.dir, "a.txt"))
	e.write(t, "b.txt", "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := e.x.Scan(ctx, unknown("cancelled"))
	if err != nil || !rep.Truncated || rep.Created+rep.Deleted != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if rep := scan(t, e, unknown("next")); rep.Created != 1 || rep.Deleted != 1 {
		t.Fatalf("next scan: %+v", rep)
	}
}

// TestUnknownContentBudget: one scan keeps at most UnknownKeepBytes of
// content for files with no recorded writer; the rest keep hash and size
// only, and say so. Negative KeepBytes keeps no content at all.
func TestUnknownContentBudget(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.UnknownKeepBytes = 150 })
	for i := 0; i < 4; i++ {
		e.write(t, fmt.Sprintf("d%d.txt", i), strings.Repeat(fmt.Sprint(i), 60))
	}
	if _, err := e.x.Scan(context.Background(), Writer{Kind: KindUnknown, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	kept, notKept := 0, 0
	for i := 0; i < 4; i++ {
		fp, err := e.x.File(context.Background(), fmt.Sprintf("d%d.txt", i), 1, "")
		if err != nil || len(fp.History) != 1 {
			t.Fatalf("d%d: %v %+v", i, err, fp)
		}
		r := fp.History[0]
		if r.ContentKept {
			kept++
		} else {
			notKept++
			if !strings.Contains(r.ContentNote, "no recorded writer") || r.Hash == "" || r.Size != 60 {
				t.Fatalf("a revision past the budget must say so and keep hash and size: %+v", r)
			}
		}
	}
	if kept != 2 || notKept != 2 {
		t.Fatalf("150-byte budget over four 60-byte files: %d kept, %d not", kept, notKept)
	}

	h := newEnv(t, func(c *Config) { c.KeepBytes = -1 })
	h.write(t, "a.txt", "hello")
	if _, err := h.x.Scan(context.Background(), Writer{Kind: KindUnknown, Note: "test"}); err != nil {
		t.Fatal(err)
	}
	fp, _ := h.x.File(context.Background(), "a.txt", 1, "")
	if fp.History[0].ContentKept {
		t.Fatal("KeepBytes < 0 must keep no content")
	}
}
