package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/durable"
	"example.com/groupmembership/membership"
)

// expireChanges returns the groups and uids of the expire changes of the
// feed.
func expireChanges(t *testing.T, base string) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	for _, c := range feed(t, base, 0) {
		if c["op"] == string(membership.OpExpire) {
			out[c["group"].(string)] = c["uids"].([]any)
		}
	}
	return out
}

// Memberships whose expiry passed while the program was down are ended as
// it starts, after it loads its data and before it answers a read, one
// change per group; the changes are logged, so a start after a kill -9
// replays them.
func TestTheBinaryEndsWhatExpiredWhileItWasDown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The state is written with the store, as a program that was stopped
	// before the expiries came would have left it.
	d, err := durable.Open(dir, durable.Options{})
	require.NoError(t, err)
	past := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Second)
	later := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	expiring := func(uid membership.UID, at time.Time) membership.User {
		return membership.User{UID: uid, Expiry: membership.Expiry{Set: true, At: at}}
	}
	for _, w := range []membership.Write{
		{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{expiring(7, past), {UID: 8}, expiring(9, later)}},
		{Op: membership.OpAdd, GroupID: "h", Users: []membership.User{expiring(7, past)}},
	} {
		_, err := d.Write(ctx, w)
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())

	p := startProcess(t, "-data-dir", dir)
	assert.Equal(t, map[int64]bool{8: true, 9: true}, members(t, p.base, "g"), "the first read")
	assert.Empty(t, members(t, p.base, "h"))
	assert.Contains(t, p.logs.String(), "ended the memberships that expired while the service was down")
	want := map[string][]any{"g": {float64(7)}, "h": {float64(7)}}
	assert.Equal(t, want, expireChanges(t, p.base))

	require.NoError(t, p.cmd.Process.Kill()) // SIGKILL: no flush, no goodbye
	_ = p.cmd.Wait()
	p = startProcess(t, "-data-dir", dir)
	assert.Equal(t, map[int64]bool{8: true, 9: true}, members(t, p.base, "g"))
	assert.Empty(t, members(t, p.base, "h"))
	assert.Equal(t, want, expireChanges(t, p.base), "the expire changes replayed")
	assert.NotContains(t, p.logs.String(), "ended the memberships", "nothing was due again")
}

// Nestings that ended while the program was down are ended as it starts,
// before it answers a read, with an expire_groups change logged as any
// change: a start after a kill -9 replays it, and nothing is due again.
func TestTheBinaryEndsNestingsThatEndedWhileItWasDown(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := durable.Open(dir, durable.Options{})
	require.NoError(t, err)
	past := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Second)
	later := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	_, err = d.Write(ctx, membership.Write{Op: membership.OpAddGroups, GroupID: "g", Subgroups: []membership.Subgroup{
		{GroupID: "a", Expiry: membership.Expiry{Set: true, At: past}}, {GroupID: "b"}, {GroupID: "c", Expiry: membership.Expiry{Set: true, At: later}}}})
	require.NoError(t, err)
	require.NoError(t, d.Close())

	expired := func(base string) []any {
		var groups []any
		for _, c := range feed(t, base, 0) {
			if c["op"] == string(membership.OpExpireGroups) {
				groups = append(groups, c["groups"])
			}
		}
		return groups
	}
	p := startProcess(t, "-data-dir", dir)
	assert.Equal(t, []string{"b", "c"}, subgroupsOf(t, p.base, "g"), "the first read")
	want := []any{[]any{map[string]any{"group": "a"}}}
	assert.Equal(t, want, expired(p.base))

	require.NoError(t, p.cmd.Process.Kill()) // SIGKILL: no flush, no goodbye
	_ = p.cmd.Wait()
	p = startProcess(t, "-data-dir", dir)
	assert.Equal(t, []string{"b", "c"}, subgroupsOf(t, p.base, "g"))
	assert.Equal(t, want, expired(p.base), "the expire_groups change replayed, and no other")
}
