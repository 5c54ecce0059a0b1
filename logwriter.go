package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logFlushInterval bounds how long a log line waits in the buffer.
const logFlushInterval = 100 * time.Millisecond

// bufferedLog batches log lines into few writes: one write per access-log
// line was the largest cost of a small request after the network itself. It
// flushes every logFlushInterval, when its buffer fills, and on Close, so a
// hard crash loses at most the last interval's lines.
type bufferedLog struct {
	// mu guards w.
	mu sync.Mutex
	w  *bufio.Writer

	stop chan struct{}
	done chan struct{}
}

func newBufferedLog(w io.Writer) *bufferedLog {
	b := &bufferedLog{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go b.flushEvery(logFlushInterval)
	return b
}

// Write implements io.Writer. slog writes each record with one Write call,
// so a record is never split between flushes.
func (b *bufferedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Write(p)
}

func (b *bufferedLog) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.w.Flush()
}

func (b *bufferedLog) flushEvery(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = b.flush() // a log that cannot be written has nowhere to report it
		case <-b.stop:
			return
		}
	}
}

// Close stops the periodic flush and writes what is buffered.
func (b *bufferedLog) Close() error {
	close(b.stop)
	<-b.done
	return b.flush()
}
