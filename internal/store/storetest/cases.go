package storetest

import (
	"context"
	"testing"
)

// Case is one case of a part of the store contract: Name is its subtest's
// name, Test its body, given an empty store of its own.
type Case[S any] struct {
	Name string
	Test func(t *testing.T, ctx context.Context, s S)
}

// Run runs cases in order, each as a subtest of t on a store newStore
// makes for it.
func Run[S any](t *testing.T, newStore func(t *testing.T) S, cases []Case[S]) {
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { c.Test(t, ctx, newStore(t)) })
	}
}
