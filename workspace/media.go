package workspace

import (
	"bytes"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

// SniffBytes is how much of a file's head decides whether it is text.
const SniffBytes = 8 * 1024

// textTypes names the media type of common text formats in scientific
// workspaces; the extension only names a file already judged to be text.
var textTypes = map[string]string{
	".txt": "text/plain", ".log": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".json": "application/json",
	".jsonl": "application/jsonl", ".ndjson": "application/x-ndjson", ".yaml": "application/yaml", ".yml": "application/yaml",
	".toml": "application/toml", ".xml": "application/xml", ".html": "text/html", ".htm": "text/html",
	".py": "text/x-python", ".r": "text/x-r", ".R": "text/x-r", ".rmd": "text/markdown", ".ipynb": "application/x-ipynb+json",
	".sh": "text/x-shellscript", ".go": "text/x-go", ".c": "text/x-c", ".h": "text/x-c", ".cpp": "text/x-c++",
	".js": "text/javascript", ".ts": "text/x-typescript", ".tex": "text/x-tex", ".bib": "text/x-bibtex",
	".fasta": "text/x-fasta", ".fa": "text/x-fasta", ".fastq": "text/x-fastq", ".pdb": "chemical/x-pdb",
	".sdf": "chemical/x-mdl-sdfile", ".mol": "chemical/x-mdl-molfile", ".svg": "image/svg+xml", ".css": "text/css",
}

// binaryTypes names binary formats by extension when content sniffing has
// nothing better than application/octet-stream.
var binaryTypes = map[string]string{
	".npy": "application/x-npy", ".npz": "application/zip", ".h5": "application/x-hdf5", ".hdf5": "application/x-hdf5",
	".parquet": "application/vnd.apache.parquet", ".pkl": "application/x-python-pickle", ".pt": "application/octet-stream",
	".rds": "application/x-r-data", ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document", ".sqlite": "application/vnd.sqlite3",
	".tif": "image/tiff", ".tiff": "image/tiff", ".fits": "application/fits",
}

// Sniff decides from a file's first bytes (up to SniffBytes) and its name
// whether the content is text, and names its media type. The content decides;
// the name only refines: a NUL byte, a known binary signature, or mostly
// invalid UTF-8 makes a file binary whatever it is called.
func Sniff(name string, head []byte) (mediaType string, binary bool) {
	if len(head) > SniffBytes {
		head = head[:SniffBytes]
	}
	ext := path.Ext(name)
	detected := http.DetectContentType(head)
	mt, _, _ := strings.Cut(detected, ";")
	if isBinaryContent(head, mt) {
		if mt == "application/octet-stream" || mt == "text/plain" {
			if t, ok := binaryTypes[strings.ToLower(ext)]; ok {
				return t, true
			}
			return "application/octet-stream", true
		}
		return mt, true
	}
	if t, ok := textTypes[ext]; ok {
		return t, false
	}
	if t, ok := textTypes[strings.ToLower(ext)]; ok {
		return t, false
	}
	if strings.HasPrefix(mt, "text/") && mt != "text/plain" {
		return mt, false
	}
	return "text/plain", false
}

func isBinaryContent(head []byte, detected string) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	switch {
	case strings.HasPrefix(detected, "image/") && detected != "image/svg+xml",
		strings.HasPrefix(detected, "audio/"), strings.HasPrefix(detected, "video/"),
		detected == "application/pdf", detected == "application/zip", detected == "application/x-gzip",
		detected == "application/wasm", detected == "application/vnd.ms-fontobject", strings.HasPrefix(detected, "font/"),
		detected == "application/x-rar-compressed", detected == "application/ogg":
		return true
	}
	if utf8.Valid(head) {
		return false
	}
	// Mostly-valid UTF-8 (a Latin-1 accent here and there, a sequence cut at
	// the sniff boundary) is text; mostly-invalid bytes are binary.
	bad := 0
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && n == 1 && len(head)-i >= utf8.UTFMax {
			bad++
		}
		i += n
	}
	return bad*10 > len(head)
}
