package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Create writes a new workspace file at p with the bytes fill writes, and
// returns its workspace-relative path and size. It never replaces a file:
// when p exists the call fails with CodeExists and nothing is changed. The
// content goes to a temporary file in the destination folder first, is
// synced, and is then linked into place, so a reader (or a crash) sees the
// whole file or none of it. Folders on the way are created. All access is
// through os.Root: a parent that is a symbolic link out of the workspace is
// refused like any other escape.
func (w *Workspace) Create(p string, fill func(io.Writer) error) (rel string, size int64, err error) {
	rel, err = w.Clean(p)
	if err != nil {
		return "", 0, err
	}
	if rel == "." {
		return "", 0, errorf(CodeIsDirectory, nil, "%q is the workspace folder itself; give a file path such as \"downloads/paper.pdf\"", p)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return rel, 0, w.mapWriteError(p, err)
		}
	}
	if _, err := w.root.Lstat(rel); err == nil {
		return rel, 0, errorf(CodeExists, nil, "%q already exists in the workspace; nothing was overwritten. Give another path", p)
	}
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".scimcp-"+randomSuffix()+".tmp")
	if len(path.Base(tmp)) > 255 {
		tmp = path.Join(path.Dir(rel), ".scimcp-"+randomSuffix()+".tmp")
	}
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return rel, 0, w.mapWriteError(p, err)
	}
	defer w.root.Remove(tmp) // after the link (or a failure) the temporary name goes
	cw := &countWriter{w: f}
	err = fill(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rel, cw.n, err
	}
	if err := w.root.Link(tmp, rel); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return rel, 0, errorf(CodeExists, err, "%q was created by someone else while it was written; nothing was overwritten. Give another path", p)
		}
		return rel, 0, w.mapWriteError(p, err)
	}
	return rel, cw.n, nil
}

// Exists reports whether p names anything in the workspace (a file, a
// folder or a link).
func (w *Workspace) Exists(p string) (bool, error) {
	rel, err := w.Clean(p)
	if err != nil {
		return false, err
	}
	_, err = w.root.Lstat(rel)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	}
	return false, w.mapOpenError(p, err)
}

func (w *Workspace) mapWriteError(p string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return errorf(CodeNotFound, err, "%q cannot be created: one of its parents is a file, not a folder", p)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("writing %q: the disk is full: %w", p, err)
	case errors.Is(err, syscall.EROFS):
		return errorf(CodePermission, err, "%q cannot be written: the workspace is read-only", p)
	}
	return w.mapOpenError(p, err)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SafeName maps s to a name made only of ASCII letters, digits, '.', '-' and
// '_' (anything else becomes '_'), fit to be one path segment once it is
// not empty or dots only; callers choose what replaces those.
func SafeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
