//go:build linux && (amd64 || arm64)

package aiofsync

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// From linux/aio_abi.h.
const (
	cmdFsync  = 2      // IOCB_CMD_FSYNC
	flagResfd = 1 << 0 // IOCB_FLAG_RESFD: signal the eventfd aio_resfd at the end
)

// iocb is struct iocb of linux/aio_abi.h on a little-endian 64-bit machine
// (aio_key before aio_rw_flags): 64 bytes.
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   int32
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// ioEvent is struct io_event: 32 bytes.
type ioEvent struct {
	data uint64 // the iocb's data: the fsync's sequence number
	obj  uint64
	res  int64 // what vfs_fsync returned: 0, or -errno
	res2 int64
}

// File is an open file whose Sync is an asynchronous fsync. Its other
// methods are the file's own.
type File struct {
	*os.File
	fd uint32 // the file's descriptor

	mu      sync.Mutex // one fsync at a time
	aioCtx  uintptr    // the kernel's AIO context: one fsync in flight at most
	done    *os.File   // the eventfd the kernel signals, non-blocking, in the poller
	doneFd  uint32
	seq     uint64 // the last fsync submitted
	blocked bool   // io_submit refused an fsync: Sync is the file's own from then on
	refusal error  // why, when blocked
	broken  error  // the wait for an fsync failed: it may still be in flight
	closed  bool
}

// Open returns f with an asynchronous Sync. When the kernel gives no AIO
// context or eventfd (a kernel without AIO, a sandbox that forbids it, the
// system's aio-max-nr reached), it returns the error and f is the caller's,
// unchanged.
func Open(f *os.File) (*File, error) {
	var fd uint32
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	if err := rc.Control(func(d uintptr) { fd = uint32(d) }); err != nil {
		return nil, err
	}
	var aioCtx uintptr
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&aioCtx)), 0); e != 0 {
		return nil, fmt.Errorf("aiofsync: io_setup: %w", e)
	}
	efd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		destroy(aioCtx)
		return nil, fmt.Errorf("aiofsync: eventfd2: %w", e)
	}
	// A non-blocking descriptor: os.NewFile puts it in the poller, so that a
	// Read parks the goroutine, not its thread. Where the poller would not
	// take it (epoll's limits), a Read would fail at once instead of
	// waiting: a file whose deadlines cannot be set is not in the poller.
	done := os.NewFile(efd, "aiofsync-eventfd")
	if err := done.SetReadDeadline(time.Time{}); err != nil {
		_ = done.Close()
		destroy(aioCtx)
		return nil, fmt.Errorf("aiofsync: the eventfd is not in the runtime's poller: %w", err)
	}
	a := &File{File: f, fd: fd, aioCtx: aioCtx, done: done, doneFd: uint32(efd)}
	// One fsync now, through the kernel's AIO: a file system or a sandbox
	// that refuses it (io_submit fails) is found here, where the caller can
	// say so, not at the first commit.
	if err := a.Sync(); err != nil || a.blocked {
		a.mu.Lock()
		_ = a.done.Close()
		destroy(a.aioCtx)
		a.closed = true
		a.mu.Unlock()
		if err == nil {
			err = a.refusal
		}
		return nil, fmt.Errorf("aiofsync: the first asynchronous fsync: %w", err)
	}
	return a, nil
}

func destroy(aioCtx uintptr) { _, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, aioCtx, 0, 0) }

// Sync commits the file's contents and metadata to stable storage, as
// fsync(2) does, and returns its error. The calling goroutine waits in the
// poller while the kernel's worker runs the fsync.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return &os.PathError{Op: "sync", Path: f.Name(), Err: os.ErrClosed}
	case f.broken != nil:
		return f.broken
	case f.blocked:
		return f.File.Sync()
	}
	f.seq++
	cb := iocb{data: f.seq, opcode: cmdFsync, fildes: f.fd, flags: flagResfd, resfd: f.doneFd}
	cbs := [1]*iocb{&cb}
	for {
		_, _, e := syscall.Syscall(syscall.SYS_IO_SUBMIT, f.aioCtx, 1, uintptr(unsafe.Pointer(&cbs[0])))
		switch e {
		case 0:
			return f.await(f.seq)
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			// No room in the kernel's AIO for now: this once, the usual way.
			return f.File.Sync()
		default:
			// Refused, and not run: a file system without an asynchronous
			// fsync (EINVAL), a sandbox that forbids io_submit (ENOSYS,
			// EPERM), a closed descriptor (EBADF). The file's own fsync
			// from now on, which returns the file's error if it has one.
			f.blocked = true
			f.refusal = &os.PathError{Op: "io_submit fsync", Path: f.Name(), Err: e}
			return f.File.Sync()
		}
	}
}

// await waits for the end of the fsync seq and returns its result.
func (f *File) await(seq uint64) error {
	var count [8]byte
	var events [4]ioEvent
	for {
		if _, err := f.done.Read(count[:]); err != nil {
			// The fsync may still be in flight: its end can no longer be
			// told from a later one's, so this file takes no more.
			f.broken = &os.PathError{Op: "sync", Path: f.Name(), Err: fmt.Errorf("waiting for the asynchronous fsync: %w", err)}
			return f.broken
		}
		var zero syscall.Timespec
		n, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, f.aioCtx, 0, uintptr(len(events)),
			uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(&zero)), 0)
		if e != 0 && e != syscall.EINTR {
			f.broken = &os.PathError{Op: "io_getevents", Path: f.Name(), Err: e}
			return f.broken
		}
		for _, ev := range events[:n] {
			if ev.data != seq {
				// Not this fsync's end. With one in flight at a time and no
				// Sync after a failed wait it cannot come; it is skipped
				// rather than taken for this one.
				continue
			}
			if ev.res < 0 {
				return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.Errno(-ev.res)}
			}
			return nil
		}
	}
}

// Close closes the file, the eventfd and the AIO context (whose destruction
// waits for an fsync still in flight).
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.Name(), Err: os.ErrClosed}
	}
	f.closed = true
	destroy(f.aioCtx)
	return errors.Join(f.File.Close(), f.done.Close())
}
