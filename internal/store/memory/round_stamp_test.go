package memory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// WriteExpiries applies its writes as Write would: each change carries its
// write's Actor, and its Time when it gives one.
func TestWriteExpiriesKeepsActorAndTime(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	add := membership.Write{Op: membership.OpAdd, GroupID: "g", Time: at.Add(-time.Hour),
		Users: []membership.User{{UID: 1, Expiry: membership.Expiry{Set: true, At: at}}, {UID: 2, Expiry: membership.Expiry{Set: true, At: at}}}}
	expire := func(uid membership.UID) membership.Write {
		return membership.Write{Op: membership.OpExpire, GroupID: "g", UIDs: []membership.UID{uid}, AsOf: at, Actor: 42, Time: at.Add(time.Minute)}
	}
	one, together := twins(Options{ChangesKeep: membership.DefaultChangesKeep})
	for _, m := range []*Store{one, together} {
		_, err := m.Apply(add)
		require.NoError(t, err)
	}
	for _, uid := range []membership.UID{1, 2} {
		_, err := one.Write(ctx, expire(uid))
		require.NoError(t, err)
	}
	_, err := together.WriteExpiries(ctx, []membership.Write{expire(1), expire(2)})
	require.NoError(t, err)
	want, _, err := one.Changes(ctx, membership.ChangeOptions{})
	require.NoError(t, err)
	got, _, err := together.Changes(ctx, membership.ChangeOptions{})
	require.NoError(t, err)
	require.Equal(t, want, got)
}
