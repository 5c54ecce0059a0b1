package membership_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

func TestValidateGroupID(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		wantMsg string // "" when the id is valid
	}{
		{"plain", "team-a", ""},
		{"slash from %2F", "team/a", ""},
		{"unicode", "équipe 日本", ""},
		{"256 bytes", strings.Repeat("a", 256), ""},
		{"empty", "", "group id is empty"},
		{"257 bytes", strings.Repeat("a", 257), "257 bytes, longer than 256"},
		{"not UTF-8", "a\xffb", "not valid UTF-8"},
		{"NUL", "a\x00b", "control character U+0000 at byte 1"},
		{"newline", "a\n", "control character U+000A"},
		{"DEL", "a\x7f", "control character U+007F"},
		{"C1 control", "a\u0085", "control character U+0085"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := membership.ValidateGroupID(tt.id)
			if tt.wantMsg == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, membership.CodeInvalidGroupID, membership.ErrorCode(err))
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestErrorCodeAndMessage(t *testing.T) {
	err := membership.Errorf(membership.CodeInvalidUsers, "element %d is bad", 3)
	wrapped := errors.Join(errors.New("context"), err)
	assert.Equal(t, membership.CodeInvalidUsers, membership.ErrorCode(wrapped))
	assert.Equal(t, "element 3 is bad", membership.ErrorMessage(wrapped))

	plain := errors.New("disk on fire at /var/secret")
	assert.Equal(t, membership.CodeInternal, membership.ErrorCode(plain))
	assert.Equal(t, "internal error", membership.ErrorMessage(plain), "internal detail must not reach clients")
}

// recordingStore is a membership.Store that records the calls it gets.
type recordingStore struct {
	membership.Nesting // nil: the tests here call none of its reads
	calls              []string
}

// Write records an add or a remove with no precondition, no actor and no
// key by its op and group, and counts every user it names; any other write
// with its uids too.
func (s *recordingStore) Write(_ context.Context, w membership.Write) (membership.Result, error) {
	plain := w.If.IsZero() && w.Actor == 0 && w.Idem.Key == ""
	switch {
	case plain && w.Op == membership.OpAdd:
		s.calls = append(s.calls, "add "+w.GroupID)
		return membership.Result{Count: len(w.Users)}, nil
	case plain && w.Op == membership.OpRemove:
		s.calls = append(s.calls, "remove "+w.GroupID)
		return membership.Result{Count: len(w.UIDs)}, nil
	}
	s.calls = append(s.calls, fmt.Sprint(w.Op, " ", w.GroupID, " ", w.UIDs))
	return membership.Result{}, nil
}

func (s *recordingStore) Batch(_ context.Context, b membership.Batch) (membership.BatchResult, error) {
	s.calls = append(s.calls, fmt.Sprint("batch ", len(b.Writes)))
	return membership.BatchResult{Results: make([]membership.Result, len(b.Writes))}, nil
}

func (s *recordingStore) Groups(_ context.Context, opts membership.GroupsOptions, _ membership.GroupsFunc) (membership.Revision, error) {
	s.calls = append(s.calls, "groups "+opts.Prefix)
	return 0, nil
}

func (s *recordingStore) ListMembers(_ context.Context, groupID string, _ membership.ListOptions, _ membership.ListFunc) (membership.Revision, error) {
	s.calls = append(s.calls, "list "+groupID)
	return 0, nil
}

func (s *recordingStore) UserGroups(_ context.Context, uid membership.UID, _ membership.GroupListOptions, _ membership.GroupListFunc) error {
	s.calls = append(s.calls, fmt.Sprint("groups ", uid))
	return nil
}

func (s *recordingStore) Member(_ context.Context, groupID string, uid membership.UID) (membership.Member, bool, error) {
	s.calls = append(s.calls, "member "+groupID)
	return membership.Member{UID: uid}, uid == 1, nil
}

func (s *recordingStore) CheckMembers(_ context.Context, checks []membership.Check) ([]bool, membership.Revision, error) {
	s.calls = append(s.calls, fmt.Sprint("check ", len(checks)))
	return make([]bool, len(checks)), 0, nil
}

func (s *recordingStore) Epoch() uint64 { return 1 }

func (s *recordingStore) Revision(_ context.Context, groupID string) (membership.Revision, error) {
	s.calls = append(s.calls, "revision "+groupID)
	return 0, nil
}

func (s *recordingStore) Changes(_ context.Context, opts membership.ChangeOptions) ([]membership.Change, membership.Revision, error) {
	s.calls = append(s.calls, fmt.Sprint("changes ", opts.After))
	return nil, 0, nil
}

func TestServiceRejectsBadRequestsBeforeTheStore(t *testing.T) {
	ctx := context.Background()
	write := func(s *membership.Service, w membership.Write) error { _, err := s.Write(ctx, w); return err }
	tests := []struct {
		name     string
		call     func(*membership.Service) error
		wantCode membership.Code
	}{
		{"add: bad group", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "", Users: users(1)})
			return err
		}, membership.CodeInvalidGroupID},
		{"add: uid 0", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(1, 0)})
			return err
		}, membership.CodeInvalidUsers},
		{"add: negative uid", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(-5)})
			return err
		}, membership.CodeInvalidUsers},
		{"add: nickname too long", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: strings.Repeat("n", membership.MaxNicknameBytes+1), HasNickname: true}}})
			return err
		}, membership.CodeInvalidUsers},
		{"add: nickname not UTF-8", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1, Nickname: "\xff", HasNickname: true}}})
			return err
		}, membership.CodeInvalidUsers},
		{"write: bad Idempotency-Key", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(2), Idem: membership.Idempotency{Key: "bad\n"}})
		}, membership.CodeInvalidIdempotencyKey},
		{"add: too many users", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(1, 2, 3)})
			return err
		}, membership.CodeTooManyUsers},
		{"remove: bad group", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "a\x00", UIDs: []membership.UID{1}})
			return err
		}, membership.CodeInvalidGroupID},
		{"remove: uid 0", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{0}})
			return err
		}, membership.CodeInvalidUsers},
		{"remove: too many users", func(s *membership.Service) error {
			_, err := s.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1, 2, 3}})
			return err
		}, membership.CodeTooManyUsers},
		{"list: bad group", func(s *membership.Service) error {
			_, err := s.ListMembers(ctx, "", membership.ListOptions{}, nil)
			return err
		}, membership.CodeInvalidGroupID},
		{"list: limit too large", func(s *membership.Service) error {
			_, err := s.ListMembers(ctx, "g", membership.ListOptions{Limit: membership.MaxPageSize + 2}, nil)
			return err
		}, membership.CodeInvalidQuery},
		{"list: negative limit", func(s *membership.Service) error {
			_, err := s.ListMembers(ctx, "g", membership.ListOptions{Limit: -1}, nil)
			return err
		}, membership.CodeInvalidQuery},
		{"member: bad group", func(s *membership.Service) error { _, err := s.Member(ctx, "", 1); return err }, membership.CodeInvalidGroupID},
		{"user groups: limit too large", func(s *membership.Service) error {
			_, err := s.UserGroups(ctx, 1, membership.GroupListOptions{Limit: membership.MaxPageSize + 2}, nil)
			return err
		}, membership.CodeInvalidQuery},
		{"user groups: after not a group id", func(s *membership.Service) error {
			_, err := s.UserGroups(ctx, 1, membership.GroupListOptions{After: "a\x00"}, nil)
			return err
		}, membership.CodeInvalidQuery},
		{"revision: bad group", func(s *membership.Service) error { _, err := s.Revision(ctx, "a\x7f"); return err }, membership.CodeInvalidGroupID},
		{"changes: limit too large", func(s *membership.Service) error {
			_, _, err := s.Changes(ctx, membership.ChangeOptions{Limit: membership.MaxPageSize + 1})
			return err
		}, membership.CodeInvalidQuery},
		{"changes: negative limit", func(s *membership.Service) error {
			_, _, err := s.Changes(ctx, membership.ChangeOptions{Limit: -1})
			return err
		}, membership.CodeInvalidQuery},
		{"replace: bad group", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpReplace, Users: users(1)})
		}, membership.CodeInvalidGroupID},
		{"replace: uid 0", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: users(1, 0)})
		}, membership.CodeInvalidUsers},
		{"replace: too many users", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpReplace, GroupID: "g", Users: users(1, 2, 3)})
		}, membership.CodeTooManyUsers},
		{"delete group: bad group", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpDeleteGroup, GroupID: "a\x00"})
		}, membership.CodeInvalidGroupID},
		{"remove user: uid 0", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{0}})
		}, membership.CodeInvalidUID},
		{"remove user: two uids", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{1, 2}})
		}, membership.CodeInvalidUID},
		{"remove user: a precondition", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}, If: membership.Precondition{Exists: true}})
		}, membership.CodeInvalidQuery},
		{"batch: too many changes", func(s *membership.Service) error {
			_, err := s.Batch(ctx, membership.Batch{Writes: make([]membership.Write, membership.DefaultMaxBatchWrites+1)})
			return err
		}, membership.CodeTooManyChanges},
		{"batch: too many users in all", func(s *membership.Service) error {
			_, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{
				{Op: membership.OpAdd, GroupID: "a", Users: users(1, 2)}, {Op: membership.OpRemove, GroupID: "b", UIDs: []membership.UID{3}}}})
			return err
		}, membership.CodeTooManyUsers},
		{"batch: a bad group", func(s *membership.Service) error {
			_, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "a", Users: users(1)}, {Op: membership.OpDeleteGroup}}})
			return err
		}, membership.CodeInvalidGroupID},
		{"batch: remove_user", func(s *membership.Service) error {
			_, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: membership.OpRemoveUser, UIDs: []membership.UID{1}}}})
			return err
		}, membership.CodeInvalidChanges},
		{"batch: an unknown op", func(s *membership.Service) error {
			_, err := s.Batch(ctx, membership.Batch{Writes: []membership.Write{{Op: "move", GroupID: "g"}}})
			return err
		}, membership.CodeInvalidChanges},
		{"write: unknown op", func(s *membership.Service) error { return write(s, membership.Write{Op: "move", GroupID: "g"}) }, membership.CodeInternal},
		{"write: a bad principal", func(s *membership.Service) error {
			return write(s, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: users(1), Principal: "sync job"})
		}, membership.CodeInternal},
		{"batch: a bad principal", func(s *membership.Service) error {
			_, err := s.Batch(ctx, membership.Batch{Principal: strings.Repeat("p", scope.MaxPrincipalBytes+1),
				Writes: []membership.Write{{Op: membership.OpAdd, GroupID: "a", Users: users(1)}}})
			return err
		}, membership.CodeInternal},
		{"groups: limit too large", func(s *membership.Service) error {
			_, err := s.Groups(ctx, membership.GroupsOptions{Limit: membership.MaxPageSize + 2}, nil)
			return err
		}, membership.CodeInvalidQuery},
		{"groups: after not a group id", func(s *membership.Service) error {
			_, err := s.Groups(ctx, membership.GroupsOptions{After: "a\x00"}, nil)
			return err
		}, membership.CodeInvalidQuery},
		{"groups: prefix too long", func(s *membership.Service) error {
			_, err := s.Groups(ctx, membership.GroupsOptions{Prefix: strings.Repeat("p", membership.MaxGroupIDBytes+1)}, nil)
			return err
		}, membership.CodeInvalidQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &recordingStore{}
			err := tt.call(membership.NewService(store, membership.ServiceOptions{MaxUsers: 2}))
			require.Error(t, err)
			assert.Equal(t, tt.wantCode, membership.ErrorCode(err))
			assert.Empty(t, store.calls, "a bad request must not reach the store")
		})
	}
}

