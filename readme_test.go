package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeExample is one "$ command" line of a console block in README.md and
// the output printed under it.
type readmeExample struct {
	line    int
	command string
	output  string
}

// TestREADMEExamples runs every example of README.md's console blocks, in
// order, against one fresh program, and checks it prints what the README
// shows. It understands the curl options the README uses and fails on others,
// so an example it cannot check cannot slip into the README.
func TestREADMEExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	examples := readmeExamples(string(readme))
	require.NotEmpty(t, examples)

	base, _, _ := startProgram(t)
	// The ETags' epoch is drawn at random on each start: the README shows
	// readmeEpoch in its place, and the commands send it back.
	epoch := programEpoch(t, base)
	curls := 0
	for _, ex := range examples {
		var got string
		switch {
		case strings.HasPrefix(ex.command, "curl "):
			// One filter is understood: | grep -E 'pattern', which keeps
			// the lines the pattern matches (Go's syntax, which agrees
			// with grep's for the patterns the README uses).
			command, filter, filtered := strings.Cut(ex.command, " | grep -E ")
			command = strings.ReplaceAll(command, readmeEpoch, epoch)
			got = runCurl(t, readmeExample{line: ex.line, command: command}, strings.TrimPrefix(base, "http://"))
			got = strings.ReplaceAll(got, epoch, readmeEpoch)
			if filtered {
				words := shellWords(t, filter)
				require.Len(t, words, 1, "README.md:%d: grep -E takes one pattern", ex.line)
				got = grepLines(regexp.MustCompile(words[0]), got)
			}
			curls++
		case ex.command == "go run . -h":
			var stderr bytes.Buffer
			require.NoError(t, run(context.Background(), []string{"-h"}, os.Getenv, io.Discard, &stderr))
			got = stderr.String()
		default:
			t.Fatalf("README.md:%d: no way to check %q", ex.line, ex.command)
		}
		assert.Equal(t, ex.output, got, "README.md:%d: $ %s", ex.line, ex.command)
	}
	assert.GreaterOrEqual(t, curls, 10, "the README's curl examples were not found")
}

// readmeEpoch is the epoch the README's ETags show.
const readmeEpoch = "8c1f2ab04d9e3f67"

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

func readmeExamples(readme string) []readmeExample {
	var examples []readmeExample
	inConsole := false
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case line == "```console":
			inConsole = true
		case strings.HasPrefix(line, "```"):
			inConsole = false
		case inConsole && strings.HasPrefix(line, "$ "):
			examples = append(examples, readmeExample{line: i + 1, command: strings.TrimPrefix(line, "$ ")})
		case inConsole && len(examples) > 0:
			examples[len(examples)-1].output += line + "\n"
		}
	}
	return examples
}

// runCurl does what curl would for the options the README uses, against the
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
			require.Less(t, i, len(args), "README.md:%d: %s needs a value", ex.line, args[i-1])
			return args[i]
		}
		switch a := args[i]; a {
		case "-s":
		case "-w":
			writeOut = next()
		case "-o":
			require.Equal(t, "/dev/null", next(), "README.md:%d: the test knows only -o /dev/null", ex.line)
			discardBody = true
		case "-X":
			method = next()
		case "-H":
			k, v, ok := strings.Cut(next(), ":")
			require.True(t, ok, "README.md:%d: bad header", ex.line)
			header.Set(k, strings.TrimSpace(v))
		case "-d":
			data = append(data, next())
		case "--data-urlencode":
			name, content, _ := strings.Cut(next(), "=")
			data = append(data, name+"="+url.QueryEscape(content))
		default:
			require.False(t, strings.HasPrefix(a, "-"), "README.md:%d: the test does not know curl option %s", ex.line, a)
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

// shellWords splits a command line the way sh would for the README's
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
