// Package aiofsync fsyncs a file without holding a thread for it: on Linux
// the fsync is handed to the kernel's asynchronous I/O (io_submit of
// IOCB_CMD_FSYNC), and its end is awaited on an eventfd through the Go
// runtime's network poller, as a socket's read is. A blocking fsync(2)
// holds its thread, and hands the thread's processor to another, for as
// long as the disk takes; the goroutine that made it must then wait for a
// processor again, and the runtime watches the blocked thread meanwhile.
// Under a load of small durable writes that costs CPU: the service took 16%
// less of it a write with this package (bench/README.md, "With -data-dir").
//
// The fsync is the same: the kernel runs vfs_fsync on the file, on its own
// worker, and reports its result. Where the kernel's AIO is unavailable
// (another platform, a kernel or sandbox without it, a file system that
// refuses an asynchronous fsync) Sync is the file's own Sync.
package aiofsync

import "errors"

// ErrUnsupported is the error of Open where the platform has no
// asynchronous fsync: the caller keeps its file and fsyncs it as usual.
var ErrUnsupported = errors.New("aiofsync: no asynchronous fsync on this platform")
