package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sciencediscovery/scimcp/mcpserver/sources"
	"github.com/sciencediscovery/scimcp/toolkit"
	"github.com/sciencediscovery/scimcp/workspace/downloads"
)

// Download policies for clients that cannot ask their user.
const (
	DownloadRefuse = "refuse"
	DownloadAllow  = "allow"
)

// PermissionTimeout bounds how long artifact_download waits for the user's
// answer to its permission request.
const PermissionTimeout = 10 * time.Minute

// ResourceReadTimeout bounds a source's answer to resources/read for a
// non-http resource link.
const ResourceReadTimeout = 5 * time.Minute

// permissionInput keys the permission request in a multi round-trip call.
const permissionInput = "download_permission"

// ArtifactDownloadIn are artifact_download's arguments.
type ArtifactDownloadIn struct {
	MCPInvocationID string `json:"mcpInvocationId" jsonschema:"the mcpInvocationId of an earlier mcp__<source>__<tool> call, as its result named it"`
	CandidateID     string `json:"candidateId" jsonschema:"which of that result's download candidates (c1, c2, ...), as its result listed them"`
	DestinationPath string `json:"destinationPath,omitempty" jsonschema:"workspace path for the file; default downloads/<name>. An existing file is never overwritten"`
}

// ArtifactDownloadOut is artifact_download's structured result.
type ArtifactDownloadOut struct {
	ArtifactJobID   string              `json:"artifactJobId" jsonschema:"name this job in a later paper_extract_pdf call"`
	State           string              `json:"state" jsonschema:"completed; a download that did not complete is an error result that names its job and why"`
	Permission      string              `json:"permission,omitempty" jsonschema:"user (asked through the client) or policy (the server's configuration)"`
	Candidate       downloads.Candidate `json:"candidate"`
	Path            string              `json:"path,omitempty"`
	Bytes           int64               `json:"bytes,omitempty"`
	SHA256          string              `json:"sha256,omitempty"`
	MediaType       string              `json:"media_type,omitempty"`
	FinalURL        string              `json:"final_url,omitempty"`
	RevisionID      string              `json:"revision_id,omitempty"`
	ArtifactID      string              `json:"artifact_id,omitempty"`
	ArtifactName    string              `json:"artifact_name,omitempty"`
	ArtifactVersion int                 `json:"artifact_version,omitempty"`
}

// addDownloads registers artifact_download when sources, the invocation
// records and a download service are all there.
func (s *Server) addDownloads() error {
	if s.opts.Downloads == nil || len(s.sources) == 0 || s.invocations == nil {
		return nil
	}
	switch s.opts.DownloadPolicy {
	case "":
		s.opts.DownloadPolicy = DownloadRefuse
	case DownloadRefuse, DownloadAllow:
	default:
		return fmt.Errorf("download policy %q: use %q or %q", s.opts.DownloadPolicy, DownloadRefuse, DownloadAllow)
	}
	t := s.artifactDownload()
	typed := t.Handler
	t.Handler = func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ask := &permissionRound{req: req}
		res, err := typed(withRound(ctx, ask), req)
		if ask.input != nil {
			return ask.input, nil
		}
		return res, err
	}
	s.toolGroup[t.Name()] = t.Group
	s.mcp.AddTools(server.ServerTool{Tool: t.Def, Handler: server.ToolHandlerFunc(t.Handler)})
	return nil
}

// permissionRound carries a multi round-trip call's answers in, and the
// input request out, around the typed handler.
type permissionRound struct {
	req   mcp.CallToolRequest
	input *mcp.CallToolResult
}

type roundKey struct{}

func withRound(ctx context.Context, r *permissionRound) context.Context {
	return context.WithValue(ctx, roundKey{}, r)
}

var errNeedsInput = errors.New("the client is asked for input")

// decision is the answer to a download's permission request.
type decision struct {
	granted bool
	by      string // "user" or "policy"
	why     string // for refusals, in words the model can relay
}

