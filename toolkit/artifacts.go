package toolkit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/artifacts"
	"github.com/sciencediscovery/scimcp/workspace/provenance"
)

// ArtifactTools are declare_artifact, list_artifacts and read_artifact.
func ArtifactTools(arts *artifacts.Store) []Tool {
	return []Tool{declareArtifact(arts), listArtifacts(arts), readArtifact(arts)}
}

// OriginView is which execution (or nothing recorded) produced an artifact
// version's content.
type OriginView struct {
	Kind         string `json:"kind" jsonschema:"execution, download, transfer, artifact or unknown"`
	ExecutionID  string `json:"execution_id,omitempty"`
	Command      string `json:"command,omitempty"`
	ScriptPath   string `json:"scriptPath,omitempty"`
	FileRevision string `json:"file_revision,omitempty" jsonschema:"the file revision the version snapshots (see get_file_provenance)"`
	Note         string `json:"note,omitempty"`
}

func originView(v artifacts.Version) OriginView {
	return OriginView{Kind: string(v.Origin.Kind), ExecutionID: v.Origin.ExecutionID, Command: v.Origin.Command,
		ScriptPath: v.Origin.Script, FileRevision: v.FileRevision, Note: v.Origin.Note}
}

func originText(o OriginView) string {
	switch o.Kind {
	case string(provenance.KindExecution):
		what := o.Command
		if what == "" {
			what = o.ScriptPath
		}
		return fmt.Sprintf("from %s (%s)", o.ExecutionID, clip(what, 80))
	case string(provenance.KindUnknown):
		return "origin unknown"
	}
	return "from a " + o.Kind
}

// DeclareArtifactIn are declare_artifact's arguments.
type DeclareArtifactIn struct {
	Path        string   `json:"path,omitempty" jsonschema:"one workspace file to declare; give this or paths"`
	Paths       []string `json:"paths,omitempty" jsonschema:"1 to 50 workspace files to declare in one call; each succeeds or fails on its own"`
	Name        string   `json:"name,omitempty" jsonschema:"logical name, with slashes for virtual folders (e.g. figures/fig1.png). With one path: the artifact's name (declaring the same name again adds a version). With several: a virtual folder, each artifact named <name>/<file name>. Default: the file's workspace path"`
	Description string   `json:"description,omitempty" jsonschema:"what the artifact is, for people browsing the project (at most 4096 bytes)"`
}

// DeclaredEntry is the outcome of one path.
type DeclaredEntry struct {
	Path        string      `json:"path"`
	OK          bool        `json:"ok"`
	Error       string      `json:"error,omitempty" jsonschema:"why this entry failed"`
	Code        string      `json:"code,omitempty"`
	ArtifactID  string      `json:"artifact_id,omitempty"`
	Name        string      `json:"name,omitempty"`
	Version     int         `json:"version,omitempty"`
	NewArtifact bool        `json:"new_artifact,omitempty"`
	Unchanged   bool        `json:"unchanged,omitempty" jsonschema:"the content equals the latest version: no new version was made"`
	URI         string      `json:"uri,omitempty" jsonschema:"the MCP resource of this version"`
	Hash        string      `json:"hash,omitempty"`
	Size        int64       `json:"size,omitempty"`
	MediaType   string      `json:"media_type,omitempty"`
	Preview     string      `json:"preview,omitempty" jsonschema:"text, markdown, table, json, image, pdf, html or binary"`
	Origin      *OriginView `json:"origin,omitempty" jsonschema:"where the declared version came from (absent for a failed entry)"`
	Pending     string      `json:"pending,omitempty"`
}

// DeclareArtifactOut is declare_artifact's structured result.
type DeclareArtifactOut struct {
	Entries   []DeclaredEntry `json:"entries"`
	Declared  int             `json:"declared" jsonschema:"entries that made a new artifact or version"`
	Unchanged int             `json:"unchanged" jsonschema:"entries whose content equals their latest version"`
	Failed    int             `json:"failed"`
}

