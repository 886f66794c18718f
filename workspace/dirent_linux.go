package workspace

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirent is one directory entry as getdents64 reports it.
type dirent struct {
	name string
	typ  uint8 // syscall.DT_*
}

// readDirents lists a directory from its open handle with getdents64 alone:
// names and types, no stat per entry. (os.File.ReadDir stats every entry of
// a directory opened through os.Root, which dominates the cost of walking a
// large tree.) Entries are unsorted; "." and ".." are skipped.
func readDirents(f *os.File) ([]dirent, error) {
	fd := int(f.Fd())
	buf := make([]byte, 32<<10)
	var out []dirent
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			return out, err
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			typ := buf[off+18]
			nameBytes := buf[off+19 : off+reclen]
			for i, c := range nameBytes {
				if c == 0 {
					nameBytes = nameBytes[:i]
					break
				}
			}
			off += reclen
			name := string(nameBytes)
			if name == "." || name == ".." {
				continue
			}
			out = append(out, dirent{name: name, typ: typ})
		}
	}
}

// lstatAt stats name in the open directory f without following a final
// symlink.
func lstatAt(f *os.File, name string) (syscall.Stat_t, error) {
	var st syscall.Stat_t
	err := unix.Fstatat(int(f.Fd()), name, (*unix.Stat_t)(unsafe.Pointer(&st)), unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// openat2Works is cleared the first time the kernel refuses openat2 (older
// kernels, some sandboxes); os.Root is used from then on.
var openat2Works atomic.Bool

func init() { openat2Works.Store(true) }

// openDirBeneath opens a folder of the workspace for listing. With openat2,
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS make the kernel refuse any path
// that leaves the workspace or crosses a symlink, in one system call instead
// of os.Root's walk component by component (listing a large tree opens every
// folder in it).
func (w *Workspace) openDirBeneath(rel string) (*os.File, error) {
	if w.dirFile != nil && openat2Works.Load() {
		how := &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		fd, err := unix.Openat2(int(w.dirFile.Fd()), rel, how)
		if err == nil {
			return os.NewFile(uintptr(fd), rel), nil
		}
		if err != unix.ENOSYS && err != unix.EPERM {
			return nil, &os.PathError{Op: "openat2", Path: rel, Err: err}
		}
		openat2Works.Store(false)
	}
	return w.root.Open(rel)
}
