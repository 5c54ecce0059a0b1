package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
var readmeFiles = []string{"README.md", "docs/reference.md", "docs/operating.md", "docs/postgres.md", "docs/design.md", "docs/clients.md", "docs/scim.md"}

// TestREADMEExamples runs every example of the console blocks of
// readmeFiles, in order, in one shell with the real curl, against one fresh
// program, and checks each prints what the document shows. The commands
// run exactly as written: curl reaches the program for localhost:8080
// through a curlrc of the test's own (connect-to), and a value an example
// needs from an earlier reply it takes from that reply, in a shell
// variable, as a reader's shell would. The output is compared with the
// program's epoch written as readmeEpoch and the feed's times as
// readmeTime, which the documents say differ on each start.
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
	_, err = exec.LookPath("curl")
	require.NoError(t, err, "the documents' examples run curl: install it (apt-get install curl)")

	base, _, _ := startProgram(t)
	epoch := programEpoch(t, base)
	outputs := runInShell(t, examples, strings.TrimPrefix(base, "http://"))
	curls, helps := 0, 0
	for i, ex := range examples {
		got := outputs[i]
		if ex.command == "go run . -h" {
			var stderr bytes.Buffer
			require.NoError(t, run(context.Background(), []string{"-h"}, os.LookupEnv, io.Discard, &stderr))
			got = stderr.String()
			helps++
		} else {
			curls++
		}
		got = fixedTimes(strings.ReplaceAll(got, epoch, readmeEpoch))
		assert.Equal(t, ex.output, got, "%s: $ %s", ex.where(), ex.command)
	}
	assert.GreaterOrEqual(t, curls, 10, "the documents' curl examples were not found")
	assert.Equal(t, 1, helps, "the documents show the output of go run . -h once")
}

// shellCommand is the form of the commands the documents' console blocks
// may show: curl, or a variable set from curl's output (and echoed), so
// that the test runs nothing else.
var shellCommand = regexp.MustCompile(`^(curl |[a-z_]+=\$\(curl [^()]*\)(; echo "\$[a-z_]+")?$)`)

// runInShell runs the examples' commands, in order, in one bash with curl
// reaching the program at addr for localhost:8080, and returns what each
// printed (stdout and stderr). "go run . -h" is left to the caller: it
// prints "" here.
func runInShell(t *testing.T, examples []readmeExample, addr string) []string {
	t.Helper()
	dir := t.TempDir()
	curlrc := fmt.Sprintf("connect-to = \"localhost:8080:%s\"\nnoproxy = \"*\"\nmax-time = 30\n", addr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".curlrc"), []byte(curlrc), 0o600))
	var script strings.Builder
	for i, ex := range examples {
		if ex.command == "go run . -h" {
			continue
		}
		require.Regexp(t, shellCommand, ex.command, "%s: the examples run curl only", ex.where())
		fmt.Fprintf(&script, "{ %s\n} >%q 2>&1\n", ex.command, filepath.Join(dir, fmt.Sprintf("out-%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script.String())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "CURL_HOME=" + dir, "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the examples' shell: %s", out)
	outputs := make([]string, len(examples))
	for i, ex := range examples {
		if ex.command == "go run . -h" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out-%d", i)))
		require.NoError(t, err, "%s", ex.where())
		outputs[i] = string(b)
	}
	return outputs
}

// readmeEpoch is the epoch the documents' ETags show: the program's own,
// drawn at random at each start, is written so before the comparison.
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
	return fencedExamples(file, text, "```console")
}

// fencedExamples returns the examples of the blocks of text, the content
// of file, that open with the line fence.
func fencedExamples(file, text, fence string) []readmeExample {
	var examples []readmeExample
	inConsole := false
	for i, line := range strings.Split(text, "\n") {
		switch {
		case line == fence:
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

// The Go examples of docs/clients.md build and pass when copied into a new
// module as the document says: its commands run as written, in a folder
// beside a link named groupmembership to this repository (the "clone" the
// document names), with its two Go files saved in the new module.
func TestClientsDocExamplesBuildInANewModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module with go mod tidy: not in -short")
	}
	text, err := os.ReadFile("docs/clients.md")
	require.NoError(t, err)
	goSection, _, _ := strings.Cut(string(text), "## Other languages")
	blocks := fencedBlocks(goSection)
	require.Len(t, blocks["sh"], 2, "the setup and the build")
	files := map[string]string{}
	for _, code := range blocks["go"] {
		switch {
		case strings.Contains(code, "\nfunc main() {"):
			files["main.go"] = code
		case strings.Contains(code, "\nfunc Test"):
			files["trial_test.go"] = code
		}
	}
	require.Len(t, files, 2, "main.go and trial_test.go")

	root, err := os.Getwd()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(root, filepath.Join(dir, "groupmembership")))
	shell := func(dir, script string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", script, out)
	}
	shell(dir, blocks["sh"][0])
	module := filepath.Join(dir, "mytests")
	for name, code := range files {
		require.NoError(t, os.WriteFile(filepath.Join(module, name), []byte(code), 0o600))
	}
	shell(module, blocks["sh"][1])
}

// fencedBlocks returns the fenced code blocks of a Markdown text, by
// language, in order.
func fencedBlocks(text string) map[string][]string {
	blocks := map[string][]string{}
	lang, in := "", false
	var b strings.Builder
	for line := range strings.Lines(text) {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			lang, in = strings.TrimSpace(strings.TrimPrefix(line, "```")), true
			b.Reset()
		case in && strings.HasPrefix(line, "```"):
			blocks[lang] = append(blocks[lang], b.String())
			in = false
		case in:
			b.WriteString(line)
		}
	}
	return blocks
}
