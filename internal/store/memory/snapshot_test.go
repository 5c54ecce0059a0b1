package memory

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnapshotRoundTripAndOrderCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.snap")
	st := &snap.State{
		LastRevision:      12,
		NicknamesRevision: 11,
		RemovedRevision:   7,
		Nicknames:         map[membership.UID]string{1: "Ann", 9223372036854775807: "Max"},
		Groups:            []snap.Group{{ID: "a", Revision: 12, UIDs: []membership.UID{1, 5, 9223372036854775807}}, {ID: "team/b", Revision: 3, UIDs: []membership.UID{2}}},
		Changes: []membership.Change{
			{Revision: 11, Op: membership.OpAdd, GroupID: "a", UIDs: []membership.UID{1, 9223372036854775807}, Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}}},
			{Revision: 12, Op: membership.OpRemove, GroupID: "a", UIDs: []membership.UID{3}},
		},
	}
	require.NoError(t, snap.WriteFile(path, st))
	got, err := snap.ReadFile(path, nil)
	require.NoError(t, err)
	assert.Equal(t, st, got)

	m := New()
	m.Import(got)
	storetest.ReverseAgrees(t, m, []string{"a", "team/b"}, []membership.UID{1, 2, 5, 9223372036854775807})
	list, _ := storetest.ListAll(t, m, "a")
	assert.Equal(t, []membership.Member{{UID: 1, Nickname: "Ann"}, {UID: 5}, {UID: 9223372036854775807, Nickname: "Max"}}, list)

	rev, err := m.Revision(context.Background(), "a")
	require.NoError(t, err)
	assert.Equal(t, membership.Revision(12), rev, "a group's revision survives")
	changes, latest, err := m.Changes(context.Background(), membership.ChangeOptions{After: 10})
	require.NoError(t, err)
	assert.Equal(t, membership.Revision(12), latest)
	assert.Equal(t, st.Changes, changes, "the feed survives")
	res, err := storetest.Add(context.Background(), m, "team/b", []membership.User{{UID: 3}})
	require.NoError(t, err)
	assert.Equal(t, membership.Revision(13), res.Revision, "revisions continue")

	gap := &snap.State{Nicknames: map[membership.UID]string{}, LastRevision: 12, Changes: []membership.Change{{Revision: 10, Op: membership.OpAdd, GroupID: "a"}}}
	require.NoError(t, snap.WriteFile(path, gap))
	_, err = snap.ReadFile(path, nil)
	require.Error(t, err, "the kept changes must end at the latest revision")

	bad := &snap.State{Nicknames: map[membership.UID]string{}, Groups: []snap.Group{{ID: "a", UIDs: []membership.UID{5, 5}}}}
	require.NoError(t, snap.WriteFile(path, bad))
	_, err = snap.ReadFile(path, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not in ascending order")
}

func TestSnapshotVersion1IsRead(t *testing.T) {
	// A version 1 snapshot, as the previous release wrote it: no revisions,
	// no changes. Nicknames {7: "Al"}; group "g" with members 3 and 7.
	body := []byte{1, 7, 2, 'A', 'l', 1, 1, 'g', 2, 3, 4}
	data := append([]byte("GMSN\x01\x00\x00\x00"), body...)
	data = binary.LittleEndian.AppendUint32(data, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	path := filepath.Join(t.TempDir(), "s.snap")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	st, err := snap.ReadFile(path, nil)
	require.NoError(t, err)
	m := New()
	m.Import(st)
	list, _ := storetest.ListAll(t, m, "g")
	assert.Equal(t, []membership.Member{{UID: 3}, {UID: 7, Nickname: "Al"}}, list)
	res, err := storetest.Add(context.Background(), m, "g", []membership.User{{UID: 9}})
	require.NoError(t, err)
	assert.Equal(t, membership.Revision(1), res.Revision, "revisions start at 1 after a version 1 snapshot")
}

// BenchmarkMemoryImport loads a snapshot's state of 10,000,000
// memberships (100,000 groups of 100 uids among 1,000,000 users), as a
// restart does: the groups' chunks, the group index and the reverse index
// built in bulk.
func BenchmarkMemoryImport(b *testing.B) {
	st := tenMillionState()
	for b.Loop() {
		m := NewWith(Options{ChangesKeep: 0})
		m.Import(st)
		if m.counts.members.Load() != 10_000_000 {
			b.Fatal(m.counts.members.Load())
		}
	}
}

// BenchmarkMemoryExport copies a store of 10,000,000 memberships for a
// snapshot, as the durable store's committer does while writes wait.
func BenchmarkMemoryExport(b *testing.B) {
	m := NewWith(Options{ChangesKeep: 0})
	m.Import(tenMillionState())
	for b.Loop() {
		st := m.Export()
		if len(st.Groups) != 100_000 {
			b.Fatal(len(st.Groups))
		}
	}
}

// tenMillionState returns the state of 100,000 groups of 100 uids among
// 1,000,000 users.
func tenMillionState() *snap.State {
	rng := rand.New(rand.NewPCG(9, 10))
	st := &snap.State{LastRevision: 1000}
	for g := range 100_000 {
		seen := map[membership.UID]bool{}
		uids := make([]membership.UID, 0, 100)
		for len(uids) < cap(uids) {
			if uid := membership.UID(rng.Int64N(1_000_000) + 1); !seen[uid] {
				seen[uid] = true
				uids = append(uids, uid)
			}
		}
		slices.Sort(uids)
		st.Groups = append(st.Groups, snap.Group{ID: fmt.Sprint("g", g), Revision: 1, UIDs: uids})
	}
	return st
}
