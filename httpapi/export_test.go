package httpapi

import (
	"net/http"

	"example.com/groupmembership/membership"
)

// NewHandler returns the handler of the whole HTTP API over svc, loaded,
// with a store that reports nothing to /metrics: the tests' shorthand for
// NewLoadingHandler and Load.
func NewHandler(svc *membership.Service, opts Options) http.Handler {
	h := NewLoadingHandler(opts)
	h.Load(svc, StoreExtras{})
	return h
}
