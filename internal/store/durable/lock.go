package durable

import (
	"errors"
	"fmt"

	"example.com/groupmembership/internal/fileutil"
)

// lockFileName is the file in the data directory that is locked, with the
// directory itself, while a process has it open.
const lockFileName = "LOCK"

// LockDataDir creates the data directory dir when it is missing (0700),
// and locks it, or returns an error that says another process has it, or
// that this platform cannot lock it. A caller takes it before the store
// loads (the server takes it once its addresses are bound and before it
// says it listens, so that a taken port leaves no LOCK behind), and gives
// it to Open in Options.Lock, which then holds it until Close; until then,
// Release frees it.
func LockDataDir(dir string) (*fileutil.DirLock, error) {
	l, err := fileutil.LockDir(dir, lockFileName, fileutil.DirMode, fileutil.FileMode)
	if errors.Is(err, fileutil.ErrLockUnsupported) {
		return nil, fmt.Errorf("%w: a data directory needs that lock, to keep a second process out", err)
	}
	return l, err
}

// takeLock returns given, when it locks dir, or else a lock taken on dir.
// A given lock that does not fit is released.
func takeLock(dir string, given *fileutil.DirLock) (*fileutil.DirLock, error) {
	if given == nil {
		return LockDataDir(dir)
	}
	if err := given.Covers(dir); err != nil {
		return nil, errors.Join(err, given.Release())
	}
	return given, nil
}
