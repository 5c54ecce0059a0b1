// Package fileutil is the file plumbing of the data directory: writing a
// file so that a crash leaves either the old one or the whole new one,
// fsyncs of files and directories, the repair directories where a repair
// keeps what it drops, and the directory lock that keeps a second process
// out (lock_unix.go where the platform has flock, and lock_other.go, which
// says it has none, elsewhere).
package fileutil

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The modes of the data directory and of its files: the data is the
// service's alone, as PostgreSQL and etcd keep theirs.
const (
	DirMode  = 0o700
	FileMode = 0o600
)

// WriteAtomic writes the file at path through a temporary file in the same
// directory (its name ends in .tmp, so that a start after a crash can
// remove it): write fills it, then it is fsynced, renamed over path, and
// the directory fsynced. path is always either as it was or whole, and
// once WriteAtomic returns nil, durable. The file has mode perm.
func WriteAtomic(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+"-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// CreateSync creates the file at path, which must not exist, with data,
// durably: the file and its directory are fsynced. When it fails, it
// removes what it created.
func CreateSync(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Truncate cuts the file at path to size, durably.
func Truncate(path string, size int64) error {
	if err := os.Truncate(path, size); err != nil {
		return err
	}
	return SyncFile(path)
}

// SyncFile fsyncs the file at path.
func SyncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// SyncDir fsyncs the directory dir, so that the names of the files created,
// renamed or removed in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MoveToRepair makes a new repair directory, dir/repair-<time>, where a
// repair keeps what it drops, moves the files at paths into it, durably,
// and returns its path.
func MoveToRepair(dir string, paths ...string) (string, error) {
	repair := filepath.Join(dir, "repair-"+time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Mkdir(repair, DirMode); err != nil {
		return "", err
	}
	for _, path := range paths {
		if err := os.Rename(path, filepath.Join(repair, filepath.Base(path))); err != nil {
			return "", err
		}
	}
	return repair, errors.Join(SyncDir(repair), SyncDir(dir))
}

// ListNumbered returns, in ascending order, the numbers N of the files of
// dir named prefix, N in decimal, then suffix: the logs and the snapshots.
func ListNumbered(dir, prefix, suffix string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ns []uint64
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) {
			if n, err := strconv.ParseUint(name[len(prefix):len(name)-len(suffix)], 10, 64); err == nil {
				ns = append(ns, n)
			}
		}
	}
	slices.Sort(ns)
	return ns, nil
}
