package workspace

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// FileInfo describes a file without its content.
type FileInfo struct {
	Path      string // clean, relative to the workspace root
	Size      int64
	ModTime   time.Time
	MediaType string
	Binary    bool
	Mode      os.FileMode // set by Stat
}

// ReadResult is one page of a text file, or the description of a binary file.
type ReadResult struct {
	FileInfo
	Page Page // zero for binary files
}

// ReadFile reads one page of the workspace file at p (see ReadPage for offset
// and limit). Binary files return their media type and size only, never their
// bytes.
func (w *Workspace) ReadFile(p string, offset, limit int) (ReadResult, error) {
	f, rel, st, err := w.openRegular(p)
	if err != nil {
		return ReadResult{}, err
	}
	defer f.Close()
	head := make([]byte, min(st.Size(), SniffBytes))
	if _, err := io.ReadFull(f, head); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return ReadResult{}, fmt.Errorf("read %s: %w", rel, err)
	}
	mt, bin := Sniff(rel, head)
	res := ReadResult{FileInfo: FileInfo{Path: rel, Size: st.Size(), ModTime: st.ModTime(), MediaType: mt, Binary: bin}}
	if bin {
		return res, nil
	}
	idx := w.index.get(rel, st)
	res.Page, err = ReadPage(f, st.Size(), idx, offset, limit)
	return res, err
}

const defaultIndexCacheEntries = 256

// indexCache keeps the LineIndex of recently read files, keyed by path and
// invalidated when the file's identity, size or mtime changes.
type indexCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *indexEntry, most recent first
	byKey map[string]*list.Element
}

type indexEntry struct {
	path  string
	ino   uint64
	dev   uint64
	size  int64
	mtime time.Time
	idx   *LineIndex
}

func newIndexCache(max int) *indexCache {
	return &indexCache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *indexCache) get(path string, st os.FileInfo) *LineIndex {
	var ino, dev uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino, dev = sys.Ino, uint64(sys.Dev)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[path]; ok {
		e := el.Value.(*indexEntry)
		if e.ino == ino && e.dev == dev && e.size == st.Size() && e.mtime.Equal(st.ModTime()) {
			c.order.MoveToFront(el)
			return e.idx
		}
		c.order.Remove(el)
		delete(c.byKey, path)
	}
	e := &indexEntry{path: path, ino: ino, dev: dev, size: st.Size(), mtime: st.ModTime(), idx: NewLineIndex(st.Size())}
	c.byKey[path] = c.order.PushFront(e)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*indexEntry).path)
	}
	return e.idx
}

// Stat describes the regular workspace file at p, refusing what ReadFile
// refuses (paths outside, directories, FIFOs, symlinks that leave).
func (w *Workspace) Stat(p string) (FileInfo, error) {
	f, rel, st, err := w.openRegular(p)
	if err != nil {
		return FileInfo{}, err
	}
	f.Close()
	return FileInfo{Path: rel, Size: st.Size(), ModTime: st.ModTime(), Mode: st.Mode()}, nil
}
