package httpapi_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/internal/accesslog"
	"example.com/groupmembership/membership"
)

// BenchmarkCredentialCheck measures what a credential costs the two hot
// paths, a cached GET of 10 members and a POST of 3 users, as
// BenchmarkHandler runs them, with -auth-reads so that both check it:
// without principals (none), with the token of -token-file (token, an
// admin), and with the token of a principal of an ACL file of n
// principals, allowed the groups g* (acl-n: every principal's hash is
// compared, and the scope holds the request).
func BenchmarkCredentialCheck(b *testing.B) {
	opts := func(rules *access.Rules) httpapi.Options {
		o := httpapi.Options{ListCacheBytes: httpapi.DefaultListCacheBytes, AccessLog: true, AccessLines: accesslog.New(io.Discard, false)}
		if rules != nil {
			o.Access, o.AuthReads = func() *access.Rules { return rules }, true
		}
		return o
	}
	run := func(name string, rules *access.Rules, auth string) {
		h := httpapi.NewHandler(membership.NewService(&nullStore{Store: storeOfTen(b)}, membership.ServiceOptions{}), opts(rules))
		benchHotPathsAs(b, name, h, auth)
	}
	run("none", nil, "")
	token, err := access.NewRules(access.TokenPrincipal("s3cret-t0ken", "-token-file"))
	if err != nil {
		b.Fatal(err)
	}
	run("token", token, "Bearer s3cret-t0ken")
	for _, n := range []int{10, 1000} {
		var acl strings.Builder
		for i := range n {
			fmt.Fprintf(&acl, "app-%d %s read,write g*\n", i, access.HashToken(fmt.Sprintf("app-%d-token", i)))
		}
		principals, err := access.Parse("acl", []byte(acl.String()))
		if err != nil {
			b.Fatal(err)
		}
		rules, err := access.NewRules(principals...)
		if err != nil {
			b.Fatal(err)
		}
		run(fmt.Sprintf("acl-%d", n), rules, fmt.Sprintf("Bearer app-%d-token", n/2))
	}
}
