package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBufferedLogFlushesByItself(t *testing.T) {
	out := &syncBuffer{}
	b := newBufferedLog(out)
	defer b.Close()
	_, err := b.Write([]byte("line\n"))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return out.String() == "line\n" }, 5*logFlushInterval, logFlushInterval/10,
		"a line must reach the output within the flush interval")
}

func TestBufferedLogCloseFlushesEverything(t *testing.T) {
	out := &syncBuffer{}
	b := newBufferedLog(out)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				_, _ = fmt.Fprintf(b, "writer %d line %d\n", w, i)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, b.Close())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Len(t, lines, 8000, "every line written, none split or lost")
	for _, line := range lines {
		assert.Regexp(t, `^writer \d line \d+$`, line)
	}
}

func TestBufferedLogStopsFlushingAfterClose(t *testing.T) {
	b := newBufferedLog(&syncBuffer{})
	require.NoError(t, b.Close())
	select {
	case <-b.done:
	case <-time.After(time.Second):
		t.Fatal("the flushing goroutine still runs")
	}
}
