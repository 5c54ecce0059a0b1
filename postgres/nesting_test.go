package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// sub returns a subgroup element with no expiry given.
func sub(id string) membership.Subgroup { return membership.Subgroup{GroupID: id} }

// subUntil returns a subgroup element whose nesting ends at at (zero:
// made permanent).
func subUntil(id string, at time.Time) membership.Subgroup {
	return membership.Subgroup{GroupID: id, Expiry: membership.Expiry{Set: true, At: at}}
}

// A nesting write goes through its row as it was written: its subgroups
// in order, their expiries (none given apart from made permanent), its
// bound on depth, an expire's time; a remove keeps no expiry.
func TestNestingWritesRoundTripTheirRow(t *testing.T) {
	at := time.UnixMilli(1_900_000_000_123).UTC()
	asOf := time.UnixMilli(1_800_000_000_000).UTC()
	for _, tt := range []struct {
		name string
		w    membership.Write
		want membership.Write
	}{
		{name: "add_groups",
			w: membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("z"), subUntil("a", at), subUntil("m", time.Time{})},
				MaxDepth: 7, Actor: 4, If: membership.Precondition{Exists: true}},
			want: membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("z"), subUntil("a", at), subUntil("m", time.Time{})},
				MaxDepth: 7, Actor: 4, If: membership.Precondition{Exists: true}}},
		{name: "replace_groups with no bound and no expiry",
			w:    membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("b")}},
			want: membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("b")}}},
		{name: "replace_groups to none",
			w:    membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", Subgroups: []membership.Subgroup{}, MaxDepth: 3},
			want: membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", Subgroups: []membership.Subgroup{}, MaxDepth: 3}},
		{name: "remove_groups keeps no expiry nor bound",
			w: membership.Write{Op: membership.OpRemoveGroups, GroupID: "p", Subgroups: []membership.Subgroup{subUntil("a", at), sub("b")}, MaxDepth: 5,
				If: membership.Precondition{Revisions: []membership.Revision{1<<64 - 1}}},
			want: membership.Write{Op: membership.OpRemoveGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a"), sub("b")},
				If: membership.Precondition{Revisions: []membership.Revision{1<<64 - 1}}}},
		{name: "expire_groups",
			w:    membership.Write{Op: membership.OpExpireGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a")}, AsOf: asOf},
			want: membership.Write{Op: membership.OpExpireGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a")}, AsOf: asOf}},
		{name: "a bound above the most is the most",
			w:    membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a")}, MaxDepth: membership.MaxMaxDepth + 1},
			want: membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a")}, MaxDepth: membership.MaxMaxDepth}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := changeOf(tt.w)
			require.NoError(t, err)
			assert.Equal(t, "", c.unreadable())
			assert.Equal(t, []int64{}, c.uids, "a nesting row names no uid")
			assert.Equal(t, tt.want, c.write())
		})
	}
}

// A subgroup's TTL is a time in the row: the writer's clock at the write
// plus the TTL.
func TestASubgroupTTLIsATimeInTheRow(t *testing.T) {
	before := time.Now()
	c, err := changeOf(membership.Write{Op: membership.OpAddGroups, GroupID: "p",
		Subgroups: []membership.Subgroup{{GroupID: "a", Expiry: membership.Expiry{Set: true, TTL: time.Hour}}}})
	after := time.Now()
	require.NoError(t, err)
	g := c.write().Subgroups[0]
	require.True(t, g.Expiry.Set)
	assert.Zero(t, g.Expiry.TTL)
	assert.False(t, g.Expiry.At.Before(before.Add(time.Hour).Truncate(time.Millisecond)), "got %v", g.Expiry.At)
	assert.False(t, g.Expiry.At.After(after.Add(time.Hour)), "got %v", g.Expiry.At)
}

// An expire of subgroups without its time is refused before any row.
func TestAnExpireOfSubgroupsWithoutItsTimeIsRefused(t *testing.T) {
	_, err := changeOf(membership.Write{Op: membership.OpExpireGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a")}})
	assert.ErrorContains(t, err, "names no time")
}

// A row read from the log that no writer of this build writes is not
// applied: each is named.
func TestANestingRowThatCannotBeReadIsNamed(t *testing.T) {
	neg, two := int64(-1), int64(2)
	depth, negDepth := int32(3), int32(-1)
	now := time.Now()
	for _, tt := range []struct {
		c    change
		want string
	}{
		{change{op: 8, uids: []int64{}}, "a nesting write without them"},
		{change{op: 1, uids: []int64{1}, subgroups: []string{"a"}}, "subgroups on an op other than a nesting write"},
		{change{op: 8, uids: []int64{1}, subgroups: []string{"a"}}, "uids on a nesting write"},
		{change{op: 9, uids: []int64{}, subgroups: []string{"a"}, subgroupExpiries: []*int64{&two}}, "subgroup expiries on an op other than"},
		{change{op: 8, uids: []int64{}, subgroups: []string{"a"}, subgroupExpiries: []*int64{&two, nil}}, "2 subgroup expiries for 1 subgroups"},
		{change{op: 10, uids: []int64{}, subgroups: []string{"a"}, subgroupExpiries: []*int64{&neg}}, "a subgroup expiry before 1970"},
		{change{op: 9, uids: []int64{}, subgroups: []string{"a"}, maxDepth: &depth}, "a bound on depth of 3 on op remove_groups"},
		{change{op: 8, uids: []int64{}, subgroups: []string{"a"}, maxDepth: &negDepth}, "a bound on depth of -1"},
		{change{op: 9, uids: []int64{}, subgroups: []string{"a"}, maxAncestors: &depth}, "a bound on ancestors of 3 on op remove_groups"},
		{change{op: 10, uids: []int64{}, subgroups: []string{"a"}, maxAncestors: &negDepth}, "a bound on ancestors of -1"},
		{change{op: 11, uids: []int64{}, subgroups: []string{"a"}}, "an expire without its time"},
		{change{op: 9, uids: []int64{}, subgroups: []string{"a"}, asOf: &now}, "a time (as_of) on an op other than expire"},
	} {
		assert.Contains(t, tt.c.unreadable(), tt.want, "%+v", tt.c)
	}
	for _, good := range []change{
		{op: 6, uids: []int64{}, batch: []byte{0}, maxDepth: &depth},
		{op: 11, uids: []int64{}, subgroups: []string{"a"}, asOf: &now},
		{op: 10, uids: []int64{}, subgroups: []string{}, maxDepth: &depth},
	} {
		assert.Equal(t, "", good.unreadable(), "%+v", good)
	}
}

// A batch's nesting writes go through its column as written; what no
// writer writes is refused.
func TestBatchColumnRoundTripsNestingWrites(t *testing.T) {
	at := time.UnixMilli(1_900_000_000_123).UTC()
	ws := []membership.Write{
		{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{sub("a"), subUntil("b", at), subUntil("c", time.Time{})}},
		{Op: membership.OpRemoveGroups, GroupID: "q", Subgroups: []membership.Subgroup{sub("a")}, If: membership.Precondition{Exists: true}},
		{Op: membership.OpReplaceGroups, GroupID: "r", If: membership.Precondition{Revisions: []membership.Revision{9}}},
		{Op: membership.OpAdd, GroupID: "a", Users: storetest.UsersOf(1)},
	}
	got, err := decodeBatch(appendBatch(nil, ws))
	require.NoError(t, err)
	assert.Equal(t, ws, got)
	removeWithExpiry := decodeBatchOf(t, []membership.Write{{Op: membership.OpRemoveGroups, GroupID: "q",
		Subgroups: []membership.Subgroup{subUntil("a", at)}}})
	assert.Equal(t, []membership.Subgroup{sub("a")}, removeWithExpiry[0].Subgroups, "a remove keeps no expiry")
	for _, bad := range [][]byte{
		{1, 11, 1, 'g', 0},               // expire_groups
		{1, 8, 1, 'g', 1, 1, 'a', 2},     // subgroup flags of 2
		{1, 9, 1, 'g', 1, 1, 'a', 1, 5},  // an expiry on a remove
		{1, 8, 1, 'g', 1, 1, 'a', 1},     // an expiry cut short
		{1, 8, 1, 'g', 5, 1, 'a', 0},     // more subgroups than the column holds
		{1, 10, 1, 'g', 1, 1, 'a', 0, 0}, // trailing bytes
	} {
		_, err := decodeBatch(bad)
		assert.Error(t, err, "% x", bad)
	}
}

func decodeBatchOf(t *testing.T, ws []membership.Write) []membership.Write {
	t.Helper()
	got, err := decodeBatch(appendBatch(nil, ws))
	require.NoError(t, err)
	return got
}

// A batch's bound on depth is its row's, and its subgroups' TTLs are times.
func TestABatchRowCarriesItsBoundOnDepth(t *testing.T) {
	c := batchChange(membership.Batch{MaxDepth: 4, Writes: []membership.Write{{Op: membership.OpAddGroups, GroupID: "p",
		Subgroups: []membership.Subgroup{{GroupID: "a", Expiry: membership.Expiry{Set: true, TTL: time.Minute}}}}}})
	require.NotNil(t, c.maxDepth)
	assert.Equal(t, int32(4), *c.maxDepth)
	ws, err := decodeBatch(c.batch)
	require.NoError(t, err)
	b := c.batchOf(ws)
	assert.Equal(t, 4, b.MaxDepth)
	assert.Zero(t, b.Writes[0].Subgroups[0].Expiry.TTL)
	assert.False(t, b.Writes[0].Subgroups[0].Expiry.At.IsZero())
	assert.Nil(t, batchChange(membership.Batch{}).maxDepth, "no bound: NULL")
}

// The database refuses nesting rows that no writer writes.
func TestTheLogRefusesNestingRowsItCannotApply(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, 0)
	for _, bad := range []struct {
		sql, constraint string
	}{
		{"INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, 8, 'g', '{}')", "membership_changes_subgroups_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups) VALUES (1, 1, 'g', '{1}', '{a}')", "membership_changes_subgroups_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups) VALUES (1, 8, 'g', '{1}', '{a}')", "membership_changes_subgroups_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups) VALUES (1, 8, 'g', '{}', '{a,NULL}')", "membership_changes_subgroups_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, subgroup_expiries) VALUES (1, 9, 'g', '{}', '{a}', '{5}')", "membership_changes_subgroup_expiries_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, subgroup_expiries) VALUES (1, 8, 'g', '{}', '{a}', '{5,6}')", "membership_changes_subgroup_expiries_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, subgroup_expiries) VALUES (1, 10, 'g', '{}', '{a}', '{-5}')", "membership_changes_subgroup_expiries_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, max_depth) VALUES (1, 9, 'g', '{}', '{a}', 3)", "membership_changes_max_depth_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, max_depth) VALUES (1, 8, 'g', '{}', '{a}', -1)", "membership_changes_max_depth_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, max_ancestors) VALUES (1, 9, 'g', '{}', '{a}', 3)", "membership_changes_max_ancestors_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, max_ancestors) VALUES (1, 10, 'g', '{}', '{a}', -1)", "membership_changes_max_ancestors_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups) VALUES (1, 11, 'g', '{}', '{a}')", "membership_changes_as_of_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, as_of) VALUES (1, 9, 'g', '{}', '{a}', now())", "membership_changes_as_of_check"},
		{"INSERT INTO membership_changes (ticket, op, group_id, uids) VALUES (1, 15, 'g', '{}')", "membership_changes_op_check"},
	} {
		_, err := s.pool.Exec(ctx, bad.sql)
		assert.ErrorContains(t, err, bad.constraint, bad.sql)
	}
	assert.Zero(t, logRows(t, s))
	for _, good := range []string{
		"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, subgroup_expiries, max_depth) VALUES (1, 8, 'g', '{}', '{a,b,c}', '{5,NULL,0}', 32)",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups) VALUES (1, 10, 'g', '{}', '{}')",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, as_of) VALUES (1, 11, 'g', '{}', '{a}', now())",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, batch, max_depth) VALUES (1, 6, '', '{}', '\\x00', 0)",
		"INSERT INTO membership_changes (ticket, op, group_id, uids, subgroups, max_depth, max_ancestors) VALUES (1, 8, 'g', '{}', '{a}', 32, 1000)",
	} {
		_, err := s.pool.Exec(ctx, good)
		assert.NoError(t, err, good)
	}
}
