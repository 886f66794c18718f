package mcpserver

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/sciencediscovery/scimcp/toolkit"
)

// makePDF writes a minimal PDF with one line of text per page.
func makePDF(title string, pages ...string) []byte {
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}
	b.WriteString("%PDF-1.4\n")
	n := len(pages)
	kids := ""
	for i := range pages {
		kids += fmt.Sprintf("%d 0 R ", 4+2*i)
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids, n))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, text := range pages {
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i))
		stream := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
		obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
	}
	obj(fmt.Sprintf("<< /Title (%s) /Author (scimcp tests) >>", title))
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, len(offsets), xref)
	return b.Bytes()
}

func TestPaperExtractPDF(t *testing.T) {
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Fatal("poppler-utils is not installed (apt-get install -y poppler-utils); paper_extract_pdf must be tested")
	}
	e := newEnv(t, func(o *Options) { o.Groups = append(o.Groups, toolkit.GroupPapers) })
	e.write(t, "papers/binding.pdf", string(makePDF("Binding study", "Abstract: Kd = 4.2 nM for compound A.", "Methods: isothermal titration calorimetry.")))
	e.write(t, "notes.txt", "not a pdf")
	c := e.connect(t)
	res := call(t, c, "paper_extract_pdf", `{"path":"papers/binding.pdf"}`)
	var out toolkit.PaperExtractOut
	structured(t, res, &out)
	txt := text(res)
	if res.IsError || out.Pages != 2 || out.Metadata["Title"] != "Binding study" {
		t.Fatalf("extract: %s %+v", txt, out)
	}
	p1, p2 := strings.Index(txt, "=== page 1 of 2 ==="), strings.Index(txt, "=== page 2 of 2 ===")
	kd, methods := strings.Index(txt, "Kd = 4.2 nM"), strings.Index(txt, "isothermal titration")
	if p1 < 0 || p2 < 0 || !(p1 < kd && kd < p2 && p2 < methods) {
		t.Fatalf("page markers and text out of place:\n%s", txt)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"path":"notes.txt"}`, "not a PDF"},
		{`{}`, "exactly one of"},
		{`{"path":"a.pdf","artifactJobId":"j"}`, "exactly one of"},
		{`{"path":"../x.pdf"}`, "leaves the workspace"},
	} {
		if r := call(t, c, "paper_extract_pdf", tc.args); !r.IsError || !strings.Contains(text(r), tc.want) {
			t.Errorf("%s: %s", tc.args, text(r))
		}
	}
}