// askPermission asks the user through the client (form elicitation) when it
// can, and applies the configured policy when it cannot. For a client of
// protocol 2026-07-28 the question goes out as an input request and the
// answer comes back on the retried call; older clients get a
// server-initiated elicitation/create.
func (s *Server) askPermission(ctx context.Context, message string) (decision, error) {
	round, _ := ctx.Value(roundKey{}).(*permissionRound)
	params := mcp.ElicitationParams{
		Mode:    mcp.ElicitationModeForm,
		Message: message,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"allow": map[string]any{"type": "boolean", "title": "Allow this download", "description": "Save the file into the workspace and register it as a Project Artifact", "default": true},
			},
			"required": []string{"allow"},
		},
	}
	if round != nil {
		if ans := server.ElicitationResponse(round.req.Params.InputResponses, permissionInput); ans != nil {
			return answer(ans), nil
		}
	}
	modern := server.IsModernRequest(ctx)
	canAsk := false
	if modern {
		if round != nil {
			if caps := round.req.Params.Meta.ClientCapabilities(); caps != nil {
				canAsk = formElicitation(caps.Elicitation)
			}
		}
	} else if sess := s.sessionFromContext(ctx); sess != nil {
		s.mu.Lock()
		canAsk = sess.FormElicitation
		s.mu.Unlock()
	}
	if !canAsk {
		if s.opts.DownloadPolicy == DownloadAllow {
			return decision{granted: true, by: "policy"}, nil
		}
		return decision{by: "policy", why: "this client cannot ask its user for permission (it does not support MCP form elicitation), and the server's download policy refuses downloads without it. Ask the user to download the file themselves, or to run scimcp with --download-policy allow"}, nil
	}
	if modern && round != nil {
		round.input = server.NewInputRequestBuilder("").Elicit(permissionInput, params).ToolResult()
		return decision{}, errNeedsInput
	}
	actx, cancel := context.WithTimeout(ctx, PermissionTimeout)
	defer cancel()
	res, err := s.mcp.RequestElicitation(actx, mcp.ElicitationRequest{Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}, Params: params})
	switch {
	case ctx.Err() != nil:
		return decision{}, ctx.Err()
	case actx.Err() != nil:
		return decision{by: "user", why: fmt.Sprintf("the user did not answer the permission request within %s", PermissionTimeout)}, nil
	case err != nil:
		return decision{by: "user", why: fmt.Sprintf("the client could not ask its user for permission (%v)", err)}, nil
	}
	return answer(res), nil
}

func answer(res *mcp.ElicitationResult) decision {
	switch res.Action {
	case mcp.ElicitationResponseActionAccept:
		if m, ok := res.Content.(map[string]any); ok {
			if allow, ok := m["allow"].(bool); ok && !allow {
				return decision{by: "user", why: "the user did not allow the download"}
			}
		}
		return decision{granted: true, by: "user"}
	case mcp.ElicitationResponseActionDecline:
		return decision{by: "user", why: "the user declined the download"}
	}
	return decision{by: "user", why: "the user dismissed the permission request without allowing the download"}
}

func (s *Server) artifactDownload() toolkit.Tool {
	return toolkit.Define(toolkit.Spec{
		Name:  "artifact_download",
		Title: "Download a file an MCP source offered",
		Description: "Downloads one file that an earlier mcp__<source>__<tool> result offered (its text lists the candidates c1, c2, ... with the mcpInvocationId): a resource link, an embedded resource, or an http(s) URL in its structured content. " +
			"Asks the user for permission, waits until the download has ended, writes the file into the workspace (default downloads/<name>; never overwrites), records its provenance and registers it as a Project Artifact. " +
			"It never parses the file: to read a PDF, call paper_extract_pdf with the returned artifactJobId in a later turn.",
		Group:     GroupSources,
		OpenWorld: true,
		Input: func(sc *jsonschema.Schema) {
			sc.Properties["mcpInvocationId"].MinLength = jsonschema.Ptr(1)
			sc.Properties["candidateId"].MinLength = jsonschema.Ptr(1)
		},
	}, s.downloadHandler)
}