func TestServicePassesValidRequestsToTheStore(t *testing.T) {
	ctx := context.Background()
	store := &recordingStore{}
	svc := membership.NewService(store, membership.ServiceOptions{})
	n, err := count(svc.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}, {UID: 2, Nickname: "b", HasNickname: true}}}))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = count(svc.Write(ctx, membership.Write{Op: membership.OpRemove, GroupID: "g", UIDs: []membership.UID{1}}))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = svc.Revision(ctx, "g")
	require.NoError(t, err)
	_, err = svc.ListMembers(ctx, "g", membership.ListOptions{}, nil)
	require.NoError(t, err)
	m, err := svc.Member(ctx, "g", 1)
	require.NoError(t, err)
	assert.Equal(t, membership.Member{UID: 1}, m)
	_, err = svc.Member(ctx, "g", 2)
	assert.Equal(t, membership.CodeNotMember, membership.ErrorCode(err))
	_, _, err = svc.Changes(ctx, membership.ChangeOptions{After: 5, Limit: membership.MaxPageSize})
	require.NoError(t, err)
	assert.Equal(t, []string{"add g", "remove g", "revision g", "list g", "member g", "member g", "changes 5"}, store.calls)
}

func TestNewServiceDefaultsMaxUsers(t *testing.T) {
	svc := membership.NewService(&recordingStore{}, membership.ServiceOptions{})
	us := make([]membership.User, membership.DefaultMaxUsers)
	for i := range us {
		us[i].UID = 1
	}
	_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: us})
	require.NoError(t, err)
	_, err = svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: append(us, membership.User{UID: 1})})
	assert.Equal(t, membership.CodeTooManyUsers, membership.ErrorCode(err))
}

