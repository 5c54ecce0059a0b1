//go:build !(linux && (amd64 || arm64))

package aiofsync

import "os"

// File is an open file; here its Sync is the file's own.
type File struct {
	*os.File
}

// Open returns ErrUnsupported: this platform has no asynchronous fsync.
func Open(f *os.File) (*File, error) { return nil, ErrUnsupported }