// downloadHandler is artifact_download: resolve the candidate, ask, download,
// report.
func (s *Server) downloadHandler(ctx context.Context, in ArtifactDownloadIn) (toolkit.Result[ArtifactDownloadOut], error) {
	c := toolkit.CallerFrom(ctx)
	inv, cand, err := s.candidate(c.Owner, in.MCPInvocationID, in.CandidateID)
	if err != nil {
		return toolkit.Result[ArtifactDownloadOut]{}, err
	}
	svc := s.opts.Downloads
	if err := svc.CheckDestination(in.DestinationPath); err != nil {
		return toolkit.Result[ArtifactDownloadOut]{}, err
	}
	d, err := s.askPermission(ctx, permissionMessage(inv, cand, in.DestinationPath))
	if err != nil {
		return toolkit.Result[ArtifactDownloadOut]{}, err
	}
	req := downloads.Request{Owner: c.Owner, Session: c.Session, InvocationID: inv.ID, Source: inv.Source, Tool: inv.Tool,
		Candidate: cand, Result: inv.Result, Destination: in.DestinationPath, Permission: d.by}
	if src := s.source(inv.Source); src != nil {
		req.ReadResource = func(ctx context.Context, uri string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(ctx, ResourceReadTimeout)
			defer cancel()
			raw, err := src.ReadResource(ctx, uri)
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("the source did not answer resources/read within %s", ResourceReadTimeout)
			}
			return raw, err
		}
	}
	if c.Progress != nil {
		req.Progress = func(received, total int64) {
			c.Progress(float64(received), float64(total), fmt.Sprintf("%s: %d bytes received", cand.ID, received))
		}
	}
	var job downloads.Job
	if d.granted {
		job, err = svc.Download(ctx, req)
	} else {
		job, err = svc.Decline(req, d.why)
	}
	if err != nil {
		return toolkit.Result[ArtifactDownloadOut]{}, err
	}
	return downloadResult(job)
}

// candidate finds an invocation of owner and one of its result's download
// candidates, or says what the model can use instead.
func (s *Server) candidate(owner, invocationID, candidateID string) (sources.Invocation, downloads.Candidate, error) {
	inv, ok, err := s.invocations.Get(owner, invocationID)
	switch {
	case err != nil:
		return inv, downloads.Candidate{}, err
	case !ok:
		return inv, downloads.Candidate{}, toolkit.Errorf("no MCP invocation %q in this session; use the mcpInvocationId that an mcp__<source>__<tool> result of this session named", invocationID)
	case inv.Outcome != "ok" || len(inv.Result) == 0:
		return inv, downloads.Candidate{}, toolkit.Errorf("invocation %s (%s of source %s) did not succeed (%s), so it offered nothing to download", inv.ID, inv.Tool, inv.Source, inv.Outcome)
	}
	cands, _ := downloads.Candidates(inv.Result)
	var ids []string
	for _, cd := range cands {
		if cd.ID == strings.TrimSpace(candidateID) {
			return inv, cd, nil
		}
		ids = append(ids, cd.ID)
	}
	if len(ids) == 0 {
		return inv, downloads.Candidate{}, toolkit.Errorf("invocation %s offered nothing to download (no resource links, embedded resources or URLs in its result)", inv.ID)
	}
	return inv, downloads.Candidate{}, toolkit.Errorf("invocation %s has no candidate %q; its candidates are %s", inv.ID, candidateID, strings.Join(ids, ", "))
}

// permissionMessage is what the user is asked. The name and URI come from
// the source: they are quoted and clipped, never the message's own words.
func permissionMessage(inv sources.Invocation, cand downloads.Candidate, dest string) string {
	if dest == "" {
		dest = downloads.DefaultDir + "/"
	}
	what := fmt.Sprintf("%q", clipUntrusted(cand.URI))
	if cand.Name != "" && !strings.HasSuffix(cand.URI, cand.Name) {
		what = fmt.Sprintf("%q (%s)", clipUntrusted(cand.Name), what)
	}
	size := "size unknown"
	if cand.Size > 0 {
		size = fmt.Sprintf("%d bytes", cand.Size)
	}
	return fmt.Sprintf("The model asks to download %s, offered by MCP source %q (tool %q), %s, into the workspace at %s and register it as a Project Artifact. The content is external and untrusted.",
		what, inv.Source, inv.Tool, size, dest)
}

