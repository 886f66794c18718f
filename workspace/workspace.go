// Package workspace gives safe, paged access to the files of one workspace
// folder. Every path a caller names is resolved inside the folder through
// os.Root, so the operating system (openat2/RESOLVE_BENEATH semantics in the
// Go runtime), not string checks, keeps reads from leaving it: "..", absolute
// symlinks, symlinks that point out and symlinked parents are all refused.
//
// The package knows nothing about MCP. Refusals are *Error values whose text
// tells the caller what to do next.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// SandboxDir is where the workspace appears inside a sandboxed execution.
// Absolute paths under it are accepted as workspace paths, so a path printed by
// a command (`pwd`, a traceback) can be passed back to read_file unchanged.
const SandboxDir = "/workspace"

// MaxPathBytes bounds a path argument. Linux refuses longer paths anyway
// (PATH_MAX 4096); refusing early gives a clearer message.
const MaxPathBytes = 4096

// Workspace is one workspace folder opened for safe access. It is safe for use
// by many goroutines.
type Workspace struct {
	dir     string // absolute, symlinks resolved
	root    *os.Root
	dirFile *os.File // the workspace folder itself, for openat2
	index   *indexCache
}

// Open opens dir (which must exist and be a directory) as a workspace.
func Open(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace %q is not a directory", dir)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	w := &Workspace{dir: abs, root: root, index: newIndexCache(defaultIndexCacheEntries)}
	if f, err := root.Open("."); err == nil {
		w.dirFile = f
	}
	return w, nil
}

// Dir returns the absolute host path of the workspace.
func (w *Workspace) Dir() string { return w.dir }

// Root returns the os.Root through which all access goes. Other domain
// packages (provenance, artifacts) use it to read workspace files safely.
func (w *Workspace) Root() *os.Root { return w.root }

// Close releases the workspace's directory handle.
func (w *Workspace) Close() error {
	if w.dirFile != nil {
		w.dirFile.Close()
	}
	return w.root.Close()
}

// Clean turns a caller's path into a clean, slash-separated path relative to
// the workspace root ("." for the root itself). It accepts relative paths,
// absolute paths under the workspace's host folder, and absolute paths under
// SandboxDir. It refuses, with an *Error, empty paths, NUL bytes, invalid
// UTF-8, over-long paths, and paths that lexically leave the workspace. Clean
// does not touch the file system: symlinks are checked when the path is used.
func (w *Workspace) Clean(p string) (string, error) {
	switch {
	case p == "":
		return "", errorf(CodeInvalidPath, nil, "path is empty; give a path relative to the workspace root, such as \"data/results.csv\"")
	case strings.IndexByte(p, 0) >= 0:
		return "", errorf(CodeInvalidPath, nil, "path contains a NUL byte; remove it")
	case len(p) > MaxPathBytes:
		return "", errorf(CodeInvalidPath, nil, "path is %d bytes long; the limit is %d", len(p), MaxPathBytes)
	case !utf8.ValidString(p):
		return "", errorf(CodeInvalidPath, nil, "path is not valid UTF-8")
	}
	rel := p
	if strings.HasPrefix(p, "/") {
		cp := path.Clean(p)
		switch {
		case cp == w.dir || cp == SandboxDir:
			return ".", nil
		case strings.HasPrefix(cp, w.dir+"/"):
			rel = strings.TrimPrefix(cp, w.dir+"/")
		case strings.HasPrefix(cp, SandboxDir+"/"):
			rel = strings.TrimPrefix(cp, SandboxDir+"/")
		default:
			return "", errorf(CodeOutsideWorkspace, nil,
				"path %q is outside the workspace; scimcp only accesses files inside it. Use a path relative to the workspace root (absolute paths must start with %s or %s)",
				p, w.dir, SandboxDir)
		}
	}
	rel = path.Clean(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errorf(CodeOutsideWorkspace, nil,
			"path %q leaves the workspace through \"..\"; scimcp only accesses files inside it. Use a path relative to the workspace root", p)
	}
	return rel, nil
}

// openRegular opens a workspace file for reading and checks that it is a
// regular file. O_NONBLOCK keeps a FIFO from blocking the open; the type check
// then refuses it.
func (w *Workspace) openRegular(p string) (*os.File, string, os.FileInfo, error) {
	rel, err := w.Clean(p)
	if err != nil {
		return nil, "", nil, err
	}
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, rel, nil, w.mapOpenError(p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, rel, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	switch {
	case st.IsDir():
		f.Close()
		return nil, rel, nil, errorf(CodeIsDirectory, nil, "%q is a directory, not a file; call list_files to see what it contains", p)
	case !st.Mode().IsRegular():
		f.Close()
		return nil, rel, nil, errorf(CodeNotRegular, nil, "%q is not a regular file (%s); only regular files can be read", p, st.Mode().Type())
	}
	return f, rel, st, nil
}

// mapOpenError turns an os.Root error into an *Error the caller can act on.
func (w *Workspace) mapOpenError(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(CodeNotFound, err, "%q does not exist in the workspace; call list_files to see the files that do", p)
	case errors.Is(err, fs.ErrPermission):
		return errorf(CodePermission, err, "%q cannot be read: permission denied", p)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return errorf(CodeInvalidPath, err, "path %q is too long for the file system", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errorf(CodeNotFound, err, "%q does not exist: one of its parents is a file, not a directory", p)
	case errors.Is(err, syscall.ELOOP):
		return errorf(CodeOutsideWorkspace, err, "%q goes through too many symbolic links", p)
	case isEscape(err):
		return errorf(CodeOutsideWorkspace, err,
			"%q goes through a symbolic link that is absolute or leads out of the workspace; scimcp follows only relative links that stay inside it", p)
	}
	return fmt.Errorf("open %q: %w", p, err)
}

// isEscape recognises os.Root's refusal of a path that leaves the root. The
// runtime reports it as a *PathError wrapping an unexported error whose text is
// "path escapes from parent"; there is no exported sentinel in Go 1.26.
func isEscape(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return strings.Contains(pe.Err.Error(), "escapes")
	}
	return strings.Contains(err.Error(), "escapes from parent")
}
