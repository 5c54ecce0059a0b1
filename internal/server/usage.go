package server

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// flagSections are the sections of -h, in order, with their flags: first,
// untitled, the five a first user needs; then the rest by what they are
// about. A command's own flags (a backend's) go into the first, after
// -addr, where -data-dir is for membership.
var flagSections = []struct {
	title string
	flags []string
}{
	{"", []string{"addr", "data-dir", "token-file", "acl-file", "admin-addr"}},
	{"Limits and budgets", []string{"max-body", "max-users", "max-checks", "max-batch", "max-depth", "max-ancestors", "max-header", "max-conns",
		"header-memory", "body-memory", "reply-memory", "list-cache", "conn-send-buffer"}},
	{"Durability (with -data-dir)", []string{"snapshot-bytes", "commit-timeout", "commit-queue-bytes", "repair"}},
	{"The change feed (/changes)", []string{"changes-keep", "changes-keep-bytes", "changes-reply-bytes", "max-waiters"}},
	{"Safe retries (Idempotency-Key)", []string{"idempotency-bytes", "idempotency-retention"}},
	{"TLS (the files are loaded again on SIGHUP, and when they change)", []string{"tls-cert", "tls-key", "tls-client-ca"}},
	{"Auth, logs and monitoring", []string{"auth-reads", "log-format", "access-log", "log-buffer", "metrics", "pprof"}},
	{"Stopping (SIGTERM, SIGINT)", []string{"shutdown-delay", "shutdown-timeout"}},
	{"Modes that do one thing and exit", []string{"probe", "restore", "hash-token", "version"}},
}

// flagsDoc is where every flag is explained in full.
const flagsDoc = "docs/operating.md#flags"

// writeUsage writes -h: name's usage, about (a paragraph), then fs's flags
// but the hidden ones, by flagSections, one line each; own are the
// command's own flags.
func writeUsage(w io.Writer, fs *flag.FlagSet, name, about string, own []string, hidden map[string]bool) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n", name, wrap(about, 80))
	placed := map[string]bool{}
	for i, section := range flagSections {
		names := section.flags
		if i == 0 {
			names = slices.Concat(names[:1], own, names[1:])
		}
		var flags []*flag.Flag
		for _, n := range names {
			if f := fs.Lookup(n); f != nil && !hidden[n] {
				flags = append(flags, f)
			}
			placed[n] = true
		}
		writeFlagSection(w, section.title, flags)
	}
	var rest []*flag.Flag // none, unless a flag was added and not placed
	fs.VisitAll(func(f *flag.Flag) {
		if !placed[f.Name] && !hidden[f.Name] {
			rest = append(rest, f)
		}
	})
	writeFlagSection(w, "Other", rest)
	fmt.Fprintf(w, "\nEvery flag in full: %s\n", flagsDoc)
}

// writeFlagSection writes a section of -h: its title, when it has one,
// then each flag on a line, its description in a column.
func writeFlagSection(w io.Writer, title string, flags []*flag.Flag) {
	if len(flags) == 0 {
		return
	}
	fmt.Fprintln(w)
	if title != "" {
		fmt.Fprintf(w, "%s:\n", title)
	}
	heads := make([]string, len(flags))
	width := 0
	for i, f := range flags {
		argName, _ := flag.UnquoteUsage(f)
		heads[i] = strings.TrimSpace("-" + f.Name + " " + argName)
		width = max(width, len(heads[i]))
	}
	for i, f := range flags {
		_, usage := flag.UnquoteUsage(f)
		if !zeroDefault(f.DefValue) {
			def := f.DefValue
			if _, isString := f.Value.(flag.Getter).Get().(string); isString {
				def = fmt.Sprintf("%q", def)
			}
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, heads[i], usage)
	}
}

// zeroDefault reports whether a flag's default, as text, is its type's
// zero value, which -h does not show.
func zeroDefault(def string) bool {
	return def == "" || def == "0" || def == "false" || def == "0s"
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
