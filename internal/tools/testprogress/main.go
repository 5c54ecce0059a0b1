// Command testprogress reads the events of go test -json on its standard
// input and prints what someone waiting for the tests wants to see: each
// package as it starts and as it ends, with its time; after a stretch
// without a line, which packages are running and which of their tests; the
// output of each failing test in full, as it fails; and at the end a
// summary: packages, tests passed, failed and skipped, the slowest tests and
// packages. It exits 1 when a test, a package or a build failed, or when the
// stream ended with a package still running, so that
//
//	set -o pipefail; go test -json ./... | go run ./internal/tools/testprogress
//
// fails whenever go test would. With -text, its input is plain text, the
// output of a step that prints a line now and then: it passes each line
// through, says how long it has been after quiet without one, and exits 0.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	quiet := flag.Duration("quiet", 20*time.Second, "after this long without a line, print what is running")
	slowest := flag.Int("slowest", 5, "how many of the slowest tests and packages the summary names")
	text := flag.Bool("text", false, "the input is plain text, not go test -json: pass it through, and say how long it has been after quiet without a line")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go test -json [packages] | testprogress [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || *quiet <= 0 || *slowest < 0 {
		flag.Usage()
		os.Exit(2)
	}
	// The ticker only wakes the reporter up to check the silence: a line
	// comes at most a second after quiet has passed.
	ticker := time.NewTicker(time.Second)
	var f follower = newReporter(os.Stdout, time.Now(), *quiet, *slowest)
	if *text {
		f = newTextReporter(os.Stdout, time.Now(), *quiet)
	}
	os.Exit(follow(os.Stdin, f, ticker.C, time.Now))
}

// A follower takes the lines of the input as they come, and the ticks of
// a clock between them.
type follower interface {
	line(line string, now time.Time)
	tick(now time.Time)
	// finish is called when the input ends, and returns the exit status.
	finish(now time.Time) int
}

// follow gives f each line of in, as it comes, and each tick, until in
// ends; then it has f finish, and returns the exit status.
func follow(in io.Reader, f follower, tick <-chan time.Time, now func() time.Time) int {
	lines := make(chan string)
	var readErr error
	go func() {
		defer close(lines)
		br := bufio.NewReader(in)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				lines <- line
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
		}
	}()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				status := f.finish(now())
				if readErr != nil {
					fmt.Fprintln(os.Stderr, "testprogress: reading the input:", readErr)
					status = 1
				}
				return status
			}
			f.line(line, now())
		case t := <-tick:
			f.tick(t)
		}
	}
}