func declareArtifact(arts *artifacts.Store) Tool {
	t := Define(Spec{
		Name:  "declare_artifact",
		Title: "Declare Project Artifacts",
		Description: fmt.Sprintf("Declares workspace files as Project Artifacts: results kept for the whole project, across sessions, and shown to people. "+
			"Declaring snapshots each file's current content as a new version (the same name again adds a version; unchanged content adds none and says so), so later edits of the file do not change it. "+
			"Give path, or paths (1–%d); each entry succeeds or fails on its own and the result says which and why. "+
			"Optional name: a logical name whose slashes form virtual folders (figures/fig1.png), without moving the file; optional description. "+
			"The preview kind (text, markdown, table, json, image, pdf, html, binary) is inferred from the content. Files written by commands are not artifacts until declared.", artifacts.MaxDeclarePaths),
		Group: GroupBase,
		Input: func(s *jsonschema.Schema) {
			s.Properties["name"].MaxLength = ptr(artifacts.MaxNameBytes)
			s.Properties["description"].MaxLength = ptr(artifacts.MaxDescriptionBytes)
		},
	}, func(ctx context.Context, in DeclareArtifactIn) (Result[DeclareArtifactOut], error) {
		paths := in.Paths
		switch {
		case in.Path != "" && len(in.Paths) > 0:
			return Result[DeclareArtifactOut]{}, Errorf("give path (one file) or paths (several), not both")
		case in.Path != "":
			paths = []string{in.Path}
		case in.Paths == nil:
			return Result[DeclareArtifactOut]{}, Errorf("give path (one file) or paths (1 to %d files) to declare", artifacts.MaxDeclarePaths)
		}
		res, err := arts.Declare(ctx, artifacts.DeclareRequest{Paths: paths, Name: in.Name, Description: in.Description, Session: CallerFrom(ctx).Session})
		if err != nil {
			return Result[DeclareArtifactOut]{}, err
		}
		out := DeclareArtifactOut{Entries: make([]DeclaredEntry, 0, len(res.Entries)), Declared: res.Declared, Unchanged: res.Unchanged, Failed: res.Failed}
		var b strings.Builder
		fmt.Fprintf(&b, "%d declared, %d unchanged, %d failed (of %d).\n", res.Declared, res.Unchanged, res.Failed, len(res.Entries))
		for i, e := range res.Entries {
			d := DeclaredEntry{Path: e.Path, OK: e.OK, Error: e.Error, Code: e.Code, Name: e.Name, Pending: e.Pending}
			if e.OK {
				v := e.Version
				d.ArtifactID, d.Version, d.NewArtifact, d.Unchanged = e.Artifact.ID, v.Version, e.NewArtifact, e.Unchanged
				d.URI, d.Hash, d.Size, d.MediaType, d.Preview = artifacts.URI(e.Artifact.ID, v.Version), v.Hash, v.Size, v.MediaType, string(v.Preview)
				o := originView(v)
				d.Origin = &o
			}
			out.Entries = append(out.Entries, d)
			fmt.Fprintf(&b, "%d. %s: ", i+1, e.Path)
			switch {
			case !e.OK:
				b.WriteString("FAILED — " + e.Error)
			case e.Unchanged:
				fmt.Fprintf(&b, "unchanged — %q v%d (%s) already has this content; no new version", d.Name, d.Version, d.ArtifactID)
			case e.NewArtifact:
				fmt.Fprintf(&b, "new artifact %q v1 (%s), %s, %d bytes, %s; %s", d.Name, d.ArtifactID, d.Preview, d.Size, originText(*d.Origin), d.URI)
			default:
				fmt.Fprintf(&b, "%q v%d (%s), %s, %d bytes, %s; %s", d.Name, d.Version, d.ArtifactID, d.Preview, d.Size, originText(*d.Origin), d.URI)
			}
			if e.Pending != "" {
				b.WriteString(" (its writer is not recorded yet: " + e.Pending + ")")
			}
			b.WriteByte('\n')
		}
		return Result[DeclareArtifactOut]{Text: strings.TrimSuffix(b.String(), "\n"), Data: out}, nil
	})
	// Resource links let clients show the declared versions to people.
	inner := t.Handler
	t.Handler = func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := inner(ctx, req)
		if err != nil || res == nil || res.IsError {
			return res, err
		}
		if out, ok := res.StructuredContent.(DeclareArtifactOut); ok {
			for _, e := range out.Entries {
				if e.OK {
					res.Content = append(res.Content, mcp.ResourceLink{
						Type: mcp.ContentTypeLink, URI: e.URI, Name: e.Name, Title: fmt.Sprintf("%s (v%d)", e.Name, e.Version),
						Description: fmt.Sprintf("Project artifact %s, version %d, declared from %s", e.Name, e.Version, e.Path), MIMEType: e.MediaType,
					})
				}
			}
		}
		return res, nil
	}
	return t
}

// ListArtifactsIn has no fields: the seed gives list_artifacts no
// parameters.
type ListArtifactsIn struct{}

