package memory

import (
	"context"
	"math"
	"slices"

	"example.com/groupmembership/internal/store/memory/directory"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/membership"
)

var _ membership.Directory = (*Store)(nil)

// User implements membership.Directory.
func (m *Store) User(_ context.Context, uid membership.UID) (membership.UserRecord, bool, error) {
	m.nicknames.RLock()
	defer m.nicknames.RUnlock()
	e := m.nicknames.Accounts().Get(uid)
	if e == nil {
		return membership.UserRecord{}, false, nil
	}
	return m.userRecord(uid, e), true, nil
}

// userRecord returns uid's account e as the directory reads it. The
// caller holds the nicknames.
func (m *Store) userRecord(uid membership.UID, e *directory.Entry) membership.UserRecord {
	a := e.Account
	a.DisplayName = m.nicknames.Of(uid)
	return membership.UserRecord{UID: uid, Account: a, Created: nesting.TimeOf(e.Created), Modified: nesting.TimeOf(e.Modified), Revision: e.Revision}
}

// Users implements membership.Directory. It copies the page holding the
// nicknames for reading, and calls list after: a page is at most
// MaxPageSize accounts.
func (m *Store) Users(_ context.Context, q membership.UserQuery, list membership.UsersFunc) error {
	m.nicknames.RLock()
	accounts := m.nicknames.Accounts()
	var total int
	var uids []membership.UID
	switch {
	case q.UserName != "":
		if uid, ok := accounts.OwnerOf(q.UserName); ok {
			uids = []membership.UID{uid}
		}
		total, uids = len(uids), directory.Page(uids, q.Offset, q.Limit)
	case q.ExternalID != "":
		uids = accounts.WithExternalID(q.ExternalID)
		total, uids = len(uids), directory.Page(uids, q.Offset, q.Limit)
	default:
		total, uids = accounts.Len(), accounts.Page(q.Offset, q.Limit)
	}
	page := make([]membership.UserRecord, len(uids))
	for i, uid := range uids {
		page[i] = m.userRecord(uid, accounts.Get(uid))
	}
	m.nicknames.RUnlock()
	list(total, slices.Values(page))
	return nil
}

// FreeUID implements membership.Directory.
func (m *Store) FreeUID(context.Context) (membership.UID, error) {
	m.nicknames.RLock()
	largest := m.nicknames.Accounts().MaxUID()
	m.nicknames.RUnlock()
	largest = max(largest, m.reverse.MaxUID())
	if largest == math.MaxInt64 {
		return 0, membership.Errorf(membership.CodeUnavailable, "no uid is free above the largest in use, %d", largest)
	}
	return largest + 1, nil
}

// Group implements membership.Directory.
func (m *Store) Group(_ context.Context, groupID string, members membership.ListFunc) (membership.GroupRecord, bool, error) {
	s := m.shardOf(groupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	m.nicknames.RLock()
	defer m.nicknames.RUnlock()
	g := s.groups[groupID]
	if g == nil {
		return membership.GroupRecord{}, false, nil
	}
	if members != nil {
		members(g.Members.Len(), g.Records(0, 0, &m.nicknames))
	}
	return m.groupRecord(g), true, nil
}

// groupRecord returns g as the directory reads it. The caller holds its
// shard.
func (m *Store) groupRecord(g *group.Group) membership.GroupRecord {
	rec := membership.GroupRecord{ID: g.ID, Attributes: membership.GroupAttributes{DisplayName: g.ID},
		Revision: m.revisionOf(g), Members: g.Members.Len(), Subgroups: g.Subgroups}
	if a := g.Attrs; a != nil {
		rec.Attributes, rec.HasAttributes = a.GroupAttributes, true
		rec.Created, rec.Modified = nesting.TimeOf(a.Created), nesting.TimeOf(a.Modified)
	}
	return rec
}

// GroupRecords implements membership.Directory. Every group, as a page:
// it holds every shard for reading while it copies the page, as Groups
// does, so that the page and the total are of one revision. By display
// name or external id: it finds the ids in the index, then reads each
// group holding its shard, so that each record is of one revision.
func (m *Store) GroupRecords(_ context.Context, q membership.GroupQuery, list membership.GroupRecordsFunc) error {
	if q.DisplayName == "" && q.ExternalID == "" {
		total, page := m.groupRecordsPage(q.Offset, q.Limit)
		list(total, slices.Values(page))
		return nil
	}
	m.nicknames.RLock()
	var ids []string
	if q.DisplayName != "" {
		ids = slices.Clone(m.nicknames.Accounts().GroupsNamed(q.DisplayName))
		// A group without attributes has its id for display name.
		if i, found := slices.BinarySearch(ids, q.DisplayName); !found {
			ids = slices.Insert(ids, i, q.DisplayName)
		}
	} else {
		ids = slices.Clone(m.nicknames.Accounts().GroupsWithExternalID(q.ExternalID))
	}
	m.nicknames.RUnlock()
	var found []membership.GroupRecord
	for _, id := range ids {
		if rec, ok := m.groupMatching(id, q); ok {
			found = append(found, rec)
		}
	}
	list(len(found), slices.Values(directory.Page(found, q.Offset, q.Limit)))
	return nil
}

// groupMatching returns group id's record when it exists and q selects
// it.
func (m *Store) groupMatching(id string, q membership.GroupQuery) (membership.GroupRecord, bool) {
	if membership.ValidateGroupID(id) != nil {
		return membership.GroupRecord{}, false // a display name no group id can be
	}
	s := m.shardOf(id)
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups[id]
	if g == nil {
		return membership.GroupRecord{}, false
	}
	rec := m.groupRecord(g)
	if q.DisplayName != "" && rec.Attributes.DisplayName != q.DisplayName || q.ExternalID != "" && rec.Attributes.ExternalID != q.ExternalID {
		return membership.GroupRecord{}, false
	}
	return rec, true
}

// groupRecordsPage returns how many groups there are and the records of
// those from the offset-th, at most limit (0: all).
func (m *Store) groupRecordsPage(offset, limit int) (int, []membership.GroupRecord) {
	for i := range m.shards {
		m.shards[i].mu.RLock()
	}
	defer func() {
		for i := range m.shards {
			m.shards[i].mu.RUnlock()
		}
	}()
	m.indexMu.RLock()
	defer m.indexMu.RUnlock()
	total := m.index.Len()
	var page []membership.GroupRecord
	m.index.From(offset, func(g *group.Group) bool {
		if limit > 0 && len(page) == limit {
			return false
		}
		page = append(page, m.groupRecord(g))
		return true
	})
	return total, page
}
