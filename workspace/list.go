package workspace

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// MaxListEntries is the seed's cap on list_files: "at most 500".
const MaxListEntries = 500

// maxListVisit bounds how many entries a listing walks in all, so a huge tree
// (a dataset, a node_modules) cannot make list_files hang. Past it, the count
// of omitted entries is a lower bound and says so.
const maxListVisit = 200_000

// Entry is one listed path.
type Entry struct {
	Path    string // relative to the workspace root, slash-separated
	Dir     bool
	Size    int64
	ModTime time.Time
}

// Listing is the result of List.
type Listing struct {
	Entries []Entry
	// Omitted counts entries past MaxListEntries that were found but not
	// returned. When OmittedExact is false the walk stopped early (visit cap or
	// deadline) and Omitted is a lower bound.
	Omitted      int
	OmittedExact bool
	// Symlinks counts symbolic links skipped (they are never followed).
	Symlinks int
	// Unreadable names directories whose contents could not be read.
	Unreadable []string
}

// List walks the workspace breadth-first: every entry at depth 1 (sorted by
// name), then depth 2, and so on, so a capped listing still shows the shape of
// the whole tree. It returns at most MaxListEntries entries (files and
// directories), skips symbolic links without following them, and counts what
// it left out. ctx bounds the walk; on expiry the listing is returned with an
// inexact count.
func (w *Workspace) List(ctx context.Context) (Listing, error) {
	var l Listing
	l.OmittedExact = true
	queue := []string{"."}
	visited := 0
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if ctx.Err() != nil || visited >= maxListVisit {
			l.OmittedExact = false
			break
		}
		entries, err := w.readDir(dir)
		if err != nil {
			l.Unreadable = append(l.Unreadable, dir)
			continue
		}
		for _, de := range entries {
			p := de.Name()
			if dir != "." {
				p = dir + "/" + de.Name()
			}
			if de.Type()&fs.ModeSymlink != 0 {
				l.Symlinks++
				continue
			}
			visited++
			if de.IsDir() {
				queue = append(queue, p)
			}
			if len(l.Entries) >= MaxListEntries {
				l.Omitted++
				continue
			}
			e := Entry{Path: p, Dir: de.IsDir()}
			if info, err := de.Info(); err == nil {
				e.ModTime = info.ModTime()
				if !e.Dir {
					e.Size = info.Size()
				}
			}
			l.Entries = append(l.Entries, e)
		}
	}
	return l, nil
}

func (w *Workspace) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := w.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil && len(entries) == 0 && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}
