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
// fails whenever go test would.
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
	quiet := flag.Duration("quiet", 20*time.Second, "after this long without a line, print which packages and tests are running")
	slowest := flag.Int("slowest", 5, "how many of the slowest tests and packages the summary names")
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
	r := newReporter(os.Stdout, time.Now(), *quiet, *slowest)
	os.Exit(follow(os.Stdin, r, ticker.C, time.Now))
}

// follow gives r each line of in, as it comes, and each tick, until in
// ends; then it has r print the summary, and returns the exit status.
func follow(in io.Reader, r *reporter, tick <-chan time.Time, now func() time.Time) int {
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
				if readErr != nil {
					r.printf(now(), "reading the events: %v", readErr)
					r.failed = true
				}
				return r.finish(now())
			}
			r.line(line, now())
		case t := <-tick:
			r.tick(t)
		}
	}
}
