// Package logtest helps tests read what was logged: Buffer, a bytes.Buffer
// safe for concurrent writers, is given to a logger and read afterwards.
// Only tests import it.
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the lines written so far, without their newlines.
func (b *Buffer) Lines() []string {
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
