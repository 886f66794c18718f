package toolkit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
)

// FormatPROVJSON is get_file_provenance's export format.
const FormatPROVJSON = "prov-json"

// ExecutionWriter describes an ended execution as the writer provenance
// credits with the files it changed (runner.Config.OnEnd passes it to
// provenance.Index.Scan).
func ExecutionWriter(e runner.Execution) provenance.Writer {
	w := provenance.Writer{
		Kind: provenance.KindExecution, ExecutionID: e.ID, Command: e.Command, Script: e.Script, Args: e.Args,
		Runner: e.Runner, EnvironmentID: e.EnvironmentID, State: string(e.State), ExitCode: e.ExitCode, Signal: e.Signal,
		Started: e.Started, Ended: e.Ended, Session: e.Session,
	}
	created := e.Created
	w.Created = &created
	return w
}

// GetFileProvenanceIn are get_file_provenance's arguments.
type GetFileProvenanceIn struct {
	Path         string `json:"path" jsonschema:"file path relative to the workspace root (absolute paths under the workspace or /workspace are accepted)"`
	HistoryLimit int    `json:"history_limit,omitempty" jsonschema:"how many revisions to list, newest first: 1 to 100 (default 20)"`
	Revision     string `json:"revision,omitempty" jsonschema:"read the content of this earlier revision (an id from the history) instead of the summary, one page at a time"`
	DiffFrom     string `json:"diff_from,omitempty" jsonschema:"show a unified diff from this revision (an id from the history) instead of the summary"`
	DiffTo       string `json:"diff_to,omitempty" jsonschema:"with diff_from: the revision to compare to (default: the current revision)"`
	Format       string `json:"format,omitempty" jsonschema:"prov-json: export the file's provenance as a W3C PROV-JSON document instead of the summary"`
	Offset       int    `json:"offset,omitempty" jsonschema:"with revision, diff_from or format: lines to skip before the page; use next_offset to continue"`
	Limit        int    `json:"limit,omitempty" jsonschema:"with revision, diff_from or format: maximum lines to return, 1 to 2000 (default 2000); a page also stops before 40 KiB"`
}

// WriterView is who wrote a revision.
type WriterView struct {
	Kind        string      `json:"kind" jsonschema:"execution, download, transfer, artifact or unknown"`
	ExecutionID string      `json:"execution_id,omitempty"`
	Command     string      `json:"command,omitempty"`
	ScriptPath  string      `json:"scriptPath,omitempty"`
	Arguments   []string    `json:"arguments,omitempty"`
	Source      *SourceView `json:"source,omitempty" jsonschema:"what a copied file came from"`
	Note        string      `json:"note,omitempty" jsonschema:"for unknown: why no writer is known"`
}

// SourceView is what a copy came from.
type SourceView struct {
	Path            string `json:"path,omitempty"`
	RevisionID      string `json:"revision_id,omitempty"`
	Hash            string `json:"hash,omitempty"`
	WorkspaceID     string `json:"workspace_id,omitempty"`
	ArtifactID      string `json:"artifact_id,omitempty"`
	ArtifactVersion int    `json:"artifact_version,omitempty"`
	URI             string `json:"uri,omitempty"`
	// Downloads from an MCP source (artifact_download).
	InvocationID  string `json:"mcpInvocationId,omitempty" jsonschema:"the MCP source invocation whose result offered the file"`
	MCPSource     string `json:"mcp_source,omitempty"`
	MCPTool       string `json:"mcp_tool,omitempty"`
	CandidateID   string `json:"candidateId,omitempty"`
	DownloadJobID string `json:"artifactJobId,omitempty"`
	MediaType     string `json:"media_type,omitempty"`
	Bytes         int64  `json:"bytes,omitempty"`
}

