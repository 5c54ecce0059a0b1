package snap

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// nestingState returns a state with groups in groups: a parent with no
// member of its own, a nesting that ends, and the feed's changes of every
// nesting op, alone and in a batch.
func nestingState() *State {
	at := time.Date(2026, 11, 24, 23, 59, 1, 123e6, time.UTC)
	return &State{
		LastRevision: 6,
		Nicknames:    map[membership.UID]string{},
		Groups: []Group{
			{ID: "all-staff", Revision: 4},
			{ID: "backend", Revision: 1, UIDs: []membership.UID{1, 2}},
			{ID: "engineering", Revision: 6, UIDs: []membership.UID{3}},
		},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAdd, GroupID: "backend", UIDs: []membership.UID{1, 2}},
			{Revision: 2, Op: membership.OpAddGroups, Time: at, Actor: 7, GroupID: "engineering", Groups: []membership.Nested{{GroupID: "backend"}, {GroupID: "frontend", Expires: at.Add(time.Hour)}}},
			{Revision: 3, Op: membership.OpRemoveGroups, GroupID: "engineering", Groups: []membership.Nested{{GroupID: "frontend"}}},
			{Revision: 4, Op: membership.OpReplaceGroups, Time: at, GroupID: "all-staff", Groups: []membership.Nested{{GroupID: "engineering", Expires: time.UnixMilli(-1).UTC()}}},
			{Revision: 5, Op: membership.OpExpireGroups, Time: at, GroupID: "x", Groups: []membership.Nested{{GroupID: "y"}, {GroupID: "z"}}},
			{Revision: 6, Op: membership.OpBatch, Time: at, Actor: 3, Changes: []membership.Change{
				{Op: membership.OpAdd, GroupID: "engineering", UIDs: []membership.UID{3}},
				{Op: membership.OpAddGroups, GroupID: "engineering", Groups: []membership.Nested{{GroupID: "backend"}}},
				{Op: membership.OpRemoveGroups, GroupID: "x"},
				{Op: membership.OpReplaceGroups, GroupID: "y", Groups: []membership.Nested{{GroupID: "a"}, {GroupID: "b"}}},
			}},
		},
		Nestings: []Nesting{
			{Parent: "all-staff", Child: "engineering", Expires: at.Add(time.Hour)},
			{Parent: "engineering", Child: "backend"},
			{Parent: "engineering", Child: "empty"},
		},
	}
}

