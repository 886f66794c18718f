package toolkit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sciencediscovery/scimcp/runner"
	"github.com/sciencediscovery/scimcp/workspace"
	"github.com/sciencediscovery/scimcp/workspace/downloads"
)

// GroupPapers holds paper_extract_pdf; it is on where poppler is installed.
const GroupPapers Group = "papers"

// Extraction bounds.
const (
	MaxExtractBytes = 8 << 20
	extractTimeout  = 2 * time.Minute
)

// PaperExtractIn are paper_extract_pdf's arguments.
type PaperExtractIn struct {
	ArtifactJobID string `json:"artifactJobId,omitempty" jsonschema:"a completed artifact_download job whose file is a PDF"`
	Path          string `json:"path,omitempty" jsonschema:"the workspace path of a PDF (an upload, or a file a command wrote)"`
}

// PaperExtractOut is paper_extract_pdf's structured result. The text itself
// is in the result's text content (large texts are stored and previewed).
type PaperExtractOut struct {
	Path      string            `json:"path"`
	Pages     int               `json:"pages"`
	Metadata  map[string]string `json:"metadata,omitempty" jsonschema:"the PDF's document information (Title, Author, Creator, Producer, dates)"`
	TextBytes int               `json:"text_bytes"`
	Truncated bool              `json:"truncated" jsonschema:"true when the text passed 8 MiB and the rest was dropped"`
	Extractor string            `json:"extractor"`
}

func paperExtract(ws *workspace.Workspace, r runner.Runner, dl *downloads.Service) Tool {
	return Define(Spec{
		Name:  "paper_extract_pdf",
		Title: "Extract the text of a PDF",
		Description: "Extracts the text of a PDF with poppler's pdftotext -layout, run in the sandbox, with page markers, the page count and the document metadata. " +
			"Give exactly one of path (a PDF in the workspace, such as an upload) or artifactJobId (a completed artifact_download). Long texts are stored and shown as a preview with a ref for read_tool_output. " +
			"Download and extraction are separate calls: call this in a later turn than artifact_download.",
		Group:      GroupPapers,
		ReadOnly:   true,
		Idempotent: true,
	}, func(ctx context.Context, in PaperExtractIn) (Result[PaperExtractOut], error) {
		if (in.Path == "") == (in.ArtifactJobID == "") {
			return Result[PaperExtractOut]{}, Errorf("give exactly one of path (a PDF in the workspace) or artifactJobId (a completed artifact_download)")
		}
		p := in.Path
		if in.ArtifactJobID != "" {
			var err error
			if p, err = downloadedFile(ctx, ws, dl, in.ArtifactJobID); err != nil {
				return Result[PaperExtractOut]{}, err
			}
		}
		info, err := ws.ReadFile(p, 0, 1)
		if err != nil {
			return Result[PaperExtractOut]{}, err
		}
		if info.MediaType != "application/pdf" {
			return Result[PaperExtractOut]{}, Errorf("%s is not a PDF (its content is %s)", info.Path, info.MediaType)
		}
		inside := workspace.SandboxDir + "/" + info.Path
		out := PaperExtractOut{Path: info.Path, Extractor: "pdftotext -layout (poppler)", Metadata: map[string]string{}}

		meta, err := runner.Capture(ctx, r, []string{"pdfinfo", "-enc", "UTF-8", inside}, 64<<10, extractTimeout)
		if err != nil {
			return Result[PaperExtractOut]{}, err
		}
		if missing(meta) {
			return Result[PaperExtractOut]{}, Errorf("poppler is not installed on the server; install it with `apt-get install -y poppler-utils`")
		}
		if meta.Exit.Code != 0 {
			return Result[PaperExtractOut]{}, Errorf("%s could not be read as a PDF: %s", info.Path, strings.TrimSpace(string(meta.Stderr)))
		}
		sc := bufio.NewScanner(bytes.NewReader(meta.Stdout))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if k == "Pages" {
				out.Pages, _ = strconv.Atoi(v)
			}
			switch k {
			case "Title", "Subject", "Keywords", "Author", "Creator", "Producer", "CreationDate", "ModDate", "Pages", "PDF version":
				if v != "" {
					out.Metadata[k] = v
				}
			}
		}
		txt, err := runner.Capture(ctx, r, []string{"pdftotext", "-layout", "-enc", "UTF-8", inside, "-"}, MaxExtractBytes, extractTimeout)
		if err != nil {
			return Result[PaperExtractOut]{}, err
		}
		if txt.Exit.Err != nil || txt.Exit.Code != 0 {
			why := strings.TrimSpace(string(txt.Stderr))
			if txt.Exit.Err != nil {
				why = txt.Exit.Err.Error()
			}
			return Result[PaperExtractOut]{}, Errorf("extracting %s failed: %s", info.Path, why)
		}
		text := strings.ToValidUTF8(string(txt.Stdout), "\uFFFD")
		if txt.Truncated {
			// Do not end in the middle of a character.
			for len(text) > 0 && !utf8.ValidString(text[len(text)-1:]) {
				text = text[:len(text)-1]
			}
		}
		pages := strings.Split(strings.TrimSuffix(text, "\f"), "\f")
		if out.Pages == 0 {
			out.Pages = len(pages)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d page(s)", info.Path, out.Pages)
		if t := out.Metadata["Title"]; t != "" {
			fmt.Fprintf(&b, ", title %q", t)
		}
		if a := out.Metadata["Author"]; a != "" {
			fmt.Fprintf(&b, ", by %s", a)
		}
		b.WriteString(". Extracted with pdftotext -layout.\n")
		for i, p := range pages {
			fmt.Fprintf(&b, "\n=== page %d of %d ===\n%s", i+1, out.Pages, strings.TrimRight(p, "\n"))
			b.WriteByte('\n')
		}
		if txt.Truncated {
			fmt.Fprintf(&b, "\n[the text passed %d bytes; the rest was not extracted]\n", MaxExtractBytes)
		}
		out.TextBytes, out.Truncated = len(text), txt.Truncated
		return Result[PaperExtractOut]{Text: b.String(), Data: out}, nil
	})
}

