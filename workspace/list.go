package workspace

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
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
		f, entries, err := w.readDir(dir)
		if err != nil {
			l.Unreadable = append(l.Unreadable, dir)
			continue
		}
		for _, de := range entries {
			p := de.name
			if dir != "." {
				p = dir + "/" + de.name
			}
			typ := de.typ
			var st syscall.Stat_t
			statted := false
			if typ == syscall.DT_UNKNOWN {
				s, err := lstatAt(f, de.name)
				if err != nil {
					continue // vanished
				}
				st, statted, typ = s, true, modeToDT(s.Mode)
			}
			if typ == syscall.DT_LNK {
				l.Symlinks++
				continue
			}
			visited++
			isDir := typ == syscall.DT_DIR
			if isDir {
				queue = append(queue, p)
			}
			if len(l.Entries) >= MaxListEntries {
				l.Omitted++
				continue
			}
			if !statted {
				s, err := lstatAt(f, de.name)
				if err != nil {
					continue // vanished between the listing and the stat
				}
				st = s
			}
			e := Entry{Path: p, Dir: isDir, ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec)}
			if !isDir {
				e.Size = st.Size
			}
			l.Entries = append(l.Entries, e)
		}
		f.Close()
	}
	return l, nil
}

func modeToDT(mode uint32) uint8 {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return syscall.DT_DIR
	case syscall.S_IFLNK:
		return syscall.DT_LNK
	case syscall.S_IFREG:
		return syscall.DT_REG
	}
	return syscall.DT_UNKNOWN
}

// readDir opens a workspace folder and lists it sorted by name; the caller
// closes the returned handle.
func (w *Workspace) readDir(dir string) (*os.File, []dirent, error) {
	f, err := w.openDirBeneath(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, err := readDirents(f)
	if err != nil && len(entries) == 0 {
		f.Close()
		return nil, nil, err
	}
	slices.SortFunc(entries, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return f, entries, nil
}
