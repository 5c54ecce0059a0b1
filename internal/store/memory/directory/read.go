package directory

import (
	"context"
	"math"
	"slices"

	"example.com/groupmembership/internal/store/memory/accounts"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	domain "example.com/groupmembership/membership/directory"
)

// User implements membership/directory's Reader.
func (d *Directory) User(_ context.Context, uid membership.UID) (domain.UserRecord, bool, error) {
	d.nicknames.RLock()
	defer d.nicknames.RUnlock()
	e := d.nicknames.Accounts().Get(uid)
	if e == nil {
		return domain.UserRecord{}, false, nil
	}
	return d.userRecord(uid, e), true, nil
}

// userRecord returns uid's account e as the directory reads it. The
// caller holds the nicknames.
func (d *Directory) userRecord(uid membership.UID, e *accounts.Entry) domain.UserRecord {
	a := e.Account
	a.DisplayName = d.nicknames.Of(uid)
	return domain.UserRecord{UID: uid, Account: a, Created: nesting.TimeOf(e.Created), Modified: nesting.TimeOf(e.Modified), Revision: e.Revision}
}

// Users implements membership/directory's Reader. It copies the page
// holding the nicknames for reading, and calls list after: a page is at
// most MaxPageSize accounts.
func (d *Directory) Users(_ context.Context, q domain.UserQuery, list domain.UsersFunc) error {
	d.nicknames.RLock()
	table := d.nicknames.Accounts()
	var total int
	var uids []membership.UID
	switch {
	case q.UserName != "":
		if uid, ok := table.OwnerOf(q.UserName); ok {
			uids = []membership.UID{uid}
		}
		total, uids = len(uids), accounts.Page(uids, q.Offset, q.Limit)
	case q.ExternalID != "":
		uids = table.WithExternalID(q.ExternalID)
		total, uids = len(uids), accounts.Page(uids, q.Offset, q.Limit)
	default:
		total, uids = table.Len(), table.Page(q.Offset, q.Limit)
	}
	page := make([]domain.UserRecord, len(uids))
	for i, uid := range uids {
		page[i] = d.userRecord(uid, table.Get(uid))
	}
	d.nicknames.RUnlock()
	list(total, slices.Values(page))
	return nil
}

// FreeUID implements membership/directory's Reader.
func (d *Directory) FreeUID(context.Context) (membership.UID, error) {
	d.nicknames.RLock()
	largest := d.nicknames.Accounts().MaxUID()
	d.nicknames.RUnlock()
	largest = max(largest, d.reverse.MaxUID())
	if largest == math.MaxInt64 {
		return 0, membership.Errorf(membership.CodeUnavailable, "no uid is free above the largest in use, %d", largest)
	}
	return largest + 1, nil
}

// Group implements membership/directory's Reader.
func (d *Directory) Group(_ context.Context, groupID string, members membership.ListFunc) (domain.GroupRecord, bool, error) {
	g, unlock := d.s.RGroup(groupID)
	defer unlock()
	d.nicknames.RLock()
	defer d.nicknames.RUnlock()
	if g == nil {
		return domain.GroupRecord{}, false, nil
	}
	if members != nil {
		members(g.Members.Len(), g.Records(0, 0, d.nicknames))
	}
	return d.groupRecord(g), true, nil
}

// groupRecord returns g as the directory reads it. The caller holds its
// shard.
func (d *Directory) groupRecord(g *group.Group) domain.GroupRecord {
	rec := domain.GroupRecord{ID: g.ID, Attributes: account.GroupAttributes{DisplayName: g.ID},
		Revision: d.s.RevisionOf(g), Members: g.Members.Len(), Subgroups: g.Subgroups()}
	if a := d.tables.Attrs(g); a != nil {
		rec.Attributes, rec.HasAttributes = a.GroupAttributes, true
		rec.Created, rec.Modified = nesting.TimeOf(a.Created), nesting.TimeOf(a.Modified)
	}
	return rec
}

