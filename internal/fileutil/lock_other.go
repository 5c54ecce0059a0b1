//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package fileutil

import "os"

// lockSupported says that this platform has no lock this build can take:
// on Windows, the standard library's syscall has no LockFileEx.
const lockSupported = false

func lock(*os.File) error { return ErrLockUnsupported }
