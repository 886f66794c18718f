package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The fixtures are generated, never downloaded: the same Shape always gives
// byte-identical files, so every server reads the same data and a returned
// line can be checked against what it must be.

// LineBytes is the width of every line of the numbered text files, newline
// included: "line 0000001 " (13 bytes), 50 filler letters, "\n".
const LineBytes = 64

const (
	linePrefixLen = 13 // "line 0000001 "
	fillerLen     = LineBytes - linePrefixLen - 1
)

// Shape is the size of a fixture set.
type Shape struct {
	TreeGroups int // tree/gNN folders
	TreeSubs   int // tree/gNN/sNN folders in each group
	TreeFiles  int // files in each tree/gNN/sNN folder
	FlatFiles  int // files in flat/, a single folder
	BigLines   int // lines of big.txt
	SmallLines int // lines of small.txt
}

// FullShape is what the benchmark uses: a 5,000-file nested tree
// (10 × 10 × 50), a 500-entry flat folder, a 50 MiB file of 819,200 numbered
// 64-byte lines, and a 100-line file for the many-reads scenarios.
var FullShape = Shape{TreeGroups: 10, TreeSubs: 10, TreeFiles: 50, FlatFiles: 500, BigLines: 819_200, SmallLines: 100}

// Fixtures names the generated files.
type Fixtures struct {
	Root  string // the workspace folder
	Tree  string // Root/tree
	Flat  string // Root/flat
	Big   string // Root/big.txt
	Small string // Root/small.txt
	Shape Shape
}

// TreeFileCount is the number of files in tree/.
func (s Shape) TreeFileCount() int { return s.TreeGroups * s.TreeSubs * s.TreeFiles }

// Line returns line n (1-based) of a numbered file, newline included. Its
// filler is derived from n alone, so a page can be checked without the file.
func Line(n int) []byte {
	b := make([]byte, 0, LineBytes)
	return appendLine(b, n)
}

func appendLine(b []byte, n int) []byte {
	b = append(b, "line "...)
	var num [7]byte
	v := n
	for i := 6; i >= 0; i-- {
		num[i] = byte('0' + v%10)
		v /= 10
	}
	b = append(b, num[:]...)
	b = append(b, ' ')
	x := uint32(n)*2654435761 + 0x9e3779b9
	for i := 0; i < fillerLen; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b = append(b, byte('a'+x%26))
	}
	return append(b, '\n')
}

// MakeFixtures (re)creates the fixture set under dir/fixtures and returns it.
// Anything already there is removed first.
func MakeFixtures(dir string, s Shape) (*Fixtures, error) {
	root, err := filepath.Abs(filepath.Join(dir, "fixtures"))
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	f := &Fixtures{
		Root: root, Tree: filepath.Join(root, "tree"), Flat: filepath.Join(root, "flat"),
		Big: filepath.Join(root, "big.txt"), Small: filepath.Join(root, "small.txt"), Shape: s,
	}
	for g := 0; g < s.TreeGroups; g++ {
		for sub := 0; sub < s.TreeSubs; sub++ {
			d := filepath.Join(f.Tree, fmt.Sprintf("g%02d", g), fmt.Sprintf("s%02d", sub))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
			for i := 0; i < s.TreeFiles; i++ {
				rel := fmt.Sprintf("tree/g%02d/s%02d/f%03d.txt", g, sub, i)
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.txt", i)), []byte(rel+"\n"), 0o644); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := os.MkdirAll(f.Flat, 0o755); err != nil {
		return nil, err
	}
	for i := 0; i < s.FlatFiles; i++ {
		rel := fmt.Sprintf("flat/f%03d.txt", i)
		if err := os.WriteFile(filepath.Join(f.Flat, fmt.Sprintf("f%03d.txt", i)), []byte(rel+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	if err := writeNumbered(f.Big, s.BigLines); err != nil {
		return nil, err
	}
	if err := writeNumbered(f.Small, s.SmallLines); err != nil {
		return nil, err
	}
	return f, nil
}

func writeNumbered(path string, lines int) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(fh, 1<<20)
	buf := make([]byte, 0, LineBytes)
	for n := 1; n <= lines; n++ {
		buf = appendLine(buf[:0], n)
		if _, err := w.Write(buf); err != nil {
			fh.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// PageCheck is what a returned page must hold: lines First, First+1, … of a
// numbered file, exactly Lines of them (0: at least one). Take "head" or
// "tail" checks only the first or last Lines numbered lines of a longer text
// (for a server that can only return a file's head or tail).
type PageCheck struct {
	First int    `json:"first_line"`
	Lines int    `json:"lines,omitempty"`
	Take  string `json:"take,omitempty"`
}

// CheckPage reports whether text holds the expected page. Lines of text that
// are not numbered fixture lines (headers, footers a server adds) are
// ignored; numbered lines must be consecutive, start at c.First and match
// their expected content byte for byte. It returns "" when the page is right
// and otherwise says what is wrong.
func CheckPage(text string, c PageCheck) string {
	var got []string
	for len(text) > 0 {
		l := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		l = strings.TrimSuffix(l, "\r")
		if len(l) == LineBytes-1 && strings.HasPrefix(l, "line ") && l[linePrefixLen-1] == ' ' {
			got = append(got, l)
		}
	}
	if len(got) == 0 {
		return "no numbered lines in the result"
	}
	switch {
	case c.Lines > 0 && len(got) < c.Lines:
		return fmt.Sprintf("%d numbered lines, want %d", len(got), c.Lines)
	case c.Lines > 0 && c.Take == "head":
		got = got[:c.Lines]
	case c.Lines > 0 && c.Take == "tail":
		got = got[len(got)-c.Lines:]
	case c.Lines > 0 && len(got) > c.Lines:
		return fmt.Sprintf("%d numbered lines, want %d", len(got), c.Lines)
	}
	for i, l := range got {
		want := c.First + i
		if n, err := strconv.Atoi(l[5:12]); err != nil || n != want {
			return fmt.Sprintf("numbered line %d is %q, want line %d", i+1, l[:12], want)
		}
		if !bytes.Equal([]byte(l), Line(want)[:LineBytes-1]) {
			return fmt.Sprintf("line %d has the wrong content: %q", want, l)
		}
	}
	return ""
}
