package membership_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

// nestingStore is a recordingStore that keeps the writes it gets.
type nestingStore struct {
	recordingStore
	writes []membership.Write
}

func (s *nestingStore) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	s.writes = append(s.writes, w)
	return s.recordingStore.Write(ctx, w)
}

func TestServiceNestingWritesAreValidatedBeforeTheStore(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name        string
		w           membership.Write
		wantCode    membership.Code
		wantMessage string
	}{
		{"bad group id", membership.Write{Op: membership.OpAddGroups, GroupID: "", Subgroups: []membership.Subgroup{{GroupID: "a"}}},
			membership.CodeInvalidGroupID, "group id is empty"},
		{"bad subgroup", membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}, {GroupID: "b\x00"}}},
			membership.CodeInvalidGroups, "groups element 1: group id has control character U+0000 at byte 1"},
		{"bad subgroup to remove", membership.Write{Op: membership.OpRemoveGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: ""}}},
			membership.CodeInvalidGroups, "groups element 0: group id is empty"},
		{"too many", membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}, {GroupID: "b"}, {GroupID: "c"}}},
			membership.CodeTooManyGroups, "groups has more than 2 elements"},
		{"itself", membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "p"}}},
			membership.CodeCycle, "adding p to p makes a cycle: p > p"},
		{"itself in a replace", membership.Write{Op: membership.OpReplaceGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}, {GroupID: "p"}}},
			membership.CodeCycle, "adding p to p makes a cycle: p > p"},
		{"past expiry", membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a", Expiry: membership.Expiry{Set: true, At: now.Add(-time.Second)}}}},
			membership.CodeInvalidGroups, "groups element 0: the expiry 2026-01-02T03:04:04.000Z is not in the future"},
		{"expiry is the service's", membership.Write{Op: membership.OpExpireGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}}},
			membership.CodeInvalidQuery, "expiries are the service's own changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &nestingStore{}
			svc := membership.NewService(store, membership.ServiceOptions{MaxUsers: 2, Now: func() time.Time { return now }})
			_, err := svc.Write(context.Background(), tt.w)
			require.Error(t, err)
			assert.Equal(t, tt.wantCode, membership.ErrorCode(err))
			assert.Equal(t, tt.wantMessage, membership.ErrorMessage(err))
			assert.Empty(t, store.writes, "a refused write reaches no store")
		})
	}
}

func TestServiceNestingWriteCarriesTheBounds(t *testing.T) {
	store := &nestingStore{}
	svc := membership.NewService(store, membership.ServiceOptions{MaxDepth: 7, MaxAncestors: 70})
	_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}}})
	require.NoError(t, err)
	require.Len(t, store.writes, 1)
	assert.Equal(t, 7, store.writes[0].MaxDepth)
	assert.Equal(t, 70, store.writes[0].MaxAncestors)

	_, err = svc.Write(context.Background(), membership.Write{Op: membership.OpRemoveGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "p"}}})
	require.NoError(t, err, "removing a group from itself is a no-op, not a cycle")

	// 0 takes the default; past the largest, the largest.
	for _, opts := range []membership.ServiceOptions{{}, {MaxDepth: 1 << 20, MaxAncestors: 1 << 30}} {
		store.writes = nil
		_, err = membership.NewService(store, opts).Write(context.Background(),
			membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}}})
		require.NoError(t, err)
		require.Len(t, store.writes, 1)
		if opts.MaxDepth == 0 {
			assert.Equal(t, [2]int{membership.DefaultMaxDepth, membership.DefaultMaxAncestors}, [2]int{store.writes[0].MaxDepth, store.writes[0].MaxAncestors})
		} else {
			assert.Equal(t, [2]int{membership.MaxMaxDepth, membership.MaxMaxAncestors}, [2]int{store.writes[0].MaxDepth, store.writes[0].MaxAncestors})
		}
	}
}

func TestFingerprintOfANestingWriteCoversItsSubgroups(t *testing.T) {
	w := membership.Write{Op: membership.OpAddGroups, GroupID: "p", Subgroups: []membership.Subgroup{{GroupID: "a"}}}
	other := w
	other.Subgroups = []membership.Subgroup{{GroupID: "b"}}
	expiring := w
	expiring.Subgroups = []membership.Subgroup{{GroupID: "a", Expiry: membership.Expiry{Set: true, TTL: time.Hour}}}
	assert.NotEqual(t, membership.FingerprintWrite(w), membership.FingerprintWrite(other))
	assert.NotEqual(t, membership.FingerprintWrite(w), membership.FingerprintWrite(expiring))
	removal := w
	removal.Op = membership.OpRemoveGroups
	assert.NotEqual(t, membership.FingerprintWrite(w), membership.FingerprintWrite(removal))
}

func TestCycleAndDepthErrorsNameThePath(t *testing.T) {
	err := membership.CycleError("backend", "all-staff", []string{"all-staff", "engineering", "backend"})
	assert.Equal(t, membership.CodeCycle, err.Code)
	assert.Equal(t, "adding all-staff to backend makes a cycle: all-staff > engineering > backend > all-staff", err.Message)
	err = membership.TooDeepError("a", "b", 17, 16)
	assert.Equal(t, membership.CodeTooDeep, err.Code)
	assert.True(t, strings.Contains(err.Message, "17 deep, deeper than 16"), err.Message)
	err = membership.TooManyAncestorsError("p", "hub", "leaf", 1001, 1000)
	assert.Equal(t, membership.CodeTooManyAncestors, err.Code)
	assert.Equal(t, "adding hub to p puts leaf below 1001 groups, more than 1000 (-max-ancestors)", err.Message)
}

func TestResolveSubgroupTTLs(t *testing.T) {
	commit := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	in := []membership.Subgroup{{GroupID: "a"}, {GroupID: "b", Expiry: membership.Expiry{Set: true, TTL: time.Minute}}}
	out := membership.ResolveSubgroupTTLs(in, commit)
	assert.Equal(t, time.Minute, in[1].Expiry.TTL, "the input is not changed")
	assert.Equal(t, membership.Subgroup{GroupID: "b", Expiry: membership.Expiry{Set: true, At: commit.Add(time.Minute)}}, out[1])
	assert.Equal(t, in[0], out[0])
}