// users returns users with the uids given, without nicknames.
func users(uids ...membership.UID) []membership.User {
	us := make([]membership.User, len(uids))
	for i, uid := range uids {
		us[i].UID = uid
	}
	return us
}

// count returns a change's count, for tests that check only that.
func count(res membership.Result, err error) (int, error) { return res.Count, err }

// The clock is read for the expiries a write names, once, and not at all
// for a write that names none: most adds name none, and a read of the
// clock is a sizeable part of a small request.
func TestWriteReadsTheClockOnlyForExpiries(t *testing.T) {
	reads := 0
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	svc := membership.NewService(&recordingStore{}, membership.ServiceOptions{Now: func() time.Time { reads++; return now }})
	add := func(us ...membership.User) error {
		_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: us})
		return err
	}
	require.NoError(t, add(users(1, 2, 3)...))
	assert.Equal(t, 0, reads, "reads of the clock for an add without expiries")
	soon := membership.Expiry{Set: true, At: now.Add(time.Hour)}
	require.NoError(t, add(membership.User{UID: 1, Expiry: soon}, membership.User{UID: 2}, membership.User{UID: 3, Expiry: soon}))
	assert.Equal(t, 1, reads, "reads of the clock for an add with two expiries")
	err := add(membership.User{UID: 1, Expiry: membership.Expiry{Set: true, At: now}})
	assert.Equal(t, membership.CodeInvalidUsers, membership.ErrorCode(err), "an expiry at the clock's time is not in the future")
}