// GroupRecords implements membership/directory's Reader. Every group, as a
// page: it holds every shard for reading while it copies the page, as the
// store's Groups does, so that the page and the total are of one
// revision. By display name or external id: it finds the ids in the
// index, then reads each group holding its shard, so that each record is
// of one revision.
func (d *Directory) GroupRecords(_ context.Context, q domain.GroupQuery, list domain.GroupRecordsFunc) error {
	if q.DisplayName == "" && q.ExternalID == "" {
		total, page := d.groupRecordsPage(q.Offset, q.Limit)
		list(total, slices.Values(page))
		return nil
	}
	d.nicknames.RLock()
	var ids []string
	if q.DisplayName != "" {
		ids = slices.Clone(d.nicknames.Accounts().GroupsNamed(q.DisplayName))
		// A group without attributes has its id for display name.
		if i, found := slices.BinarySearch(ids, q.DisplayName); !found {
			ids = slices.Insert(ids, i, q.DisplayName)
		}
	} else {
		ids = slices.Clone(d.nicknames.Accounts().GroupsWithExternalID(q.ExternalID))
	}
	d.nicknames.RUnlock()
	var found []domain.GroupRecord
	for _, id := range ids {
		if rec, ok := d.groupMatching(id, q); ok {
			found = append(found, rec)
		}
	}
	list(len(found), slices.Values(accounts.Page(found, q.Offset, q.Limit)))
	return nil
}

// groupMatching returns group id's record when it exists and q selects
// it.
func (d *Directory) groupMatching(id string, q domain.GroupQuery) (domain.GroupRecord, bool) {
	if membership.ValidateGroupID(id) != nil {
		return domain.GroupRecord{}, false // a display name no group id can be
	}
	g, unlock := d.s.RGroup(id)
	defer unlock()
	if g == nil {
		return domain.GroupRecord{}, false
	}
	rec := d.groupRecord(g)
	if q.DisplayName != "" && rec.Attributes.DisplayName != q.DisplayName || q.ExternalID != "" && rec.Attributes.ExternalID != q.ExternalID {
		return domain.GroupRecord{}, false
	}
	return rec, true
}

// groupRecordsPage returns how many groups there are and the records of
// those from the offset-th, at most limit (0: all).
func (d *Directory) groupRecordsPage(offset, limit int) (int, []domain.GroupRecord) {
	index, unlock := d.s.RLockAll()
	defer unlock()
	var page []domain.GroupRecord
	index.From(offset, func(g *group.Group) bool {
		if limit > 0 && len(page) == limit {
			return false
		}
		page = append(page, d.groupRecord(g))
		return true
	})
	return index.Len(), page
}

// ExportAccounts copies the accounts for a snapshot, by uid ascending,
// their display names left to the nicknames.
func (d *Directory) ExportAccounts() []snap.Account {
	d.nicknames.RLock()
	defer d.nicknames.RUnlock()
	table := d.nicknames.Accounts()
	uids := table.UIDs()
	if len(uids) == 0 {
		return nil
	}
	out := make([]snap.Account, len(uids))
	for i, uid := range uids {
		e := table.Get(uid)
		out[i] = snap.Account{UID: uid, Account: e.Account, Created: nesting.TimeOf(e.Created), Modified: nesting.TimeOf(e.Modified), Revision: e.Revision}
	}
	return out
}

// Load loads st's accounts and groups' attributes into a store not yet
// shared, after its groups: groupOf returns each group loaded, nil for
// none.
func (d *Directory) Load(st *snap.State, groupOf func(id string) *group.Group) {
	for _, a := range st.Accounts {
		d.nicknames.LoadAccount(a.UID, accounts.Entry{Account: a.Account, Created: nesting.MillisOf(a.Created), Modified: nesting.MillisOf(a.Modified), Revision: a.Revision})
	}
	for _, a := range st.GroupAttributes {
		g := groupOf(a.ID)
		if g == nil {
			continue // Check refuses it: a backup restored is checked first
		}
		d.tables.SetAttrs(g, &group.Attrs{GroupAttributes: a.Attributes, Created: nesting.MillisOf(a.Created), Modified: nesting.MillisOf(a.Modified)})
		d.nicknames.LoadGroup(a.ID, a.Attributes)
	}
}
