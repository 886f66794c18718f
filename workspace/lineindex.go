package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	// indexStep is the distance, in lines, between two remembered line
	// starts. A page at any offset costs at most indexStep lines of scanning
	// once the index reaches it.
	indexStep = 256
	// fullIndexBytes: files up to this size are counted to the end on first
	// read, so every page can state the total line count. Larger files are
	// indexed as far as reads reach.
	fullIndexBytes = 256 << 20
	scanChunk      = 256 << 10
)

// LineIndex remembers where every indexStep-th line of some content starts,
// so a page far into a large file does not re-scan everything before it. It
// grows lazily as far as reads go and is safe for concurrent use. An index
// belongs to one version of the content: callers drop it when the content
// changes (see indexCache).
type LineIndex struct {
	mu       sync.Mutex
	size     int64
	marks    []int64 // marks[k] = byte offset where line k*indexStep starts
	scanned  int64   // bytes [0, scanned) have been counted
	newlines int     // newlines in [0, scanned)
	// endsWithNewline is set once the scan reaches the end.
	endsWithNewline bool
}

// NewLineIndex returns an empty index for content of the given size.
func NewLineIndex(size int64) *LineIndex {
	return &LineIndex{size: size, marks: []int64{0}}
}

// Total returns the number of lines, or -1 while the index has not reached
// the end of the content. A final line without a newline counts as a line.
func (x *LineIndex) Total() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.totalLocked()
}

func (x *LineIndex) totalLocked() int {
	if x.scanned < x.size {
		return -1
	}
	return x.newlines + x.partialLocked()
}

// partialLocked is 1 when the content ends with a line that has no newline.
func (x *LineIndex) partialLocked() int {
	if x.size == 0 {
		return 0
	}
	if x.endsWithNewline {
		return 0
	}
	return 1
}

// extendTo scans until the start of line `line` is known or the content ends;
// line < 0 scans to the end.
func (x *LineIndex) extendTo(r io.ReaderAt, line int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.scanned >= x.size || (line >= 0 && x.newlines >= line) {
		return nil
	}
	buf := make([]byte, scanChunk)
	for x.scanned < x.size && (line < 0 || x.newlines < line) {
		want := min(int64(len(buf)), x.size-x.scanned)
		n, err := r.ReadAt(buf[:want], x.scanned)
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				// The content shrank under us: index what exists.
				x.size = x.scanned
				break
			}
			return fmt.Errorf("index lines at %d: %w", x.scanned, err)
		}
		chunk := buf[:n]
		base := x.scanned
		for i := 0; ; {
			j := bytes.IndexByte(chunk[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			x.newlines++
			if x.newlines%indexStep == 0 {
				x.marks = append(x.marks, base+int64(i))
			}
		}
		x.scanned += int64(n)
		if x.scanned == x.size && n > 0 {
			x.endsWithNewline = chunk[n-1] == '\n'
		}
	}
	return nil
}

// lineStart returns the byte offset where line `line` starts and whether the
// line exists. extendTo(line) must have run first.
func (x *LineIndex) lineStart(r io.ReaderAt, line int) (int64, bool, error) {
	x.mu.Lock()
	k := line / indexStep
	if k >= len(x.marks) {
		x.mu.Unlock()
		return 0, false, nil
	}
	pos := x.marks[k]
	size := x.size
	total := x.totalLocked()
	x.mu.Unlock()
	if total >= 0 && line >= total {
		return 0, false, nil
	}
	skip := line - k*indexStep
	if skip == 0 {
		return pos, pos < size, nil
	}
	buf := make([]byte, 64*1024)
	for pos < size {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		chunk := buf[:n]
		for i := 0; ; {
			j := bytes.IndexByte(chunk[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			skip--
			if skip == 0 {
				start := pos + int64(i)
				return start, start < size, nil
			}
		}
		pos += int64(n)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("find line %d: %w", line, err)
		}
		if n == 0 {
			break
		}
	}
	return 0, false, nil
}
