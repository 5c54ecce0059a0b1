package access

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership/scope"
)

func TestHashTokenIsTheHexSHA256(t *testing.T) {
	assert.Equal(t, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", HashToken("test"))
}

// aclOf returns an ACL file's text with a line for each of lines, in
// which each "<token:T>" is the secret of the token T.
func aclOf(lines ...string) []byte {
	text := "# name secret rights groups\n\n"
	for _, l := range lines {
		for {
			start := strings.Index(l, "<token:")
			if start < 0 {
				break
			}
			end := strings.Index(l[start:], ">") + start
			l = l[:start] + HashToken(l[start+len("<token:"):end]) + l[end+1:]
		}
		text += l + "\n"
	}
	return []byte(text)
}

func TestParseGivesEachPrincipalItsScope(t *testing.T) {
	principals, err := Parse("acl", aclOf(
		"sync-job   <token:s1>  read,write  team-a/* team-b",
		"  dashboard\t<token:d1>\tread  *  ",
		"billing    mtls        read        billing/*",
		"ops        <token:o1>  admin       *",
		"spaces     <token:x1>  write       team%20a %2A* star%2A",
	))
	require.NoError(t, err)
	require.Len(t, principals, 5)
	rules, err := NewRules(principals...)
	require.NoError(t, err)
	assert.Equal(t, 5, rules.Len())

	sync := rules.ByToken("s1")
	require.NotNil(t, sync)
	assert.Equal(t, "sync-job", sync.Name)
	assert.True(t, sync.Scope.Allows(scope.Write, "team-a/x"))
	assert.True(t, sync.Scope.Allows(scope.Write, "team-b"))
	assert.False(t, sync.Scope.Allows(scope.Read, "team-bb"))
	assert.Equal(t, "dashboard", rules.ByToken("d1").Name)
	assert.True(t, rules.ByToken("d1").Scope.AllowsAll(scope.Read))
	assert.False(t, rules.ByToken("d1").Scope.Allows(scope.Write, "x"))
	assert.True(t, rules.ByToken("o1").Scope.AllowsAll(scope.Admin))
	assert.Nil(t, rules.ByToken("nobody's"))
	assert.Nil(t, rules.ByToken(""))
	assert.Nil(t, rules.ByToken("billing"), "an mtls principal has no token")

	billing := rules.ByCertificate("billing")
	require.NotNil(t, billing)
	assert.True(t, billing.Scope.Allows(scope.Read, "billing/eu"))
	assert.Nil(t, rules.ByCertificate("sync-job"), "a principal of a token has no certificate")

	spaces := rules.ByToken("x1").Scope
	assert.True(t, spaces.Allows(scope.Write, "team a"))
	assert.True(t, spaces.Allows(scope.Write, "*x"), "%2A* is a prefix of a star")
	assert.True(t, spaces.Allows(scope.Write, "star*"), "star%2A is the id star*")
	assert.False(t, spaces.Allows(scope.Write, "stars"))
}

func TestParseRefusesABadLineNamingItsFileLineAndWhy(t *testing.T) {
	const secret = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tests := []struct {
		name, line, want string
	}{
		{"too few fields", "sync-job " + secret + " read", "acl:3: 3 fields, not name, secret, rights and groups"},
		{"an unknown right", "sync-job " + secret + " read,rwx team-a", `acl:3: unknown right "rwx": the rights are read, write and admin, joined by commas`},
		{"a token for a secret", "sync-job hunter2-plain read team-a", "acl:3: malformed secret: a secret is sha256: and 64 hex digits (membership -hash-token prints it), or mtls"},
		{"a short hash", "sync-job " + secret[:70] + " read team-a", "acl:3: malformed secret: a secret is sha256: and 64 hex digits (membership -hash-token prints it), or mtls"},
		{"a hash too long", "sync-job " + secret + "00 read team-a", "acl:3: malformed secret: a secret is sha256: and 64 hex digits (membership -hash-token prints it), or mtls"},
		{"a name with a slash", "a/b " + secret + " read team-a", `acl:3: principal name "a/b" has byte 0x2f at 1: it may hold ASCII letters, digits and . _ - @ : only`},
		{"the token's name", "token " + secret + " read team-a", "acl:3: the name token is the principal of -token-file and MEMBERSHIP_TOKEN: give this one another"},
		{"a bad group", "sync-job " + secret + " read team%zz", `acl:3: group "team%zz" is not percent-escaped right: invalid URL escape "%zz"`},
		{"a control character", "sync-job " + secret + " read team%01a", `acl:3: group "team%01a": group id has control character U+0001 at byte 4`},
		{"an admin of some groups", "ops " + secret + " admin team-a/*", "acl:3: admin is every group: give * as its groups"},
		{"a long name", strings.Repeat("n", 65) + " " + secret + " read x", "acl:3: principal name of 65 bytes: it must be 1 to 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("acl", aclOf(tt.line))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			assert.NotContains(t, err.Error(), "hunter2", "never a secret in an error")
		})
	}

	_, err := Parse("acl", []byte("# only comments\n\n"))
	assert.EqualError(t, err, "acl: no principal: an ACL file gives one a line, name secret rights groups (is the file the one meant?)")
	_, err = Parse("acl", make([]byte, MaxFileBytes+1))
	assert.EqualError(t, err, "acl: 1048577 bytes, more than an ACL file may have (1048576)")
}