// downloadedFile returns the workspace path of a completed
// artifact_download job, after checking that the file still holds what was
// downloaded.
func downloadedFile(ctx context.Context, ws *workspace.Workspace, dl *downloads.Service, id string) (string, error) {
	if dl == nil {
		return "", Errorf("this server has no artifact downloads (no MCP source is configured); pass the path of the PDF in the workspace instead")
	}
	job, ok, err := dl.Job(CallerFrom(ctx).Owner, id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", Errorf("no artifact_download job %q in this session; use the artifactJobId an artifact_download result of this session returned, or pass a workspace path", id)
	}
	switch job.State {
	case downloads.StateCompleted:
	case downloads.StateDownloading:
		return "", Errorf("artifact_download job %s has not finished; call paper_extract_pdf again in a later turn", id)
	case downloads.StateDeclined:
		return "", Errorf("artifact_download job %s was declined (%s); there is no file to extract", id, job.Error)
	default:
		return "", Errorf("artifact_download job %s ended %s (%s); there is no file to extract. Call artifact_download again to retry", id, job.State, job.Error)
	}
	f, err := ws.Root().Open(job.Path)
	if err != nil {
		return "", Errorf("the file job %s downloaded to %s is gone; its content is kept as artifact %q version %d (read_artifact), or download it again", id, job.Path, job.ArtifactName, job.ArtifactVersion)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	if hex.EncodeToString(h.Sum(nil)) != job.SHA256 {
		return "", Errorf("%s has changed since job %s downloaded it; pass path %q to extract what it holds now, or download it again", job.Path, id, job.Path)
	}
	return job.Path, nil
}

// missing reports that the command was not found in the sandbox.
func missing(c runner.Captured) bool {
	return c.Exit.Code == 127 || strings.Contains(string(c.Stderr), "No such file or directory") && strings.Contains(string(c.Stderr), "execvp")
}
