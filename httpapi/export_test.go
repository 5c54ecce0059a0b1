package httpapi

import (
	"net/http"

	"example.com/groupmembership/internal/access"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"
)

// NewHandler returns the handler of the whole HTTP API over svc, loaded,
// with a store that reports nothing to /metrics: the tests' shorthand for
// NewLoadingHandler and Load.
func NewHandler(svc *membership.Service, opts Options) http.Handler {
	h := NewLoadingHandler(opts)
	h.Load(svc, StoreExtras{})
	return h
}

// NewDirectoryHandler is NewHandler with the directory of store, svc's
// store, which the SCIM routes read.
func NewDirectoryHandler(svc *membership.Service, store directory.Reader, opts Options) http.Handler {
	h := NewLoadingHandler(opts)
	h.Load(svc, StoreExtras{Directory: store})
	return h
}

// TokenOnly returns Options.Access of a service whose one principal is
// its token, as -token-file gives it.
func TokenOnly(token string) func() *access.Rules {
	rules, err := access.NewRules(access.TokenPrincipal(token, "-token-file"))
	if err != nil {
		panic(err)
	}
	return func() *access.Rules { return rules }
}
