package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeExample is one "$ command" line of a console block in README.md or
// a document of docs/, and the output printed under it.
type readmeExample struct {
	file    string
	line    int
	command string
	output  string
}

// where names the example's place, file:line, for messages.
func (ex readmeExample) where() string { return fmt.Sprintf("%s:%d", ex.file, ex.line) }

// readmeFiles are the documents whose console examples run, in this order,
// against one program: each goes on from the state the ones before it left.
var readmeFiles = []string{"README.md", "docs/reference.md", "docs/operating.md", "docs/postgres.md", "docs/design.md", "docs/clients.md"}

// TestREADMEExamples runs every example of the console blocks of
// readmeFiles, in order, against one fresh program, and checks it prints what
// the document shows. It understands the curl options the documents use and
// fails on others, so an example it cannot check cannot slip into them.
func TestREADMEExamples(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	for _, doc := range docs {
		assert.Contains(t, readmeFiles, filepath.ToSlash(doc), "a document whose examples no test runs: add it to readmeFiles")
	}
	var examples []readmeExample
	for _, file := range readmeFiles {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		examples = append(examples, readmeExamples(file, string(text))...)
	}
	require.NotEmpty(t, examples)

	base, _, _ := startProgram(t)
	// The ETags' epoch is drawn at random on each start: the documents show
	// readmeEpoch in its place, and the commands send it back.
	epoch := programEpoch(t, base)
	curls, helps := 0, 0
	for _, ex := range examples {
		var got string
		switch {
		case strings.HasPrefix(ex.command, "curl "):
			// One filter is understood: | grep -E 'pattern', which keeps
			// the lines the pattern matches (Go's syntax, which agrees
			// with grep's for the patterns the documents use).
			command, filter, filtered := strings.Cut(ex.command, " | grep -E ")
			command = strings.ReplaceAll(command, readmeEpoch, epoch)
			got = runCurl(t, readmeExample{file: ex.file, line: ex.line, command: command}, strings.TrimPrefix(base, "http://"))
			got = strings.ReplaceAll(got, epoch, readmeEpoch)
			got = fixedTimes(got)
			if filtered {
				words := shellWords(t, filter)
				require.Len(t, words, 1, "%s: grep -E takes one pattern", ex.where())
				got = grepLines(regexp.MustCompile(words[0]), got)
			}
			curls++
		case ex.command == "go run . -h":
			var stderr bytes.Buffer
			require.NoError(t, run(context.Background(), []string{"-h"}, os.LookupEnv, io.Discard, &stderr))
			got = stderr.String()
			helps++
		default:
			t.Fatalf("%s: no way to check %q", ex.where(), ex.command)
		}
		assert.Equal(t, ex.output, got, "%s: $ %s", ex.where(), ex.command)
	}
	assert.GreaterOrEqual(t, curls, 10, "the documents' curl examples were not found")
	assert.Equal(t, 1, helps, "the documents show the output of go run . -h once")
}

// readmeEpoch is the epoch the documents' ETags show.
const readmeEpoch = "8c1f2ab04d9e3f67"

// readmeTime is the time the documents' changes show: each change's time
// differs on each run.
const readmeTime = "2026-11-24T23:59:01.123Z"

// changeTimes matches a change's time as the feed sends it.
var changeTimes = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"`)

// fixedTimes returns s with every time of the feed's form replaced by
// readmeTime.
func fixedTimes(s string) string {
	return changeTimes.ReplaceAllLiteralString(s, `"`+readmeTime+`"`)
}

// programEpoch returns the epoch of the program at base, from an ETag.
func programEpoch(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/group-user/any")
	require.NoError(t, err)
	resp.Body.Close()
	epoch, _, ok := strings.Cut(strings.Trim(resp.Header.Get("ETag"), `"`), "-")
	require.True(t, ok && len(epoch) == len(readmeEpoch), "an ETag of the form \"<epoch>-<revision>\": %q", resp.Header.Get("ETag"))
	return epoch
}

// readmeExamples returns the examples of the console blocks of text, the
// content of file.
func readmeExamples(file, text string) []readmeExample {
	var examples []readmeExample
	inConsole := false
	for i, line := range strings.Split(text, "\n") {
		switch {
		case line == "```console":
			inConsole = true
		case strings.HasPrefix(line, "```"):
			inConsole = false
		case inConsole && strings.HasPrefix(line, "$ "):
			examples = append(examples, readmeExample{file: file, line: i + 1, command: strings.TrimPrefix(line, "$ ")})
		case inConsole && len(examples) > 0:
			examples[len(examples)-1].output += line + "\n"
		}
	}
	return examples
}

// runCurl does what curl would for the options the documents use, against the
// program at addr, and returns what curl would print.
func runCurl(t *testing.T, ex readmeExample, addr string) string {
	t.Helper()
	args := shellWords(t, ex.command)[1:]
	method, target, writeOut := "", "", ""
	discardBody := false
	var data []string
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		next := func() string {
			i++
			require.Less(t, i, len(args), "%s: %s needs a value", ex.where(), args[i-1])
			return args[i]
		}
		switch a := args[i]; a {
		case "-s":
		case "-w":
			writeOut = next()
		case "-o":
			require.Equal(t, "/dev/null", next(), "%s: the test knows only -o /dev/null", ex.where())
			discardBody = true
		case "-X":
			method = next()
		case "-H":
			k, v, ok := strings.Cut(next(), ":")
			require.True(t, ok, "%s: bad header", ex.where())
			header.Set(k, strings.TrimSpace(v))
		case "-d":
			data = append(data, next())
		case "--data-urlencode":
			name, content, _ := strings.Cut(next(), "=")
			data = append(data, name+"="+url.QueryEscape(content))
		default:
			require.False(t, strings.HasPrefix(a, "-"), "%s: the test does not know curl option %s", ex.where(), a)
			target = strings.Replace(a, "localhost:8080", addr, 1)
		}
	}
	var body io.Reader
	if data != nil {
		body = strings.NewReader(strings.Join(data, "&"))
		if method == "" {
			method = http.MethodPost
		}
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, "http://"+target, body)
	require.NoError(t, err)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if discardBody {
		got = nil
	}
	out := strings.NewReplacer(`\n`, "\n", "%{http_code}", resp.Status[:3], "%{content_type}", resp.Header.Get("Content-Type")).Replace(writeOut)
	out = curlHeaderVar.ReplaceAllStringFunc(out, func(v string) string {
		return resp.Header.Get(curlHeaderVar.FindStringSubmatch(v)[1])
	})
	return string(got) + out
}

// grepLines returns the lines of text that re matches, as grep prints them.
func grepLines(re *regexp.Regexp, text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if re.MatchString(strings.TrimSuffix(line, "\n")) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// curlHeaderVar is curl's -w variable for a reply header, %header{name}.
var curlHeaderVar = regexp.MustCompile(`%header\{([^}]+)\}`)

// shellWords splits a command line the way sh would for the documents'
// examples: words separated by spaces, with single quotes.
func shellWords(t *testing.T, line string) []string {
	var words []string
	var word strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted = !quoted
			inWord = true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unclosed quote in %q", line)
	if inWord {
		words = append(words, word.String())
	}
	return words
}