func TestRulesRefuseANameOrASecretGivenTwice(t *testing.T) {
	principals, err := Parse("acl", aclOf("a <token:t1> read x", "b <token:t2> read x", "a <token:t3> read y"))
	require.NoError(t, err)
	_, err = NewRules(principals...)
	assert.EqualError(t, err, `acl:5: principal "a" is given at acl:3 too: give each principal once`)

	principals, err = Parse("acl", aclOf("a <token:t1> read x", "b <token:t1> write y"))
	require.NoError(t, err)
	_, err = NewRules(principals...)
	assert.EqualError(t, err, `acl:4: principal "b" has the same secret as principal "a" (acl:3): give each principal a token of its own`)

	principals, err = Parse("acl", aclOf("a <token:t1> read x"))
	require.NoError(t, err)
	_, err = NewRules(append(principals, TokenPrincipal("t1", "-token-file"))...)
	assert.EqualError(t, err, `-token-file: principal "token" has the same secret as principal "a" (acl:3): give each principal a token of its own`)
}

func TestCheckTokenRefusesWhatNoHeaderCarries(t *testing.T) {
	require.NoError(t, CheckToken("s3cret"))
	assert.EqualError(t, CheckToken(""), "is empty")
	assert.EqualError(t, CheckToken("a b"), `has a character no HTTP header can carry after "Bearer " (' ' at byte 1): a token is one line of printable characters`)
}

// writeFile writes text into a new file at path, by a rename, as an
// editor or a secret's update does.
func writeFile(t *testing.T, path string, text []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, text, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func TestOpenRefusesABadFileAndAFileOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acl")
	writeFile(t, path, aclOf("a <token:t1> read,rwx x"))
	_, err := Open(Source{ACLFile: path})
	assert.EqualError(t, err, path+`:3: unknown right "rwx": the rights are read, write and admin, joined by commas`)

	_, err = Open(Source{ACLFile: filepath.Join(dir, "missing")})
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = Open(Source{})
	assert.ErrorIs(t, err, errNotConfigured)

	if runtime.GOOS == "windows" {
		t.Skip("Windows has no mode bits for others")
	}
	writeFile(t, path, aclOf("a <token:t1> read x"))
	require.NoError(t, os.Chmod(path, 0o666))
	_, err = Open(Source{ACLFile: path})
	assert.EqualError(t, err, path+": others can write it (mode -rw-rw-rw-), and so give themselves any right: chmod o-w "+path)
	require.NoError(t, os.Chmod(path, 0o664))
	_, err = Open(Source{ACLFile: path})
	require.NoError(t, err, "the group may write it")
}

func TestTokenFromAFileOrTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(path, []byte("  s3cret\n"), 0o600))
	l, err := Open(Source{TokenFile: path, Token: "ignored", TokenSet: true})
	require.NoError(t, err)
	p := l.Rules().ByToken("s3cret")
	require.NotNil(t, p, "the file wins over the variable, trimmed")
	assert.Equal(t, TokenPrincipalName, p.Name)
	assert.True(t, p.Scope.AllowsAll(scope.Admin))

	l, err = Open(Source{Token: "env-token", TokenSet: true})
	require.NoError(t, err)
	assert.NotNil(t, l.Rules().ByToken("env-token"))

	_, err = Open(Source{Token: "  ", TokenSet: true})
	assert.EqualError(t, err, "MEMBERSHIP_TOKEN is set but blank: give it the token, or unset it to run without one")
	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	_, err = Open(Source{TokenFile: path})
	assert.EqualError(t, err, "the token file "+path+" is empty: write the token into it, or run without -token-file")
	require.NoError(t, os.WriteFile(path, []byte("two words"), 0o600))
	_, err = Open(Source{TokenFile: path})
	assert.EqualError(t, err, "the token in "+path+` has a character no HTTP header can carry after "Bearer " (' ' at byte 3): a token is one line of printable characters`)
	assert.NotContains(t, err.Error(), "words", "never a token in an error")
}

