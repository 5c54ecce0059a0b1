package snap

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// eachState has groups of every size the reuse of the uids' buffer meets:
// a large one, smaller ones after it, an empty one, and one with expiries.
func eachState() *State {
	big := make([]membership.UID, 5000)
	for i := range big {
		big[i] = membership.UID(3*i + 1)
	}
	return &State{
		LastRevision: 9,
		Nicknames:    map[membership.UID]string{4: "Ann"},
		Groups: []Group{
			{ID: "small", Revision: 2, UIDs: []membership.UID{4, 9}},
			{ID: "big", Revision: 3, UIDs: big},
			{ID: "one", Revision: 4, UIDs: []membership.UID{1 << 62}},
			{ID: "empty", Revision: 5},
			{ID: "expiring", Revision: 6, UIDs: []membership.UID{2, 7}, Expiries: []membership.MemberExpiry{{UID: 7, At: time.UnixMilli(1_800_000_000_000).UTC()}}},
		},
		Changes: []membership.Change{{Revision: 9, Op: membership.OpAdd, GroupID: "small", UIDs: []membership.UID{9}}},
	}
}

// ReadFile with each gives every group, in order, as ReadFile without each
// reads it, and the rest of the state without them.
func TestReadFileWithEachGivesEveryGroupInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.snap")
	require.NoError(t, WriteFile(path, eachState()))
	want, err := ReadFile(path, nil)
	require.NoError(t, err)

	var got []Group
	rest, err := ReadFile(path, func(g Group) error {
		g.UIDs = slices.Clone(g.UIDs) // the buffer is the next group's
		got = append(got, g)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, got, len(want.Groups))
	for i, g := range got {
		w := want.Groups[i]
		assert.Equal(t, w.ID, g.ID)
		assert.Equal(t, w.Revision, g.Revision, g.ID)
		assert.True(t, slices.Equal(w.UIDs, g.UIDs), "the uids of %s", g.ID)
		assert.Equal(t, w.Expiries, g.Expiries, g.ID)
	}
	assert.Nil(t, rest.Groups)
	rest.Groups = want.Groups
	assert.Equal(t, want, rest)
}

// An error from each stops the reading and is returned.
func TestReadFileWithEachStopsAtEachsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.snap")
	require.NoError(t, WriteFile(path, eachState()))
	stop := errors.New("stop")
	calls := 0
	_, err := ReadFile(path, func(Group) error {
		calls++
		return stop
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)
}

// A group that breaks a rule is found when it is reached, after the groups
// before it were given: the caller must drop what it built from them.
func TestReadFileWithEachFindsABrokenGroupWhereItIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.snap")
	st := eachState()
	st.Groups = append(st.Groups, Group{ID: "broken", UIDs: []membership.UID{5, 5}})
	require.NoError(t, WriteFile(path, st))
	var ids []string
	_, err := ReadFile(path, func(g Group) error {
		ids = append(ids, g.ID)
		return nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `group "broken": uids not in ascending order`)
	assert.Equal(t, []string{"small", "big", "one", "empty", "expiring"}, ids)
	_, err = ReadFile(path, nil)
	assert.Error(t, err, "and ReadFile refuses it too")
}

// The uids are decoded in place: a varint cut short by the end of the body,
// and one longer than 64 bits, are refused.
func TestBrokenUIDVarintsAreRefused(t *testing.T) {
	head := []byte{0, 0, 0, 0, 1, 1, 'g', 0} // revisions, no nicknames, one group "g" of revision 0
	for name, tc := range map[string]struct {
		uids []byte
		want string
	}{
		"cut short":  {uids: []byte{1, 0x80}, want: io.ErrUnexpectedEOF.Error()},
		"cut at end": {uids: []byte{2, 0x05, 0x80}, want: io.ErrUnexpectedEOF.Error()},
		"too long":   {uids: []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, want: "overflows 64 bits"},
		"zero delta": {uids: []byte{2, 0x05, 0x00}, want: "not in ascending order"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.snap")
			require.NoError(t, os.WriteFile(path, snapshotFile(7, append(slices.Clone(head), tc.uids...)), 0o600))
			_, err := ReadFile(path, func(Group) error { return nil })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
