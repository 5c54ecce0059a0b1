package fileutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// DirLock keeps every other process out of a directory: an exclusive lock
// on the directory itself, which cannot be deleted while it is open, so
// that removing a file cannot let a second process in, and one on a lock
// file in it, for the versions that locked only that.
type DirLock struct {
	path      string
	dir, file *os.File
	// existed says whether the lock file was there before: a directory with
	// it and nothing else lost its files.
	existed bool
	once    sync.Once
}

// ErrLockUnsupported is returned by LockDir on a platform where this
// build cannot take an exclusive lock on a file.
var ErrLockUnsupported = fmt.Errorf("exclusive file locks are not supported on %s/%s", runtime.GOOS, runtime.GOARCH)

// LockDir creates the directory dir when it is missing (with mode perm),
// and locks it and its file lockName (created with mode filePerm), without
// waiting: held by another process, it returns an error that says the
// directory is in use. Where the platform has no lock, it returns an error
// that wraps ErrLockUnsupported, before it creates anything.
func LockDir(dir, lockName string, perm, filePerm os.FileMode) (*DirLock, error) {
	if !lockSupported {
		return nil, fmt.Errorf("the directory %s cannot be locked: %w", dir, ErrLockUnsupported)
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return nil, err
	}
	lockPath := filepath.Join(dir, lockName)
	_, statErr := os.Stat(lockPath)
	d, err := lockFile(dir, dir, os.O_RDONLY, filePerm)
	if err != nil {
		return nil, err
	}
	f, err := lockFile(dir, lockPath, os.O_CREATE|os.O_RDWR, filePerm)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &DirLock{path: dir, dir: d, file: f, existed: statErr == nil}, nil
}

// lockFile opens path and locks it: held by another, it says that the
// directory dir is in use.
func lockFile(dir, path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if err := lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("the data directory %s is in use by another process (%v)", dir, err)
	}
	return f, nil
}

// Existed reports whether the lock file was there before LockDir.
func (l *DirLock) Existed() bool { return l.existed }

// Release frees the directory for another process. Releasing again does
// nothing.
func (l *DirLock) Release() error {
	var err error
	l.once.Do(func() { err = errors.Join(l.file.Close(), l.dir.Close()) })
	return err
}

// Covers returns an error unless l locks the directory dir.
func (l *DirLock) Covers(dir string) error {
	locked, err := l.dir.Stat()
	if err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !os.SameFile(locked, info) {
		return fmt.Errorf("the lock given is the data directory %s's, not %s's", l.path, dir)
	}
	return nil
}