// VersionView is one version of an artifact.
type VersionView struct {
	Version    int        `json:"version"`
	Hash       string     `json:"hash"`
	Size       int64      `json:"size"`
	MediaType  string     `json:"media_type"`
	Preview    string     `json:"preview"`
	SourcePath string     `json:"source_path" jsonschema:"the workspace file it was declared from"`
	Declared   string     `json:"declared"`
	Session    string     `json:"session,omitempty" jsonschema:"the session that declared it"`
	Origin     OriginView `json:"origin"`
	URI        string     `json:"uri"`
}

func versionView(v artifacts.Version) VersionView {
	return VersionView{Version: v.Version, Hash: v.Hash, Size: v.Size, MediaType: v.MediaType, Preview: string(v.Preview),
		SourcePath: v.SourcePath, Declared: v.Declared.UTC().Format(time.RFC3339), Session: v.Session, Origin: originView(v),
		URI: artifacts.URI(v.ArtifactID, v.Version)}
}

// ArtifactView is one artifact in list_artifacts.
type ArtifactView struct {
	ArtifactID    string      `json:"artifact_id"`
	Name          string      `json:"name"`
	Folder        string      `json:"folder,omitempty" jsonschema:"the virtual folder it sits in"`
	Description   string      `json:"description,omitempty"`
	LatestVersion int         `json:"latest_version"`
	Origin        OriginView  `json:"origin" jsonschema:"what produced the content of the creation snapshot"`
	Creation      VersionView `json:"creation" jsonschema:"the creation snapshot (version 1)"`
	Latest        VersionView `json:"latest"`
}

// ListArtifactsOut is list_artifacts' structured result.
type ListArtifactsOut struct {
	Artifacts []ArtifactView `json:"artifacts"`
	Folders   []string       `json:"folders" jsonschema:"virtual folders formed by names with slashes"`
	Count     int            `json:"count"`
}

func listArtifacts(arts *artifacts.Store) Tool {
	return Define(Spec{
		Name:  "list_artifacts",
		Title: "List Project Artifacts",
		Description: "Lists every Project Artifact of the project, declared in any session: logical name (slashes form virtual folders, which are listed too), id, origin (the execution or file revision that produced it, or unknown), the creation snapshot and the latest version. " +
			"Takes no arguments. Read one with read_artifact.",
		Group:      GroupBase,
		ReadOnly:   true,
		Idempotent: true,
	}, func(ctx context.Context, _ ListArtifactsIn) (Result[ListArtifactsOut], error) {
		list, folders, err := arts.List()
		if err != nil {
			return Result[ListArtifactsOut]{}, err
		}
		out := ListArtifactsOut{Artifacts: make([]ArtifactView, 0, len(list)), Folders: folders, Count: len(list)}
		if out.Folders == nil {
			out.Folders = []string{}
		}
		var b strings.Builder
		if len(list) == 0 {
			b.WriteString("No Project Artifacts yet. Declare workspace files with declare_artifact.")
			return Result[ListArtifactsOut]{Text: b.String(), Data: out}, nil
		}
		fmt.Fprintf(&b, "%d artifact(s), %d virtual folder(s); project-wide, across sessions.\n", len(list), len(folders))
		shown := map[string]bool{}
		for _, l := range list {
			a := ArtifactView{
				ArtifactID: l.ID, Name: l.Name, Folder: l.Folder, Description: l.Description, LatestVersion: l.Latest,
				Origin: originView(l.First), Creation: versionView(l.First), Latest: versionView(l.Last),
			}
			out.Artifacts = append(out.Artifacts, a)
			// Show each folder once, before its first artifact.
			depth := 0
			if a.Folder != "" {
				parts := strings.Split(a.Folder, "/")
				for i := range parts {
					f := strings.Join(parts[:i+1], "/")
					if !shown[f] {
						shown[f] = true
						fmt.Fprintf(&b, "%s%s/\n", strings.Repeat("  ", i), parts[i])
					}
				}
				depth = len(parts)
			}
			base := a.Name[len(a.Folder):]
			base = strings.TrimPrefix(base, "/")
			fmt.Fprintf(&b, "%s%s — %s v%d (%s, %d bytes), created %s %s", strings.Repeat("  ", depth), base, a.ArtifactID, a.LatestVersion,
				a.Latest.Preview, a.Latest.Size, a.Creation.Declared, originText(a.Origin))
			if a.LatestVersion > 1 {
				fmt.Fprintf(&b, "; latest v%d declared %s %s", a.LatestVersion, a.Latest.Declared, originText(a.Latest.Origin))
			}
			if a.Description != "" {
				b.WriteString(" — " + clip(a.Description, 120))
			}
			b.WriteByte('\n')
		}
		b.WriteString(`Read one with read_artifact {"name":"…"} (add "version" for an earlier one).`)
		return Result[ListArtifactsOut]{Text: b.String(), Data: out}, nil
	})
}

