package access

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/metrics"
)

// Source is where the principals come from: an ACL file, and the
// service's token, from a file or else the environment.
type Source struct {
	// ACLFile is the ACL file (-acl-file, MEMBERSHIP_ACL_FILE); "" for
	// none.
	ACLFile string
	// ACL is an ACL file's content given in place of ACLFile (an embedded
	// service's); nil for none.
	ACL []byte
	// TokenFile is the file of the token (-token-file); "" for none.
	TokenFile string
	// Token is MEMBERSHIP_TOKEN's value, or the token an embedded service
	// is given, used when TokenFile is ""; TokenSet says it is set, blank
	// or not.
	Token    string
	TokenSet bool
	// TokenName names where Token comes from, for errors:
	// "MEMBERSHIP_TOKEN" when "".
	TokenName string
}

// Configured reports whether src gives any credential: without one, the
// service has no principal, and needs none.
func (src Source) Configured() bool {
	return src.ACLFile != "" || src.ACL != nil || src.TokenFile != "" || src.TokenSet
}

// files returns the files src reads, which a change of is a reason to
// reload.
func (src Source) files() []string {
	var files []string
	for _, f := range []string{src.ACLFile, src.TokenFile} {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// load reads the rules of src.
func (src Source) load() (*Rules, error) {
	var principals []*Principal
	token, where, err := src.token()
	if err != nil {
		return nil, err
	}
	if token != "" {
		principals = append(principals, TokenPrincipal(token, where))
	}
	if src.ACLFile != "" || src.ACL != nil {
		name, text := src.ACLFile, src.ACL
		if name == "" {
			name = "the ACL"
		} else if text, err = readACLFile(name); err != nil {
			return nil, err
		}
		parsed, err := Parse(name, text)
		if err != nil {
			return nil, err
		}
		principals = append(principals, parsed...)
	}
	return NewRules(principals...)
}

// token returns the service's token, "" for none, and where it comes from.
// A file or a variable that is there but blank is refused: a token meant
// but lost (an unset variable substituted, an empty secret mounted) must
// not turn auth off.
func (src Source) token() (token, where string, err error) {
	var blank string // the error of a blank token
	switch {
	case src.TokenFile != "":
		b, err := os.ReadFile(src.TokenFile)
		if err != nil {
			return "", "", fmt.Errorf("reading the token: %w", err)
		}
		token, where = string(b), src.TokenFile
		blank = "the token file " + where + " is empty: write the token into it, or run without -token-file"
	case src.TokenSet:
		token, where = src.Token, cmp.Or(src.TokenName, "MEMBERSHIP_TOKEN")
		blank = where + " is set but blank: give it the token, or unset it to run without one"
	default:
		return "", "", nil
	}
	if token = strings.TrimSpace(token); token == "" {
		return "", "", errors.New(blank)
	}
	if err := CheckToken(token); err != nil {
		return "", "", fmt.Errorf("the token in %s %w", where, err)
	}
	return token, where, nil
}

// readACLFile returns the content of the ACL file name, refusing one that
// others can write: anyone on the machine could give themselves any right.
func readACLFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("reading the ACL file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the ACL file: %w", err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("%s: others can write it (mode %v), and so give themselves any right: chmod o-w %s", name, info.Mode().Perm(), name)
	}
	text, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the ACL file: %w", err)
	}
	return text, nil
}

// Live holds the rules in force, and replaces them whole on a reload. A
// request reads them once (Rules), and keeps those to its end, whatever
// reload comes meanwhile.
type Live struct {
	src   Source
	rules atomic.Pointer[Rules]
	// mu makes reloads one at a time, and guards stamps: what the files
	// were when they were last read.
	mu     sync.Mutex
	stamps []stamp

	reloads, failures atomic.Uint64
	failing           atomic.Bool
}

// Open returns the rules of src, in force; src must be Configured.
//
// Errors: those of a file that cannot be read, or whose content is
// refused, naming the file, the line and why.
func Open(src Source) (*Live, error) {
	if !src.Configured() {
		return nil, errNotConfigured
	}
	l := &Live{src: src}
	l.stamps = stampsOf(src.files())
	rules, err := src.load()
	if err != nil {
		return nil, err
	}
	l.rules.Store(rules)
	return l, nil
}

// Rules returns the rules in force.
func (l *Live) Rules() *Rules { return l.rules.Load() }

// Reload reads the files again and puts their rules in force, and
// returns how many principals they have. When they cannot be read, or
// are refused, the rules in force stay, and the error says why.
func (l *Live) Reload() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stamps = stampsOf(l.src.files()) // before the read: a change during it is seen next time
	rules, err := l.src.load()
	if err != nil {
		l.failures.Add(1)
		l.failing.Store(true)
		return 0, err
	}
	l.rules.Store(rules)
	l.reloads.Add(1)
	l.failing.Store(false)
	return rules.Len(), nil
}

// Changed reports whether a file of the rules changed since it was last
// read: its modification time, its size, its mode (a file refused because
// others could write it is read again once they cannot), the file the name
// leads to (a file renamed over it, a symbolic link swapped, as a
// Kubernetes secret is), or whether it is there at all.
func (l *Live) Changed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !slices.EqualFunc(stampsOf(l.src.files()), l.stamps, stamp.same)
}

// stamp is what a file was: nil info when it could not be read.
type stamp struct{ info os.FileInfo }

func stampsOf(files []string) []stamp {
	stamps := make([]stamp, len(files))
	for i, f := range files {
		stamps[i].info, _ = os.Stat(f)
	}
	return stamps
}

func (s stamp) same(o stamp) bool {
	if s.info == nil || o.info == nil {
		return s.info == nil && o.info == nil
	}
	return s.info.ModTime().Equal(o.info.ModTime()) && s.info.Size() == o.info.Size() && s.info.Mode() == o.info.Mode() &&
		os.SameFile(s.info, o.info)
}

// Watch reloads the rules on each signal of reload (SIGHUP), and on each
// tick of ticks when a file changed (Changed), until ctx ends, and tells
// report of each reload: why it ran ("signal" or "changed"), and what
// Reload returned.
func (l *Live) Watch(ctx context.Context, ticks <-chan time.Time, reload <-chan os.Signal, report func(why string, principals int, err error)) {
	for {
		why := "signal"
		select {
		case <-ctx.Done():
			return
		case <-reload:
		case <-ticks:
			if !l.Changed() {
				continue
			}
			why = "changed"
		}
		n, err := l.Reload()
		report(why, n, err)
	}
}

// WriteMetrics writes the principals in force and the reloads to /metrics.
func (l *Live) WriteMetrics(w *metrics.Writer) {
	w.Gauge("membership_access_principals", "The principals in force: of the ACL file (-acl-file) and of the token (-token-file).", float64(l.Rules().Len()))
	w.Family("membership_access_reloads_total", "counter", "Reloads of the ACL and token files (on SIGHUP, or a change of a file), by result: a failed one keeps the rules in force.")
	w.Sample("membership_access_reloads_total", []metrics.Label{{Name: "result", Value: "ok"}}, float64(l.reloads.Load()))
	w.Sample("membership_access_reloads_total", []metrics.Label{{Name: "result", Value: "failed"}}, float64(l.failures.Load()))
	failing := 0.0
	if l.failing.Load() {
		failing = 1
	}
	w.Gauge("membership_access_reload_failing", "1 when the last reload of the ACL and token files failed: the rules in force are older than the files.", failing)
}

// errNotConfigured is Open's error for a Source without credentials.
var errNotConfigured = errors.New("access: no ACL file and no token")
