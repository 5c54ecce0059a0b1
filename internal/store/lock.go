package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// DataDirLock keeps every other process out of a data directory: an
// exclusive flock on the directory itself, which cannot be deleted while it
// is open, so that removing a file cannot let a second process in, and one
// on its LOCK file, for the versions that locked only that.
type DataDirLock struct {
	path      string
	dir, file *os.File
	// existed says whether LOCK was there before: a directory with LOCK and
	// nothing else lost its files.
	existed bool
	once    sync.Once
}

// LockDataDir creates the data directory dir when it is missing (0700),
// and locks it, or returns an error that says another process has it. A
// caller takes it before anything else that would show the service as
// started (such as listening), and gives it to OpenDurable in
// DurableOptions.Lock, which then holds it until Close; until then,
// Release frees it.
func LockDataDir(dir string) (*DataDirLock, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(dir, "LOCK"))
	d, err := lockFile(dir, dir, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	f, err := lockFile(dir, filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &DataDirLock{path: dir, dir: d, file: f, existed: statErr == nil}, nil
}

// lockFile opens path and takes an exclusive flock on it, without waiting:
// held by another, it says that the data directory dir is in use.
func lockFile(dir, path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, fileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("the data directory %s is in use by another process (%v)", dir, err)
	}
	return f, nil
}

// Release frees the directory for another process. Releasing again does
// nothing. Once the lock is given to OpenDurable, the store releases it.
func (l *DataDirLock) Release() error {
	var err error
	l.once.Do(func() { err = errors.Join(l.file.Close(), l.dir.Close()) })
	return err
}

// covers returns an error unless l locks the directory dir.
func (l *DataDirLock) covers(dir string) error {
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

// takeLock returns given, when it locks dir, or else a lock taken on dir.
// A given lock that does not fit is released.
func takeLock(dir string, given *DataDirLock) (*DataDirLock, error) {
	if given == nil {
		return LockDataDir(dir)
	}
	if err := given.covers(dir); err != nil {
		return nil, errors.Join(err, given.Release())
	}
	return given, nil
}
