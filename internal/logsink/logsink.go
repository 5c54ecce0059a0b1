// Package logsink holds Writer, the buffer between the service's log and its
// output (stdout): writing a log line never waits for the output. Lines are
// batched into few writes, and when the output stalls (a pipe nobody reads,
// a full disk) they are dropped and counted instead of blocking a request.
package logsink

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Options.
const (
	DefaultMaxBytes      = 1 << 20
	DefaultFlushInterval = 100 * time.Millisecond
)

// Options configure New.
type Options struct {
	// MaxBytes bounds the lines waiting to be written; a line that does not
	// fit is dropped. The writer holds at most twice this: the lines
	// waiting, and those being written. DefaultMaxBytes when <= 0.
	MaxBytes int
	// FlushInterval bounds how long a line waits before its write starts;
	// DefaultFlushInterval when <= 0.
	FlushInterval time.Duration
	// Dropped, when set, is called with how many lines were dropped once the
	// output takes writes again: the caller logs one warning. It is called
	// from the flushing goroutine, and may write to the Writer.
	Dropped func(n uint64)
}

// Writer is an io.Writer whose Write never blocks on the output: one
// goroutine writes what was buffered every FlushInterval, when half the
// buffer is full, and on Close.
type Writer struct {
	out  io.Writer
	opts Options

	// mu guards the fields below; it is never held while writing to out.
	mu      sync.Mutex
	buf     []byte // lines waiting to be written
	spare   []byte // the buffer that is being written, reused once written
	pending uint64 // lines dropped since the last report

	dropped atomic.Uint64 // lines dropped since New
	kick    chan struct{} // wakes the flusher before its interval; capacity 1
	stop    chan struct{}
	done    chan struct{}
}

// New returns a Writer to out and starts its flushing goroutine. Close it.
func New(out io.Writer, opts Options) *Writer {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	w := &Writer{
		out:  out,
		opts: opts,
		buf:  make([]byte, 0, min(opts.MaxBytes, 64<<10)),
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go w.flushLoop()
	return w
}

// Write implements io.Writer. It keeps p whole for the next write to the
// output, or drops it whole when the buffer has no room: slog writes each
// record with one call, so a line is never split. It never fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if len(w.buf)+len(p) > w.opts.MaxBytes {
		w.pending++
		w.mu.Unlock()
		w.dropped.Add(1)
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	half := len(w.buf) >= w.opts.MaxBytes/2
	w.mu.Unlock()
	if half {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Dropped returns how many lines were dropped since New.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Buffered returns the bytes of the lines waiting to be written.
func (w *Writer) Buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

// MaxBytes returns the bound of the lines waiting.
func (w *Writer) MaxBytes() int { return w.opts.MaxBytes }

func (w *Writer) flushLoop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.kick:
		case <-w.stop:
			for w.flush() {
				// Again: a flush may leave the report of its drops behind.
			}
			return
		}
		w.flush()
	}
}

// flush writes what is buffered, outside the lock, then reports the lines
// dropped before it: the output took a write, so it flows again. It reports
// whether lines are left in the buffer.
func (w *Writer) flush() (more bool) {
	w.mu.Lock()
	out := w.buf
	w.buf, w.spare = w.spare[:0], nil
	dropped := w.pending
	w.pending = 0
	w.mu.Unlock()
	if len(out) > 0 {
		_, _ = w.out.Write(out) // a log that cannot be written has nowhere to report it
	}
	w.mu.Lock()
	w.spare = out[:0]
	w.mu.Unlock()
	if dropped > 0 && w.opts.Dropped != nil {
		w.opts.Dropped(dropped)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf) > 0 || w.pending > 0
}

// ErrStalled is returned by Close when the output did not take the last
// lines in time.
var ErrStalled = errors.New("the log output is stalled: the last lines were not written")

// Close stops the flushing goroutine after a last write of what is
// buffered, waiting at most timeout for the output to take it.
func (w *Writer) Close(timeout time.Duration) error {
	close(w.stop)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-t.C:
		return ErrStalled
	}
}
