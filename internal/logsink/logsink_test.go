package logsink

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/logtest"
)

// stalledOutput blocks every Write until release is closed; entered gets a
// value when the first Write starts.
type stalledOutput struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	got     logtest.Buffer
}

func newStalledOutput() *stalledOutput {
	return &stalledOutput{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *stalledOutput) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.got.Write(p)
}

func TestWriterFlushesByItself(t *testing.T) {
	out := &logtest.Buffer{}
	w := New(out, Options{FlushInterval: time.Millisecond})
	defer w.Close(time.Second)
	_, err := w.Write([]byte("line\n"))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return out.String() == "line\n" }, 10*time.Second, time.Millisecond,
		"a line must reach the output without a Close")
}

func TestWriterCloseWritesEverything(t *testing.T) {
	out := &logtest.Buffer{}
	w := New(out, Options{MaxBytes: 1 << 20})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				_, _ = fmt.Fprintf(w, "writer %d line %d\n", g, i)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close(10*time.Second))
	lines := out.Lines()
	assert.Len(t, lines, 8000, "every line written, none split or lost")
	for _, line := range lines {
		assert.Regexp(t, `^writer \d line \d+$`, line)
	}
	assert.Zero(t, w.Dropped())
}

// A stalled output must not block a writer: lines past the buffer are
// dropped and counted, and once the output flows again one report says how
// many.
func TestWriterDropsWhenTheOutputStalls(t *testing.T) {
	out := newStalledOutput()
	var reports []uint64
	var w *Writer
	w = New(out, Options{MaxBytes: 1024, FlushInterval: time.Millisecond, Dropped: func(n uint64) {
		reports = append(reports, n) // only the flushing goroutine calls this
		fmt.Fprintf(w, "dropped %d\n", n)
	}})
	line := []byte(strings.Repeat("x", 99) + "\n")
	_, _ = w.Write(line)
	<-out.entered // the flusher is now stuck writing that line

	// Every Write returns at once although nothing is written: the test
	// would hang here otherwise.
	for range 1000 {
		n, err := w.Write(line)
		require.NoError(t, err)
		require.Equal(t, len(line), n)
	}
	assert.Equal(t, uint64(1000-10), w.Dropped(), "ten lines fit in 1024 bytes; the rest are dropped")

	close(out.release)
	require.NoError(t, w.Close(10*time.Second))
	lines := out.got.Lines()
	require.Len(t, lines, 1+10+1, "the first line, the ten buffered, the report")
	assert.Equal(t, "dropped 990", lines[11])
	assert.Equal(t, []uint64{990}, reports, "one report for the whole stall")
}

func TestWriterCloseGivesUpOnAStalledOutput(t *testing.T) {
	out := newStalledOutput()
	defer close(out.release)
	w := New(out, Options{FlushInterval: time.Millisecond})
	_, _ = w.Write([]byte("line\n"))
	<-out.entered
	assert.ErrorIs(t, w.Close(10*time.Millisecond), ErrStalled)
}