func TestReloadReplacesTheRulesWholeOrKeepsThem(t *testing.T) {
	dir := t.TempDir()
	acl, token := filepath.Join(dir, "acl"), filepath.Join(dir, "token")
	writeFile(t, acl, aclOf("old <token:old-1> write team-a/*"))
	writeFile(t, token, []byte("admin-1"))
	l, err := Open(Source{ACLFile: acl, TokenFile: token})
	require.NoError(t, err)
	before := l.Rules()
	assert.False(t, l.Changed())

	writeFile(t, acl, aclOf("new <token:new-1> write team-a/*"))
	assert.True(t, l.Changed())
	n, err := l.Reload()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.False(t, l.Changed())
	assert.Nil(t, l.Rules().ByToken("old-1"), "a rotated secret stops at once")
	assert.Equal(t, "new", l.Rules().ByToken("new-1").Name)
	assert.Equal(t, "old", before.ByToken("old-1").Name, "rules taken before the reload stay as they were")

	writeFile(t, token, []byte("admin-2"))
	assert.True(t, l.Changed(), "the token file is watched too")
	_, err = l.Reload()
	require.NoError(t, err)
	assert.Nil(t, l.Rules().ByToken("admin-1"))
	assert.NotNil(t, l.Rules().ByToken("admin-2"))

	good := l.Rules()
	writeFile(t, acl, aclOf("new <token:new-1> write,bogus team-a/*"))
	_, err = l.Reload()
	assert.EqualError(t, err, acl+`:3: unknown right "bogus": the rights are read, write and admin, joined by commas`)
	assert.Same(t, good, l.Rules(), "a failed reload keeps the rules in force")
	assert.False(t, l.Changed(), "a failed reload is not tried again until the file changes")
	require.NoError(t, os.Remove(acl))
	assert.True(t, l.Changed(), "a file removed is a change")
	_, err = l.Reload()
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Same(t, good, l.Rules())
	assert.Equal(t, uint64(2), l.reloads.Load())
	assert.Equal(t, uint64(2), l.failures.Load())
	assert.True(t, l.failing.Load())
}

func TestWatchReloadsOnASignalAndOnAChangedFile(t *testing.T) {
	dir := t.TempDir()
	acl := filepath.Join(dir, "acl")
	writeFile(t, acl, aclOf("one <token:t1> read *"))
	l, err := Open(Source{ACLFile: acl})
	require.NoError(t, err)
	ticks := make(chan time.Time)
	hup := make(chan os.Signal)
	type report struct {
		why string
		n   int
		err error
	}
	// Buffered: a reload that should not have run is read, in order, as
	// the report it is, rather than holding the watcher.
	reports := make(chan report, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Watch(ctx, ticks, hup, func(why string, n int, err error) { reports <- report{why, n, err} })
	}()
	defer func() { cancel(); <-done }()

	// The file is written before the tick is sent: a send returns once the
	// watcher has the tick, before it looks at the file, so a write after
	// it would race with that look.
	writeFile(t, acl, aclOf("one <token:t1> read *", "two <token:t2> read *"))
	ticks <- time.Time{}
	r := <-reports
	assert.Equal(t, report{"changed", 2, nil}, r)
	assert.NotNil(t, l.Rules().ByToken("t2"))

	ticks <- time.Time{} // nothing changed since: no reload
	hup <- os.Interrupt  // any signal the caller relays; sent once the tick is done
	r = <-reports
	assert.Equal(t, report{"signal", 2, nil}, r, "the tick with nothing changed reloaded nothing")
}

func TestAReloadRefusedForTheModeIsTriedAgainOnceTheModeIsFixed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no mode bits for others")
	}
	path := filepath.Join(t.TempDir(), "acl")
	writeFile(t, path, aclOf("a <token:t1> read x"))
	l, err := Open(Source{ACLFile: path})
	require.NoError(t, err)

	writeFile(t, path, aclOf("a <token:t2> read x"))
	require.NoError(t, os.Chmod(path, 0o666))
	_, err = l.Reload()
	require.Error(t, err, "others can write it")
	assert.False(t, l.Changed())

	// The fix the error names, chmod o-w, changes neither the content nor
	// the modification time: the poll must see it all the same.
	require.NoError(t, os.Chmod(path, 0o644))
	assert.True(t, l.Changed(), "a change of the mode is a change")
	_, err = l.Reload()
	require.NoError(t, err)
	assert.NotNil(t, l.Rules().ByToken("t2"))
}