// ExecutionContext is the execution that wrote a revision.
type ExecutionContext struct {
	ExecutionID         string   `json:"execution_id"`
	Command             string   `json:"command,omitempty"`
	ScriptPath          string   `json:"scriptPath,omitempty"`
	ScriptRevision      string   `json:"script_revision,omitempty" jsonschema:"the script's own revision when the execution ended"`
	Arguments           []string `json:"arguments,omitempty"`
	Runner              string   `json:"runner,omitempty"`
	EnvironmentID       string   `json:"environment_id,omitempty"`
	EnvironmentRevision string   `json:"environment_revision,omitempty"`
	State               string   `json:"state,omitempty"`
	ExitCode            *int     `json:"exit_code,omitempty"`
	Signal              string   `json:"signal,omitempty"`
	Started             string   `json:"started,omitempty"`
	Ended               string   `json:"ended,omitempty"`
	Session             string   `json:"session,omitempty"`
}

// RevisionView is one revision of a file.
type RevisionView struct {
	RevisionID  string     `json:"revision_id"`
	Change      string     `json:"change" jsonschema:"created, modified or deleted"`
	Hash        string     `json:"hash,omitempty" jsonschema:"sha256 of the content"`
	Size        int64      `json:"size"`
	Mtime       string     `json:"mtime,omitempty"`
	Recorded    string     `json:"recorded"`
	Origin      string     `json:"origin" jsonschema:"execution, download, transfer, artifact or unknown"`
	Writer      WriterView `json:"writer"`
	ContentKept bool       `json:"content_kept" jsonschema:"true when the content can be read with revision and compared with diff_from"`
	ContentNote string     `json:"content_note,omitempty"`
	Previous    string     `json:"previous,omitempty" jsonschema:"the revision this one replaced"`
	SeenBy      string     `json:"seen_by,omitempty" jsonschema:"what noticed the change"`
}

// LineageView is where the current content came from.
type LineageView struct {
	PreviousRevision string      `json:"previous_revision,omitempty"`
	PreviousHash     string      `json:"previous_hash,omitempty"`
	CopiedFrom       *SourceView `json:"copied_from,omitempty" jsonschema:"the artifact, transfer or download the file was copied from"`
}

