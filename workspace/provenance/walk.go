package provenance

import (
	"context"
	"errors"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stat is what the index keeps of a file to tell whether it changed without
// reading it. ctime is part of it: a rewrite that keeps the size and puts the
// mtime back (touch -d, cp -p, tar) still moves ctime, which user space
// cannot set.
type stat struct {
	size         int64
	mtime, ctime int64 // Unix ns
	ino, dev     uint64
}

func statOf(st *unix.Stat_t) stat {
	return stat{
		size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
		ino: st.Ino, dev: st.Dev,
	}
}

// walker lists the regular files beneath the workspace folder with
// getdents64 and one fstatat per file, opening each folder with openat2
// (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) relative to the workspace's own
// handle. Symbolic links are skipped, never followed; so are FIFOs, sockets
// and devices. Folders are listed by a few workers in parallel: on a large
// tree the cost is one stat system call per file.
type walker struct {
	root     *os.File // the workspace folder
	fallback func(rel string) (*os.File, error)
	exclude  map[string]bool // relative folders not to enter
	max      int             // stop after this many files
}

type walkResult struct {
	files      int
	dirs       int
	symlinks   int
	truncated  bool     // stopped at max files or by ctx
	unreadable []string // folders that could not be listed
}

// visitFunc receives each regular file: its workspace-relative path (valid
// only during the call) and its stat. It is called from several goroutines.
type visitFunc func(rel []byte, st stat)

// openat2Works is cleared the first time the kernel refuses openat2.
var openat2Works atomic.Bool

func init() { openat2Works.Store(true) }

func (w *walker) openDir(rel string) (*os.File, error) {
	if openat2Works.Load() {
		how := &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := unix.Openat2(int(w.root.Fd()), rel, how)
		if err == nil {
			return os.NewFile(uintptr(fd), rel), nil
		}
		if err != unix.ENOSYS && err != unix.EPERM {
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
		openat2Works.Store(false)
	}
	return w.fallback(rel)
}

// walkWorkers is how many folders are listed at once.
func walkWorkers() int { return min(runtime.GOMAXPROCS(0), maxWalkWorkers) }

// walk visits every regular file.
func (w *walker) walk(ctx context.Context, visit visitFunc) walkResult {
	q := &dirQueue{dirs: []string{"."}}
	q.cond = sync.NewCond(&q.mu)
	var files atomic.Int64
	var truncated atomic.Bool
	results := make([]walkResult, walkWorkers())
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(res *walkResult) {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			var path []byte
			for {
				dir, ok := q.pop()
				if !ok {
					return
				}
				var subdirs []string
				if ctx.Err() != nil || truncated.Load() {
					truncated.Store(true)
				} else {
					subdirs, path = w.listDir(dir, buf, path, res, visit, &files, &truncated)
				}
				q.done(subdirs)
			}
		}(&results[i])
	}
	wg.Wait()
	var out walkResult
	for _, r := range results {
		out.dirs += r.dirs
		out.symlinks += r.symlinks
		out.unreadable = append(out.unreadable, r.unreadable...)
	}
	out.files = int(min(files.Load(), int64(w.max)))
	out.truncated = truncated.Load()
	return out
}

// listDir lists one folder, visits its files and returns its subfolders.
func (w *walker) listDir(dir string, buf, path []byte, res *walkResult, visit visitFunc, files *atomic.Int64, truncated *atomic.Bool) ([]string, []byte) {
	f, err := w.openDir(dir)
	if err != nil {
		res.unreadable = append(res.unreadable, dir)
		return nil, path
	}
	defer f.Close()
	res.dirs++
	fd := int(f.Fd())
	var subdirs []string
	prefix := 0
	path = path[:0]
	if dir != "." {
		path = append(append(path, dir...), '/')
		prefix = len(path)
	}
	sub := func(name string) {
		rel := name
		if dir != "." {
			rel = dir + "/" + name
		}
		if !w.exclude[rel] {
			subdirs = append(subdirs, rel)
		}
	}
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			// Listed in part at best: deletions beneath it are not recorded.
			res.unreadable = append(res.unreadable, dir)
			return subdirs, path
		}
		if n <= 0 {
			return subdirs, path
		}
		// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen;
		// u8 d_type; char d_name[]; }
		for off := 0; off+19 <= n; {
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			if reclen == 0 || off+reclen > n {
				break
			}
			typ := buf[off+18]
			raw := buf[off+19 : off+reclen]
			if i := slices.Index(raw, 0); i >= 0 {
				raw = raw[:i]
			}
			off += reclen
			if len(raw) == 0 || (raw[0] == '.' && (len(raw) == 1 || (len(raw) == 2 && raw[1] == '.'))) {
				continue
			}
			switch typ {
			case syscall.DT_LNK:
				res.symlinks++
				continue
			case syscall.DT_DIR:
				sub(string(raw))
				continue
			case syscall.DT_REG, syscall.DT_UNKNOWN:
			default:
				continue // FIFO, socket, device
			}
			name := string(raw)
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // vanished between the listing and the stat
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
			case unix.S_IFDIR:
				sub(name)
				continue
			case unix.S_IFLNK:
				res.symlinks++
				continue
			default:
				continue
			}
			if files.Add(1) > int64(w.max) {
				truncated.Store(true)
				continue
			}
			path = append(path[:prefix], raw...)
			visit(path, statOf(&st))
		}
	}
}

// dirQueue hands folders to the walk's workers and knows when the walk is
// over: no folder queued and none being listed.
type dirQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	dirs   []string
	active int
}

func (q *dirQueue) pop() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.dirs) == 0 && q.active > 0 {
		q.cond.Wait()
	}
	if len(q.dirs) == 0 {
		return "", false
	}
	d := q.dirs[len(q.dirs)-1]
	q.dirs = q.dirs[:len(q.dirs)-1]
	q.active++
	return d, true
}

func (q *dirQueue) done(subdirs []string) {
	q.mu.Lock()
	q.dirs = append(q.dirs, subdirs...)
	q.active--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// openFile opens a workspace file for hashing without following a symlink
// anywhere in its path.
func (w *walker) openFile(rel string) (*os.File, error) {
	if openat2Works.Load() {
		how := &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := unix.Openat2(int(w.root.Fd()), rel, how)
		if err == nil {
			return os.NewFile(uintptr(fd), rel), nil
		}
		if err != unix.ENOSYS && err != unix.EPERM {
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
		openat2Works.Store(false)
	}
	return w.fallback(rel)
}

// statPath lstat()s one workspace path beneath the root without following
// symlinks in its parents.
func (w *walker) statPath(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	d, err := w.openDir(dir)
	if err != nil {
		return st, err
	}
	defer d.Close()
	err = unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// nearestDirCtime returns the ctime of the closest folder above rel that
// still exists: an unlink moves its parent's ctime.
func (w *walker) nearestDirCtime(rel string) (int64, bool) {
	for dir := path.Dir(rel); ; dir = path.Dir(dir) {
		d, err := w.openDir(dir)
		if err == nil {
			var st unix.Stat_t
			err = unix.Fstat(int(d.Fd()), &st)
			d.Close()
			if err == nil {
				return st.Ctim.Nano(), true
			}
		}
		if dir == "." {
			return 0, false
		}
	}
}

func isNotExist(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}