// A snapshot keeps the groups in groups, a group with subgroups but no
// member, and the feed's nesting changes; a backup keeps the first two.
func TestNestingsRoundTrip(t *testing.T) {
	st := nestingState()
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	require.NoError(t, got.Check())

	backup := &State{LastRevision: st.LastRevision, Nicknames: st.Nicknames, Groups: st.Groups, Nestings: st.Nestings}
	var b bytes.Buffer
	_, err = NewBackup(backup).WriteTo(&b)
	require.NoError(t, err)
	restored, err := Decode(b.Bytes(), "backup")
	require.NoError(t, err)
	require.NoError(t, restored.Check())
	assert.Equal(t, st.Groups, restored.Groups)
	assert.Equal(t, st.Nestings, restored.Nestings)

	var groups []Group
	each, err := decode(buf.Bytes(), "s.snap", func(g Group) error {
		g.UIDs = slices.Clone(g.UIDs)
		groups = append(groups, g)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, st.Groups, groups, "a group with no member is given to each too")
	assert.Equal(t, st.Nestings, each.Nestings)
}

// The groups in groups follow the keys: the count of parents, then each
// parent's id, its subgroup count, and each subgroup's id and the time its
// nesting ends (signed milliseconds, 0 for none). A nesting change is its
// op (8 to 11), its group id and its groups, each an id and an end.
func TestNestingsLayout(t *testing.T) {
	st := &State{
		LastRevision: 1,
		Groups:       []Group{{ID: "a", Revision: 1}},
		Changes: []membership.Change{
			{Revision: 1, Op: membership.OpAddGroups, GroupID: "a", Groups: []membership.Nested{{GroupID: "b", Expires: time.UnixMilli(1000).UTC()}, {GroupID: "c"}}},
		},
		Nestings: []Nesting{{Parent: "a", Child: "b", Expires: time.UnixMilli(1000).UTC()}, {Parent: "a", Child: "c"}},
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	body := buf.Bytes()[8 : buf.Len()-4]
	want := []byte{1, 0, 0, 0, // revisions, nicknames
		1, 1, 'a', 1, 0, 0, // group a: revision 1, no member, no expiry
		1,                                                 // changes
		1, 8, 1, 'a', 2, 1, 'b', 0xd0, 0x0f, 1, 'c', 0, 0, // 1: add_groups a: b until 1000 ms, c; no stamp
		0,                                           // keys
		1, 1, 'a', 2, 1, 'b', 0xd0, 0x0f, 1, 'c', 0, // groups in groups: a holds b until 1000 ms, and c
		0, 0} // accounts, groups' attributes
	assert.Equal(t, want, body)
	got, err := Decode(buf.Bytes(), "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st.Nestings, got.Nestings)
}

// A snapshot of version 7, as the build before groups in groups wrote it,
// is read: it has no nesting, and an op of 8 or more in it is damage. A
// state with nestings or nesting changes cannot be written as version 7.
func TestVersion7IsReadWithoutNestings(t *testing.T) {
	st := expiriesState()
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, st))
	v7 := asVersion(t, buf.Bytes(), 7)
	assert.Equal(t, "GMSN\x07\x00\x00\x00", string(v7[:8]))
	got, err := Decode(v7, "s.snap")
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Nil(t, got.Nestings)
	var v8 bytes.Buffer
	require.NoError(t, encode(&v8, st, 8))
	assert.Equal(t, append(v7[8:len(v7)-4:len(v7)-4], 0), v8.Bytes()[8:v8.Len()-4], "version 8 is version 7 and a count of no nesting")

	change := []byte{1, 0, 0, 0, 0, 1, 1, 8, 1, 'a', 0, 0, 0}
	_, err = Decode(snapshotFile(7, change), "s.snap")
	assert.ErrorContains(t, err, "unknown op 8")
	_, err = Decode(snapshotFile(8, append(change, 0)), "s.snap")
	require.NoError(t, err, "the same, in version 8")

	require.Error(t, encode(&bytes.Buffer{}, nestingState(), 7))
	noNestings := nestingState()
	noNestings.Nestings = nil
	assert.Error(t, encode(&bytes.Buffer{}, noNestings, 7), "a nesting change in version 7")
}

// Groups in groups that no build writes are refused: a damaged or foreign
// snapshot.
func TestNestingsNoBuildWroteAreRefused(t *testing.T) {
	// Revisions 1, 0, 0; no nickname, group, change or key.
	head := []byte{1, 0, 0, 0, 0, 0, 0}
	for _, tt := range []struct {
		name     string
		nestings []byte
	}{
		{"a parent of no subgroup", []byte{1, 1, 'a', 0}},
		{"parents out of order", []byte{2, 1, 'b', 1, 1, 'c', 0, 1, 'a', 1, 1, 'c', 0}},
		{"a parent twice", []byte{2, 1, 'a', 1, 1, 'c', 0, 1, 'a', 1, 1, 'd', 0}},
		{"subgroups out of order", []byte{1, 1, 'a', 2, 1, 'c', 0, 1, 'b', 0}},
		{"a subgroup twice", []byte{1, 1, 'a', 2, 1, 'b', 0, 1, 'b', 0}},
		{"an empty parent", []byte{1, 0, 1, 1, 'b', 0}},
		{"an empty subgroup", []byte{1, 1, 'a', 1, 0, 0}},
		{"a subgroup id with a newline", []byte{1, 1, 'a', 1, 1, '\n', 0}},
		{"more parents than the file", []byte{100, 1, 'a', 1, 1, 'b', 0}},
		{"more subgroups than the file", []byte{1, 1, 'a', 100, 1, 'b', 0}},
		{"an end cut short", []byte{1, 1, 'a', 1, 1, 'b', 0x80}},
		{"trailing bytes", []byte{1, 1, 'a', 1, 1, 'b', 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(snapshotFile(8, append(slices.Clone(head), tt.nestings...)), "s.snap")
			assert.Error(t, err)
		})
	}
	_, err := Decode(snapshotFile(8, append(slices.Clone(head), 1, 1, 'a', 1, 1, 'b', 0)), "s.snap")
	require.NoError(t, err, "the same, well formed")
}

// A nesting change no build writes is refused, when it is read and when
// it is encoded.
func TestNestingChangesNoBuildWroteAreRefused(t *testing.T) {
	// Revisions 1, 0, 0; no nickname, no group; one change, at revision 1.
	head := []byte{1, 0, 0, 0, 0, 1, 1}
	for _, tt := range []struct {
		name   string
		change []byte
	}{
		{"of no group", []byte{8, 0, 1, 1, 'b', 0, 0}},
		{"groups out of order", []byte{8, 1, 'a', 2, 1, 'c', 0, 1, 'b', 0, 0}},
		{"a group twice", []byte{9, 1, 'a', 2, 1, 'b', 0, 1, 'b', 0, 0}},
		{"an empty group", []byte{10, 1, 'a', 1, 0, 0, 0}},
		{"more groups than the file", []byte{11, 1, 'a', 100, 1, 'b', 0, 0}},
		{"an expire_groups in a batch", []byte{6, 1, 11, 1, 'a', 1, 1, 'b', 0, 0}},
		{"an unknown op", []byte{12, 1, 'a', 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(snapshotFile(8, append(append(slices.Clone(head), tt.change...), 0, 0)), "s.snap")
			assert.Error(t, err)
		})
	}
	_, err := Decode(snapshotFile(8, append(slices.Clone(head), 6, 1, 10, 1, 'a', 1, 1, 'b', 0, 0, 0, 0)), "s.snap")
	require.NoError(t, err, "a replace_groups in a batch, well formed")

	for _, tt := range []struct {
		name string
		c    membership.Change
	}{
		{"groups out of order", membership.Change{Op: membership.OpAddGroups, GroupID: "a", Groups: []membership.Nested{{GroupID: "c"}, {GroupID: "b"}}}},
		{"a nesting change naming users", membership.Change{Op: membership.OpRemoveGroups, GroupID: "a", UIDs: []membership.UID{1}}},
		{"an add naming groups", membership.Change{Op: membership.OpAdd, GroupID: "a", UIDs: []membership.UID{1}, Groups: []membership.Nested{{GroupID: "b"}}}},
		{"an expire_groups in a batch", membership.Change{Op: membership.OpBatch, Changes: []membership.Change{{Op: membership.OpExpireGroups, GroupID: "a"}}}},
		{"an end at 1970", membership.Change{Op: membership.OpAddGroups, GroupID: "a", Groups: []membership.Nested{{GroupID: "b", Expires: time.UnixMilli(0)}}}},
	} {
		t.Run("encode "+tt.name, func(t *testing.T) {
			tt.c.Revision = 1
			err := Encode(&bytes.Buffer{}, &State{LastRevision: 1, Changes: []membership.Change{tt.c}})
			assert.Error(t, err)
		})
	}
	for name, nestings := range map[string][]Nesting{
		"out of order":   {{Parent: "b", Child: "c"}, {Parent: "a", Child: "c"}},
		"twice":          {{Parent: "a", Child: "c"}, {Parent: "a", Child: "c"}},
		"an end at 1970": {{Parent: "a", Child: "c", Expires: time.UnixMilli(0)}},
	} {
		err := Encode(&bytes.Buffer{}, &State{Groups: []Group{{ID: "a"}, {ID: "b"}}, Nestings: nestings})
		assert.Error(t, err, name)
	}
}

// Check refuses groups in groups that no store holds: a cycle, a group in
// itself, a parent that is not among the groups, a group with neither
// members nor subgroups.
func TestCheckRefusesNestingsThatBreakTheRules(t *testing.T) {
	require.NoError(t, nestingState().Check())
	for _, tt := range []struct {
		name     string
		change   func(st *State)
		contains string
	}{
		{"a cycle", func(st *State) {
			st.Nestings = append(st.Nestings, Nesting{Parent: "backend", Child: "all-staff"})
		}, "cycle: all-staff > engineering > backend > all-staff"},
		{"a group in itself", func(st *State) { st.Nestings[1].Child = "engineering" }, "in itself"},
		{"a parent not among the groups", func(st *State) { st.Nestings[2].Parent = "nowhere" }, "not among the groups"},
		{"a group with neither", func(st *State) { st.Nestings = st.Nestings[1:] }, "no members, no subgroups and no attributes"},
		{"a subgroup that is no group id", func(st *State) { st.Nestings[2].Child = "" }, "a nesting"},
		{"twice", func(st *State) { st.Nestings = append(st.Nestings, st.Nestings[2]) }, "twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := nestingState()
			tt.change(st)
			assert.ErrorContains(t, st.Check(), tt.contains)
		})
	}
}

// FuzzDecodeEncodeAgree checks that what a snapshot of this version
// decodes to encodes again, and back to the same state.
func FuzzDecodeEncodeAgree(f *testing.F) {
	for _, st := range []*State{nestingState(), expiriesState(), keysState()} {
		var buf bytes.Buffer
		if err := Encode(&buf, st); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes()[8 : buf.Len()-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := Decode(snapshotFile(byte(snapshotKind.Version), body), "p")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		require.NoError(t, Encode(&buf, st))
		again, err := Decode(buf.Bytes(), "p")
		require.NoError(t, err)
		assert.Equal(t, st, again)
	})
}