// ArtifactLinkView is an artifact version declared from the file.
type ArtifactLinkView struct {
	ArtifactID string `json:"artifact_id"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	Hash       string `json:"hash"`
	RevisionID string `json:"revision_id,omitempty"`
	Declared   string `json:"declared"`
	URI        string `json:"uri"`
}

// ProvenancePage is one page of a revision's content, a diff or an export.
type ProvenancePage struct {
	Revision    string `json:"revision,omitempty"`
	DiffFrom    string `json:"diff_from,omitempty"`
	DiffTo      string `json:"diff_to,omitempty"`
	MediaType   string `json:"media_type"`
	Binary      bool   `json:"binary" jsonschema:"true for binary content, which is described but never returned"`
	Size        int64  `json:"size" jsonschema:"bytes of the whole content paged"`
	Identical   bool   `json:"identical,omitempty" jsonschema:"for a diff: the two revisions have the same content"`
	Minimal     *bool  `json:"minimal,omitempty" jsonschema:"for a diff: false when a very different block is shown replaced whole rather than line by line"`
	Added       *int   `json:"added,omitempty"`
	Removed     *int   `json:"removed,omitempty"`
	Offset      int    `json:"offset"`
	Lines       int    `json:"lines"`
	NextOffset  *int   `json:"next_offset,omitempty" jsonschema:"offset of the next page; absent at the end"`
	EOF         bool   `json:"eof"`
	TotalLines  *int   `json:"total_lines,omitempty"`
	Bytes       int    `json:"bytes"`
	Content     string `json:"content,omitempty"`
	LineCut     bool   `json:"line_cut,omitempty"`
	LineBytes   int64  `json:"line_bytes,omitempty"`
	InvalidUTF8 bool   `json:"invalid_utf8,omitempty"`
}

// FileProvenanceOut is get_file_provenance's structured result.
type FileProvenanceOut struct {
	Path             string             `json:"path"`
	Mode             string             `json:"mode" jsonschema:"summary, revision, diff or prov-json"`
	Exists           bool               `json:"exists" jsonschema:"true when the file is in the workspace now"`
	Size             int64              `json:"size,omitempty" jsonschema:"size on disk now"`
	Hash             string             `json:"hash,omitempty" jsonschema:"sha256 of the current revision's content"`
	CurrentRevision  string             `json:"current_revision,omitempty"`
	Origin           string             `json:"origin" jsonschema:"who wrote the current revision: execution, download, transfer, artifact or unknown (stated, never guessed)"`
	CurrentSource    *WriterView        `json:"current_source,omitempty"`
	Pending          string             `json:"pending,omitempty" jsonschema:"set when the file changed under a running execution and is not recorded yet"`
	Execution        *ExecutionContext  `json:"execution,omitempty" jsonschema:"the execution that wrote the current revision"`
	Parent           *LineageView       `json:"parent,omitempty"`
	History          []RevisionView     `json:"history,omitempty" jsonschema:"revisions, newest first"`
	HistoryTotal     int                `json:"history_total"`
	HistoryTruncated bool               `json:"history_truncated,omitempty"`
	Artifacts        []ArtifactLinkView `json:"artifacts,omitempty" jsonschema:"artifact versions declared from this file"`
	Page             *ProvenancePage    `json:"page,omitempty" jsonschema:"the page read in revision, diff or prov-json mode"`
}

// GetFileProvenance is the get_file_provenance tool. arts may be nil (no
// artifact links).
func GetFileProvenance(prov *provenance.Index, arts *artifacts.Store) Tool {
	return Define(Spec{
		Name:  "get_file_provenance",
		Title: "File provenance",
		Description: "Returns what scimcp recorded about one workspace file: its identity (path, sha256, size), its current source (the execution that wrote it — command, runner, environment, exit status, times, session — or a copy's source), its revision history newest first, the revision it replaced, and the Project Artifact versions declared from it. " +
			"origin: unknown means no writer was recorded (a file copied in by hand, or changed outside scimcp); report it as unknown and do not guess. " +
			"Also: revision=<id> reads an earlier revision's content page by page (like read_file); diff_from=<id> (and optional diff_to, default the current revision) shows a unified diff of two text revisions, paged; format=prov-json exports the file's provenance as W3C PROV-JSON, paged. " +
			"Pages hold at most 2000 lines or 40 KiB; continue with offset.",
		Group:       GroupBase,
		SelfBounded: true,
		// It records a change it notices (bookkeeping in the data folder)
		// but never modifies the workspace.
		ReadOnly:   true,
		Idempotent: true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["path"].MinLength = ptr(1)
			s.Properties["history_limit"].Minimum = ptr(1.0)
			s.Properties["history_limit"].Maximum = ptr(float64(provenance.MaxHistory))
			s.Properties["format"].Enum = []any{FormatPROVJSON}
			pageBounds(s)
		},
	}, func(ctx context.Context, in GetFileProvenanceIn) (Result[FileProvenanceOut], error) {
		modes := 0
		for _, set := range []bool{in.Revision != "", in.DiffFrom != "", in.Format != ""} {
			if set {
				modes++
			}
		}
		switch {
		case modes > 1:
			return Result[FileProvenanceOut]{}, Errorf("give at most one of revision, diff_from or format")
		case in.DiffTo != "" && in.DiffFrom == "":
			return Result[FileProvenanceOut]{}, Errorf("diff_to needs diff_from: the diff goes from diff_from to diff_to")
		case modes == 0 && (in.Offset != 0 || in.Limit != 0):
			return Result[FileProvenanceOut]{}, Errorf("offset and limit page the output of revision, diff_from or format; the summary is bounded by history_limit instead")
		}
		fp, err := prov.File(ctx, in.Path, in.HistoryLimit, "get_file_provenance")
		if err != nil {
			return Result[FileProvenanceOut]{}, err
		}
		var links []provenance.ArtifactLink
		if arts != nil {
			if links, err = arts.LinksForPath(fp.Path); err != nil {
				return Result[FileProvenanceOut]{}, err
			}
		}
		out := provenanceSummary(fp, links)
		switch {
		case in.Revision != "":
			return revisionPage(prov, out, fp, in)
		case in.DiffFrom != "":
			return diffPage(prov, out, fp, in)
		case in.Format != "":
			raw, err := provenance.ExportPROV(fp, links)
			if err != nil {
				return Result[FileProvenanceOut]{}, err
			}
			return textPage(out, FormatPROVJSON, &ProvenancePage{MediaType: "application/json"}, string(raw)+"\n", in, fmt.Sprintf("W3C PROV-JSON of %s (%d of %d revisions)", fp.Path, len(fp.History), fp.Total))
		}
		return Result[FileProvenanceOut]{Text: summaryText(out), Data: out}, nil
	})
}

func provenanceSummary(fp provenance.FileProvenance, links []provenance.ArtifactLink) FileProvenanceOut {
	out := FileProvenanceOut{
		Path: fp.Path, Mode: "summary", Exists: fp.Exists, HistoryTotal: fp.Total,
		HistoryTruncated: len(fp.History) < fp.Total, Pending: fp.Pending, Origin: string(provenance.KindUnknown),
	}
	if fp.Exists {
		out.Size = fp.Size
	}
	for _, r := range fp.History {
		out.History = append(out.History, revisionView(r))
	}
	if c := fp.Current; c != nil {
		out.CurrentRevision, out.Hash, out.Origin = c.ID, c.Hash, string(c.Writer.Kind)
		w := writerView(c.Writer)
		out.CurrentSource = &w
		if c.Writer.Kind == provenance.KindExecution {
			out.Execution = executionContext(c.Writer)
		}
		if c.Previous != "" || c.Writer.Source != nil {
			out.Parent = &LineageView{PreviousRevision: c.Previous, CopiedFrom: w.Source}
			for _, h := range fp.History {
				if h.ID == c.Previous {
					out.Parent.PreviousHash = h.Hash
				}
			}
		}
	}
	for _, l := range links {
		out.Artifacts = append(out.Artifacts, ArtifactLinkView{
			ArtifactID: l.ArtifactID, Name: l.Name, Version: l.Version, Hash: l.Hash, RevisionID: l.RevisionID,
			Declared: l.Declared.UTC().Format(time.RFC3339), URI: l.URI,
		})
	}
	return out
}

func revisionView(r provenance.Revision) RevisionView {
	v := RevisionView{
		RevisionID: r.ID, Change: string(r.Change), Hash: r.Hash, Size: r.Size, Recorded: r.Recorded.UTC().Format(time.RFC3339),
		Origin: string(r.Writer.Kind), Writer: writerView(r.Writer), ContentKept: r.ContentKept, ContentNote: r.ContentNote,
		Previous: r.Previous, SeenBy: r.SeenBy,
	}
	if r.Change != provenance.Deleted {
		v.Mtime = r.ModTime.UTC().Format(time.RFC3339)
	}
	return v
}

func writerView(w provenance.Writer) WriterView {
	v := WriterView{Kind: string(w.Kind), ExecutionID: w.ExecutionID, Command: w.Command, ScriptPath: w.Script, Arguments: w.Args, Note: w.Note}
	if s := w.Source; s != nil {
		v.Source = &SourceView{Path: s.Path, RevisionID: s.RevisionID, Hash: s.Hash, WorkspaceID: s.WorkspaceID,
			ArtifactID: s.ArtifactID, ArtifactVersion: s.ArtifactVersion, URI: s.URI,
			InvocationID: s.InvocationID, MCPSource: s.MCPSource, MCPTool: s.MCPTool, CandidateID: s.CandidateID,
			DownloadJobID: s.DownloadJobID, MediaType: s.MediaType, Bytes: s.Bytes}
	}
	return v
}

func executionContext(w provenance.Writer) *ExecutionContext {
	e := &ExecutionContext{
		ExecutionID: w.ExecutionID, Command: w.Command, ScriptPath: w.Script, ScriptRevision: w.ScriptRevision, Arguments: w.Args,
		Runner: w.Runner, EnvironmentID: w.EnvironmentID, EnvironmentRevision: w.EnvironmentRevision, State: w.State,
		ExitCode: w.ExitCode, Signal: w.Signal, Session: w.Session,
	}
	if w.Started != nil {
		e.Started = w.Started.UTC().Format(time.RFC3339Nano)
	}
	if w.Ended != nil {
		e.Ended = w.Ended.UTC().Format(time.RFC3339Nano)
	}
	return e
}

// writerText is one line about a writer.
func writerText(w WriterView, e *ExecutionContext) string {
	switch w.Kind {
	case string(provenance.KindExecution):
		what := w.Command
		if what == "" {
			what = strings.TrimSpace(w.ScriptPath + " " + strings.Join(w.Arguments, " "))
		}
		s := fmt.Sprintf("execution %s (%s)", w.ExecutionID, clip(what, 160))
		if e != nil {
			if e.Runner != "" {
				s += ", runner " + e.Runner
			}
			if e.EnvironmentID != "" {
				s += ", environment " + e.EnvironmentID
			}
			if e.ExitCode != nil {
				s += fmt.Sprintf(", exit code %d", *e.ExitCode)
			} else if e.State != "" {
				s += ", " + e.State
			}
			if e.Started != "" && e.Ended != "" {
				s += ", " + e.Started + " → " + e.Ended
			}
			if e.Session != "" {
				s += ", session " + e.Session
			}
		}
		return s
	case string(provenance.KindUnknown):
		return "unknown — " + w.Note + ". Report the origin as unknown; do not guess one"
	}
	s := w.Kind
	if src := w.Source; src != nil {
		switch {
		case src.ArtifactID != "":
			s += fmt.Sprintf(" from artifact %s v%d", src.ArtifactID, src.ArtifactVersion)
		case src.URI != "":
			s += " from " + src.URI
			if src.Bytes > 0 {
				s += fmt.Sprintf(" (%d bytes, sha256 %s)", src.Bytes, src.Hash)
			}
		case src.Path != "":
			s += " from " + src.Path
			if src.WorkspaceID != "" {
				s += " in workspace " + src.WorkspaceID
			}
		}
	}
	if w.Note != "" {
		s += " — " + w.Note
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func summaryText(o FileProvenanceOut) string {
	var b strings.Builder
	p, _ := json.Marshal(o.Path)
	switch {
	case o.CurrentRevision == "" && o.Pending != "":
		fmt.Fprintf(&b, "%s: no revision recorded yet; %s.\n", o.Path, o.Pending)
		return b.String()
	case !o.Exists:
		fmt.Fprintf(&b, "%s no longer exists: its last revision %s records the deletion.\n", o.Path, o.CurrentRevision)
	default:
		fmt.Fprintf(&b, "%s: current revision %s, sha256 %s, %d bytes.\n", o.Path, o.CurrentRevision, o.Hash, o.Size)
	}
	if o.Pending != "" {
		fmt.Fprintf(&b, "Pending: the file on disk differs from that revision: %s.\n", o.Pending)
	}
	if o.CurrentSource != nil {
		fmt.Fprintf(&b, "Origin: %s.\n", writerText(*o.CurrentSource, o.Execution))
	}
	if o.Parent != nil {
		if o.Parent.PreviousRevision != "" {
			fmt.Fprintf(&b, "Parent: %s (the revision it replaced).\n", o.Parent.PreviousRevision)
		}
		if c := o.Parent.CopiedFrom; c != nil {
			fmt.Fprintf(&b, "Copied from: %s.\n", strings.TrimPrefix(writerText(WriterView{Kind: o.Origin, Source: c}, nil), o.Origin+" "))
		}
	} else {
		b.WriteString("Parent: none (this is the first recorded revision).\n")
	}
	if len(o.Artifacts) == 0 {
		b.WriteString("Artifacts: none declared from this file (declare_artifact makes it one).\n")
	} else {
		b.WriteString("Artifacts declared from this file:")
		for _, a := range o.Artifacts {
			fmt.Fprintf(&b, " %s v%d (%s, %s);", a.Name, a.Version, a.ArtifactID, a.URI)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "History (%d of %d revisions, newest first):\n", len(o.History), o.HistoryTotal)
	for _, r := range o.History {
		fmt.Fprintf(&b, "  %s %s %s %d bytes", r.RevisionID, r.Recorded, r.Change, r.Size)
		if r.Origin == string(provenance.KindExecution) {
			what := r.Writer.Command
			if what == "" {
				what = r.Writer.ScriptPath
			}
			fmt.Fprintf(&b, " by %s (%s)", r.Writer.ExecutionID, clip(what, 80))
		} else {
			b.WriteString(" origin " + r.Origin)
		}
		if !r.ContentKept && r.Change != string(provenance.Deleted) {
			b.WriteString(" [content not kept]")
		}
		b.WriteString("\n")
	}
	if o.HistoryTruncated {
		fmt.Fprintf(&b, "Older revisions not shown; raise history_limit (at most %d).\n", provenance.MaxHistory)
	}
	if len(o.History) > 1 {
		fmt.Fprintf(&b, "Read an earlier revision: get_file_provenance {\"path\":%s,\"revision\":%q}. Compare: {\"path\":%s,\"diff_from\":%q}. ", p, o.History[1].RevisionID, p, o.History[1].RevisionID)
	}
	fmt.Fprintf(&b, "W3C PROV-JSON: {\"path\":%s,\"format\":\"prov-json\"}.", p)
	return b.String()
}

// revisionPage reads one page of a revision of the file.
func revisionPage(prov *provenance.Index, out FileProvenanceOut, fp provenance.FileProvenance, in GetFileProvenanceIn) (Result[FileProvenanceOut], error) {
	rp, err := prov.ReadRevision(in.Revision, in.Offset, in.Limit)
	if err != nil {
		return Result[FileProvenanceOut]{}, err
	}
	if rp.Revision.Path != fp.Path {
		return Result[FileProvenanceOut]{}, Errorf("revision %s belongs to %s, not %s; pass that path, or a revision from this file's history", in.Revision, rp.Revision.Path, fp.Path)
	}
	out.Mode = "revision"
	pg := &ProvenancePage{Revision: rp.Revision.ID, MediaType: rp.MediaType, Binary: rp.Binary, Size: rp.Revision.Size}
	out.Page = pg
	if rp.Binary {
		pg.EOF = true
		text := fmt.Sprintf("Revision %s of %s is binary (%s, %d bytes); its bytes are never returned.", rp.Revision.ID, fp.Path, rp.MediaType, rp.Revision.Size)
		return Result[FileProvenanceOut]{Text: text, Data: out}, nil
	}
	fillPage(pg, rp.Page)
	label := fmt.Sprintf("%s at %s (%s)", fp.Path, rp.Revision.ID, rp.Revision.Change)
	return Result[FileProvenanceOut]{Text: pageText(label, pg, in), Data: out}, nil
}

// diffPage pages a unified diff between two revisions.
func diffPage(prov *provenance.Index, out FileProvenanceOut, fp provenance.FileProvenance, in GetFileProvenanceIn) (Result[FileProvenanceOut], error) {
	to := in.DiffTo
	if to == "" {
		if fp.Current == nil {
			return Result[FileProvenanceOut]{}, Errorf("%s has no recorded revision to compare to; give diff_to", fp.Path)
		}
		to = fp.Current.ID
	}
	d, err := prov.Diff(in.DiffFrom, to)
	if err != nil {
		return Result[FileProvenanceOut]{}, err
	}
	pg := &ProvenancePage{DiffFrom: d.From.ID, DiffTo: d.To.ID, MediaType: "text/x-diff", Identical: d.Identical,
		Minimal: ptr(d.Minimal), Added: ptr(d.Added), Removed: ptr(d.Removed)}
	if d.Identical {
		out.Mode, out.Page = "diff", pg
		pg.EOF = true
		return Result[FileProvenanceOut]{Text: fmt.Sprintf("%s and %s have identical content (sha256 %s).", d.From.ID, d.To.ID, d.From.Hash), Data: out}, nil
	}
	label := fmt.Sprintf("diff %s → %s (+%d −%d lines", d.From.ID, d.To.ID, d.Added, d.Removed)
	if !d.Minimal {
		label += "; a very different block is shown replaced whole"
	}
	label += ")"
	return textPage(out, "diff", pg, d.Text, in, label)
}

// textPage pages generated text (a diff, an export) with read_file's bounds.
func textPage(out FileProvenanceOut, mode string, pg *ProvenancePage, text string, in GetFileProvenanceIn, label string) (Result[FileProvenanceOut], error) {
	p, err := workspace.ReadPage(strings.NewReader(text), int64(len(text)), nil, in.Offset, in.Limit)
	if err != nil {
		return Result[FileProvenanceOut]{}, err
	}
	out.Mode, out.Page = mode, pg
	pg.Size = int64(len(text))
	fillPage(pg, p)
	return Result[FileProvenanceOut]{Text: pageText(label, pg, in), Data: out}, nil
}

func fillPage(pg *ProvenancePage, p workspace.Page) {
	pg.Offset, pg.Lines, pg.EOF, pg.Bytes, pg.Content = p.Offset, p.Lines, p.EOF, p.Bytes, p.Text
	pg.LineCut, pg.LineBytes, pg.InvalidUTF8 = p.CutLine, p.CutLineBytes, p.InvalidUTF8
	if p.NextOffset >= 0 {
		pg.NextOffset = ptr(p.NextOffset)
	}
	if p.TotalLines >= 0 {
		pg.TotalLines = ptr(p.TotalLines)
	}
}

// pageText is a page followed by a footer that says where it sits and how
// to go on, as read_file's does.
func pageText(label string, pg *ProvenancePage, in GetFileProvenanceIn) string {
	var b strings.Builder
	b.WriteString(pg.Content)
	if pg.Content != "" && !strings.HasSuffix(pg.Content, "\n") {
		b.WriteByte('\n')
	}
	if pg.Size == 0 {
		fmt.Fprintf(&b, "[%s is empty (0 bytes).]", label)
		return b.String()
	}
	total := "?"
	if pg.TotalLines != nil {
		total = fmt.Sprint(*pg.TotalLines)
	}
	fmt.Fprintf(&b, "[%s: lines %d–%d of %s (offset %d, %d lines, %d bytes).", label, pg.Offset+1, pg.Offset+pg.Lines, total, pg.Offset, pg.Lines, pg.Bytes)
	if pg.LineCut {
		fmt.Fprintf(&b, " Line %d is %d bytes long; only its first %d bytes are shown.", pg.Offset+1, pg.LineBytes, pg.Bytes)
	}
	if pg.InvalidUTF8 {
		b.WriteString(" Invalid UTF-8 bytes were replaced by U+FFFD.")
	}
	if pg.EOF {
		b.WriteString(" End.]")
		return b.String()
	}
	next := in
	next.Offset, next.Limit, next.HistoryLimit = *pg.NextOffset, in.Limit, 0
	args, _ := json.Marshal(next)
	fmt.Fprintf(&b, " More: get_file_provenance %s]", args)
	return b.String()
}
