//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package fileutil

import (
	"os"
	"syscall"
)

// lockSupported says that this platform has flock.
const lockSupported = true

// lock takes an exclusive flock on f, without waiting.
func lock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