// ReadArtifactIn are read_artifact's arguments.
type ReadArtifactIn struct {
	ArtifactID string `json:"artifact_id,omitempty" jsonschema:"the artifact's id (art_…); give this or name"`
	Name       string `json:"name,omitempty" jsonschema:"the artifact's logical name; give this or artifact_id"`
	Version    int    `json:"version,omitempty" jsonschema:"the version to read (default: the latest)"`
	Offset     int    `json:"offset,omitempty" jsonschema:"number of lines to skip before the page; 0 (the default) starts at the first line. Use next_offset from the previous page to continue"`
	Limit      int    `json:"limit,omitempty" jsonschema:"maximum lines to return, 1 to 2000 (default 2000); a page also stops before 40 KiB"`
}

// ReadArtifactOut is read_artifact's structured result.
type ReadArtifactOut struct {
	ArtifactID    string `json:"artifact_id"`
	Name          string `json:"name"`
	Version       int    `json:"version"`
	LatestVersion int    `json:"latest_version"`
	URI           string `json:"uri"`
	Size          int64  `json:"size" jsonschema:"size of the version in bytes"`
	MediaType     string `json:"media_type"`
	Preview       string `json:"preview"`
	Binary        bool   `json:"binary" jsonschema:"true for binary versions, which are described but never returned"`
	Offset        int    `json:"offset"`
	Lines         int    `json:"lines"`
	NextOffset    *int   `json:"next_offset,omitempty" jsonschema:"offset of the next page; absent at the end"`
	EOF           bool   `json:"eof"`
	TotalLines    *int   `json:"total_lines,omitempty"`
	Bytes         int    `json:"bytes"`
	Content       string `json:"content,omitempty"`
	LineCut       bool   `json:"line_cut,omitempty"`
	LineBytes     int64  `json:"line_bytes,omitempty"`
	InvalidUTF8   bool   `json:"invalid_utf8,omitempty"`
	CRLF          bool   `json:"crlf,omitempty"`
}

