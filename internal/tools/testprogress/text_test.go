package main

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -text passes each line through, and after quiet without one says how
// long it has been since the last, and which it was.
func TestTextSaysHowLongSinceTheLastLine(t *testing.T) {
	var out bytes.Buffer
	began := time.Unix(0, 0)
	at := func(s int) time.Time { return began.Add(time.Duration(s) * time.Second) }
	r := newTextReporter(&out, began, 20*time.Second)

	r.tick(at(20))
	r.line("make clients: npm ci\n", at(21))
	r.tick(at(40))
	r.tick(at(41))
	r.tick(at(60))
	r.tick(at(61))
	r.line("no newline", at(62))
	r.tick(at(82))
	assert.Equal(t, 0, r.finish(at(83)))
	assert.Equal(t, " 0:20  still running, nothing printed yet\n"+
		"make clients: npm ci\n"+
		" 0:41  still running, 20.0s after: make clients: npm ci\n"+
		" 1:01  still running, 40.0s after: make clients: npm ci\n"+
		"no newline\n"+
		" 1:22  still running, 20.0s after: no newline\n", out.String())
}

func TestTextShortensALongLastLine(t *testing.T) {
	var out bytes.Buffer
	began := time.Unix(0, 0)
	r := newTextReporter(&out, began, 20*time.Second)
	long := strings.Repeat("é", 150)
	r.line(long+"\n", began)
	r.tick(began.Add(20 * time.Second))
	assert.Equal(t, long+"\n 0:20  still running, 20.0s after: "+strings.Repeat("é", 99)+"…\n", out.String())
}

// follow with -text: a heartbeat on a tick with nothing on the input, each
// line as it comes, status 0 at the end.
func TestFollowText(t *testing.T) {
	began := time.Unix(0, 0)
	inR, inW := io.Pipe()
	var out bytes.Buffer
	outR, outW := io.Pipe()
	tick := make(chan time.Time)
	status := make(chan int, 1)
	go func() {
		status <- follow(inR, newTextReporter(outW, began, 20*time.Second), tick, func() time.Time { return began })
		outW.Close()
	}()
	lines := bufio.NewReader(outR)
	read := func() string {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		return line
	}

	tick <- began.Add(25 * time.Second)
	assert.Equal(t, " 0:25  still running, nothing printed yet\n", read())
	_, err := io.WriteString(inW, "step one\n")
	require.NoError(t, err)
	assert.Equal(t, "step one\n", read())
	require.NoError(t, inW.Close())
	_, err = io.Copy(&out, lines)
	require.NoError(t, err)
	assert.Empty(t, out.String())
	assert.Equal(t, 0, <-status)
}