// downloadResult tells the model how a job ended and what it can do next.
func downloadResult(job downloads.Job) (toolkit.Result[ArtifactDownloadOut], error) {
	switch job.State {
	case downloads.StateCompleted:
		out := ArtifactDownloadOut{ArtifactJobID: job.ID, State: job.State, Permission: job.Permission, Candidate: job.Candidate, Path: job.Path,
			Bytes: job.Bytes, SHA256: job.SHA256, MediaType: job.MediaType, FinalURL: job.FinalURL, RevisionID: job.RevisionID,
			ArtifactID: job.ArtifactID, ArtifactName: job.ArtifactName, ArtifactVersion: job.ArtifactVersion}
		text := fmt.Sprintf("Downloaded %s (%d bytes, %s, sha256 %s) to %s; registered as artifact %q version %d (%s). Job %s.",
			job.Candidate.ID, job.Bytes, job.MediaType, job.SHA256, job.Path, job.ArtifactName, job.ArtifactVersion, job.ArtifactID, job.ID)
		if job.MediaType == "application/pdf" {
			text += fmt.Sprintf(" To read it, call paper_extract_pdf {\"artifactJobId\":%q} in your next turn.", job.ID)
		}
		return toolkit.Result[ArtifactDownloadOut]{Text: text, Data: out}, nil
	case downloads.StateDeclined:
		return toolkit.Result[ArtifactDownloadOut]{}, toolkit.Errorf("Not downloaded: %s. Job %s is recorded as declined; do not retry unless the user asks", job.Error, job.ID)
	case downloads.StateCancelled:
		return toolkit.Result[ArtifactDownloadOut]{}, toolkit.Errorf("The download was cancelled: %s (job %s)", job.Error, job.ID)
	}
	if job.Path != "" {
		// Written, but not registered: the file stays, with its provenance.
		return toolkit.Result[ArtifactDownloadOut]{}, toolkit.Errorf("The download failed: %s (job %s). The file is at %s with its provenance; declare it with declare_artifact once the cause is fixed", job.Error, job.ID, job.Path)
	}
	return toolkit.Result[ArtifactDownloadOut]{}, toolkit.Errorf("The download failed: %s (job %s). Nothing was written to the workspace", job.Error, job.ID)
}

// source returns the configured source named name.
func (s *Server) source(name string) *sources.Source {
	for _, src := range s.sources {
		if src.Name() == name {
			return src
		}
	}
	return nil
}

// candidatesNote lists a result's download candidates for the model.
func candidatesNote(cands []downloads.Candidate, more int, invID string) string {
	if len(cands) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Downloadable with artifact_download {\"mcpInvocationId\":%q,\"candidateId\":…}:", invID)
	for _, c := range cands {
		fmt.Fprintf(&b, "\n- %s: %s %s", c.ID, strings.ReplaceAll(c.Kind, "_", " "), c.URI)
		var attrs []string
		if c.Name != "" && !strings.HasSuffix(c.URI, c.Name) {
			attrs = append(attrs, fmt.Sprintf("%q", c.Name))
		}
		if c.MediaType != "" {
			attrs = append(attrs, c.MediaType)
		}
		if c.Size > 0 {
			attrs = append(attrs, fmt.Sprintf("%d bytes", c.Size))
		}
		if len(attrs) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(attrs, ", "))
		}
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n(and %d more not listed)", more)
	}
	return b.String()
}

// formElicitation reports whether declared elicitation capabilities include
// form mode (an empty object means form, as before modes existed).
func formElicitation(ec *mcp.ElicitationCapability) bool {
	return ec != nil && (ec.Form != nil || ec.URL == nil)
}

// clipUntrusted shortens text from a source for a permission message and
// drops control characters.
func clipUntrusted(s string) string {
	return clipUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s), maxUntrustedShown)
}

// maxUntrustedShown bounds a source's text quoted in a permission message.
const maxUntrustedShown = 200