func readArtifact(arts *artifacts.Store) Tool {
	return Define(Spec{
		Name:  "read_artifact",
		Title: "Read a Project Artifact",
		Description: fmt.Sprintf("Reads one page of a Project Artifact version (by artifact_id or name; the latest version unless version is given): UTF-8 text, at most %d lines or 40 KiB, with the line range and the next_offset to continue. "+
			"Binary versions return binary: true with their media type and size, never their bytes. A version's content never changes, even when its file does.", workspace.MaxPageLines),
		Group:       GroupBase,
		SelfBounded: true,
		ReadOnly:    true,
		Idempotent:  true,
		Input: func(s *jsonschema.Schema) {
			s.Properties["version"].Minimum = ptr(1.0)
			pageBounds(s)
		},
	}, func(ctx context.Context, in ReadArtifactIn) (Result[ReadArtifactOut], error) {
		r, err := arts.Read(in.ArtifactID, in.Name, in.Version, in.Offset, in.Limit)
		if err != nil {
			return Result[ReadArtifactOut]{}, err
		}
		v := r.Version
		out := ReadArtifactOut{
			ArtifactID: r.Artifact.ID, Name: r.Artifact.Name, Version: v.Version, LatestVersion: r.Artifact.Latest,
			URI: artifacts.URI(v.ArtifactID, v.Version), Size: v.Size, MediaType: v.MediaType, Preview: string(v.Preview), Binary: v.Binary,
		}
		if v.Binary {
			out.EOF = true
			text := fmt.Sprintf("%s v%d (%s) is binary (%s, %s, %d bytes). read_artifact never returns the bytes of binary versions; clients can show it from %s.",
				out.Name, out.Version, out.ArtifactID, v.Preview, v.MediaType, v.Size, out.URI)
			return Result[ReadArtifactOut]{Text: text, Data: out}, nil
		}
		p := r.Page
		out.Offset, out.Lines, out.EOF, out.Bytes, out.Content = p.Offset, p.Lines, p.EOF, p.Bytes, p.Text
		out.LineCut, out.LineBytes, out.InvalidUTF8, out.CRLF = p.CutLine, p.CutLineBytes, p.InvalidUTF8, p.CRLF
		if p.NextOffset >= 0 {
			out.NextOffset = ptr(p.NextOffset)
		}
		if p.TotalLines >= 0 {
			out.TotalLines = ptr(p.TotalLines)
		}
		var b strings.Builder
		b.WriteString(p.Text)
		if p.Text != "" && !strings.HasSuffix(p.Text, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(artifactFooter(out, in.Limit))
		return Result[ReadArtifactOut]{Text: b.String(), Data: out}, nil
	})
}

// artifactFooter tells the model where the page sits and how to go on; the
// continuation pins the version, so a version declared meanwhile does not
// change the pages.
func artifactFooter(o ReadArtifactOut, limit int) string {
	label := fmt.Sprintf("%s v%d of %d", o.Name, o.Version, o.LatestVersion)
	if o.Size == 0 {
		return fmt.Sprintf("[%s is empty (0 bytes).]", label)
	}
	total := "?"
	if o.TotalLines != nil {
		total = fmt.Sprint(*o.TotalLines)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s: lines %d–%d of %s (offset %d, %d lines, %d bytes).", label, o.Offset+1, o.Offset+o.Lines, total, o.Offset, o.Lines, o.Bytes)
	if o.LineCut {
		fmt.Fprintf(&b, " Line %d is %d bytes long; only its first %d bytes are shown.", o.Offset+1, o.LineBytes, o.Bytes)
	}
	if o.InvalidUTF8 {
		b.WriteString(" Invalid UTF-8 bytes were replaced by U+FFFD.")
	}
	if o.EOF {
		b.WriteString(" End of artifact.]")
		return b.String()
	}
	next, _ := json.Marshal(ReadArtifactIn{ArtifactID: o.ArtifactID, Version: o.Version, Offset: *o.NextOffset, Limit: limit})
	fmt.Fprintf(&b, " More: read_artifact %s]", next)
	return b.String()
}

// ArtifactResourceTemplates are the URI templates of artifact resources:
// scimcp://artifacts/{artifact_id} (the latest version) and
// scimcp://artifacts/{artifact_id}/v{version} (one version, immutable).
// Register both with ReadArtifactResource as the handler.
func ArtifactResourceTemplates() []mcp.ResourceTemplate {
	return []mcp.ResourceTemplate{
		mcp.NewResourceTemplate(artifacts.URIPrefix+"{artifact_id}", "Project artifact (latest version)",
			mcp.WithTemplateDescription("The latest version of a Project Artifact, by id (art_…)."), mcp.WithTemplateMIMEType("application/octet-stream")),
		mcp.NewResourceTemplate(artifacts.URIPrefix+"{artifact_id}/v{version}", "Project artifact version",
			mcp.WithTemplateDescription("One version of a Project Artifact; its content never changes."), mcp.WithTemplateMIMEType("application/octet-stream")),
	}
}

// ArtifactResourceList lists every artifact as an MCP resource (its latest
// version); register each with ReadArtifactResource as the handler, again
// after every declaration (artifacts.Config.OnChange).
func ArtifactResourceList(arts *artifacts.Store) ([]mcp.Resource, error) {
	rs, err := arts.Resources()
	if err != nil {
		return nil, err
	}
	out := make([]mcp.Resource, len(rs))
	for i, r := range rs {
		out[i] = mcp.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MimeType}
		out[i].Size = ptr(r.Size)
	}
	return out, nil
}

// ReadArtifactResource serves resources/read of an artifact URI: the whole
// version, as text when it is UTF-8 text, else as a base64 blob (for
// clients showing it to people; the model pages through read_artifact).
// Versions above artifacts.DefaultResourceBytes are refused.
func ReadArtifactResource(arts *artifacts.Store) func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		r, data, err := arts.ReadResource(req.Params.URI, 0)
		if err != nil {
			return nil, err
		}
		if r.Preview != artifacts.PreviewBinary && r.Preview != artifacts.PreviewPDF && utf8.Valid(data) &&
			!(r.Preview == artifacts.PreviewImage && r.MimeType != "image/svg+xml") {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: r.MimeType, Text: string(data)}}, nil
		}
		return []mcp.ResourceContents{mcp.BlobResourceContents{URI: req.Params.URI, MIMEType: r.MimeType, Blob: base64.StdEncoding.EncodeToString(data)}}, nil
	}
}
