// Package accounts is the in-memory store's directory: the accounts of
// provisioned users (account.Account), in uid order, with the index of
// their user names (folded, unique) and external ids, and the index of
// the groups that have attributes by display name and external id. The
// groups' attributes themselves are kept in the groups (package group).
//
// It has no lock: the nickname directory's guards it (package nicknames),
// since an account's display name is its user's nickname.
package accounts

import (
	"cmp"
	"slices"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// Entry is one account as the table keeps it: its DisplayName is kept as
// the user's nickname, not here.
type Entry struct {
	Account account.Account
	// Created and Modified are Unix milliseconds; Revision that of the
	// last change of the account or of its user's nickname.
	Created, Modified int64
	Revision          membership.Revision
}

// Table is the directory.
type Table struct {
	byUID map[membership.UID]*Entry
	// order holds the uids of byUID, ascending: pages of accounts are
	// slices of it.
	order []membership.UID
	// byName maps each folded user name to its account's uid.
	byName map[string]membership.UID
	// byExternal maps an external id to the uids of its accounts,
	// ascending.
	byExternal map[string][]membership.UID
	// inactive counts the accounts not active.
	inactive int
	// groupsByName and groupsByExternal map a display name and an
	// external id to the ids of the groups with those attributes, in byte
	// order.
	groupsByName     map[string][]string
	groupsByExternal map[string][]string
}

// New returns an empty table.
func New() Table {
	return Table{
		byUID:            map[membership.UID]*Entry{},
		byName:           map[string]membership.UID{},
		byExternal:       map[string][]membership.UID{},
		groupsByName:     map[string][]string{},
		groupsByExternal: map[string][]string{},
	}
}

// Len returns how many accounts there are.
func (t *Table) Len() int { return len(t.order) }

// Inactive returns how many accounts are inactive.
func (t *Table) Inactive() int { return t.inactive }

// Get returns uid's account, nil when it has none. The entry is the
// table's: the caller copies it.
func (t *Table) Get(uid membership.UID) *Entry { return t.byUID[uid] }

// Has reports whether uid has an account.
func (t *Table) Has(uid membership.UID) bool { return t.byUID[uid] != nil }

// IsInactive reports whether uid has an account that is not active.
func (t *Table) IsInactive(uid membership.UID) bool {
	e := t.byUID[uid]
	return e != nil && !e.Account.Active
}

// OwnerOf returns the uid whose account has the user name name, compared
// case-insensitively.
func (t *Table) OwnerOf(name string) (membership.UID, bool) {
	uid, ok := t.byName[account.FoldUserName(name)]
	return uid, ok
}

// WithExternalID returns the uids of the accounts with the external id,
// ascending. The slice is the table's: the caller copies what it keeps
// past the lock.
func (t *Table) WithExternalID(id string) []membership.UID { return t.byExternal[id] }

// Page returns the uids of accounts from the offset-th, at most limit (0:
// all), ascending. The slice is the table's, as WithExternalID's is.
func (t *Table) Page(offset, limit int) []membership.UID {
	return page(t.order, offset, limit)
}

// page returns s[offset:offset+limit], within s (limit 0: to the end).
func page[T any](s []T, offset, limit int) []T {
	if offset >= len(s) {
		return nil
	}
	s = s[offset:]
	if limit > 0 && limit < len(s) {
		s = s[:limit]
	}
	return s
}

// Page returns s[offset:offset+limit], within s: the page of a query's
// results (limit 0: to the end).
func Page[T any](s []T, offset, limit int) []T { return page(s, offset, limit) }

// MaxUID returns the largest uid with an account, 0 for none.
func (t *Table) MaxUID() membership.UID {
	if len(t.order) == 0 {
		return 0
	}
	return t.order[len(t.order)-1]
}

// Set sets uid's account to a (its DisplayName is not kept); Stamp gives
// it its revision and times. The caller has checked that no other account
// has its user name.
func (t *Table) Set(uid membership.UID, a account.Account) {
	a.DisplayName = ""
	e := t.byUID[uid]
	if e == nil {
		e = &Entry{}
		t.byUID[uid] = e
		i, _ := slices.BinarySearch(t.order, uid)
		t.order = slices.Insert(t.order, i, uid)
	} else {
		t.unindex(uid, e)
	}
	e.Account = a
	t.index(uid, e)
}

// Load adds uid's account as a snapshot keeps it, to a table not yet
// shared; Finish must follow the last.
func (t *Table) Load(uid membership.UID, e Entry) {
	e.Account.DisplayName = ""
	entry := e
	t.byUID[uid] = &entry
	t.order = append(t.order, uid)
	t.index(uid, &entry)
}

// FinishLoad sorts what Load added.
func (t *Table) FinishLoad() {
	slices.Sort(t.order)
	for _, uids := range t.byExternal {
		slices.Sort(uids)
	}
	for _, ids := range t.groupsByName {
		slices.Sort(ids)
	}
	for _, ids := range t.groupsByExternal {
		slices.Sort(ids)
	}
}

// Stamp records that uid's account, or its nickname, changed at revision
// rev, at millis (0: a change without a time, which keeps the one it had).
func (t *Table) Stamp(uid membership.UID, rev membership.Revision, millis int64) {
	e := t.byUID[uid]
	if e == nil {
		return
	}
	e.Revision = rev
	if millis != 0 {
		e.Modified = millis
		if e.Created == 0 {
			e.Created = millis
		}
	}
}

// Delete removes uid's account, and reports whether it had one.
func (t *Table) Delete(uid membership.UID) bool {
	e := t.byUID[uid]
	if e == nil {
		return false
	}
	t.unindex(uid, e)
	delete(t.byUID, uid)
	if i, ok := slices.BinarySearch(t.order, uid); ok {
		t.order = slices.Delete(t.order, i, i+1)
	}
	return true
}

func (t *Table) index(uid membership.UID, e *Entry) {
	t.byName[account.FoldUserName(e.Account.UserName)] = uid
	if x := e.Account.ExternalID; x != "" {
		t.byExternal[x] = insertSorted(t.byExternal[x], uid)
	}
	if !e.Account.Active {
		t.inactive++
	}
}

func (t *Table) unindex(uid membership.UID, e *Entry) {
	delete(t.byName, account.FoldUserName(e.Account.UserName))
	if x := e.Account.ExternalID; x != "" {
		t.byExternal[x] = removeSorted(t.byExternal[x], uid)
		if len(t.byExternal[x]) == 0 {
			delete(t.byExternal, x)
		}
	}
	if !e.Account.Active {
		t.inactive--
	}
}

// IndexGroup moves group id in the index of groups from the attributes old
// to new (nil: none).
func (t *Table) IndexGroup(id string, old, new *account.GroupAttributes) {
	if old != nil {
		t.groupsByName[old.DisplayName] = removeSorted(t.groupsByName[old.DisplayName], id)
		if len(t.groupsByName[old.DisplayName]) == 0 {
			delete(t.groupsByName, old.DisplayName)
		}
		if x := old.ExternalID; x != "" {
			t.groupsByExternal[x] = removeSorted(t.groupsByExternal[x], id)
			if len(t.groupsByExternal[x]) == 0 {
				delete(t.groupsByExternal, x)
			}
		}
	}
	if new != nil {
		t.groupsByName[new.DisplayName] = insertSorted(t.groupsByName[new.DisplayName], id)
		if x := new.ExternalID; x != "" {
			t.groupsByExternal[x] = insertSorted(t.groupsByExternal[x], id)
		}
	}
}

// LoadGroup indexes group id with attributes a, in a table not yet
// shared; FinishLoad must follow the last.
func (t *Table) LoadGroup(id string, a account.GroupAttributes) {
	t.groupsByName[a.DisplayName] = append(t.groupsByName[a.DisplayName], id)
	if a.ExternalID != "" {
		t.groupsByExternal[a.ExternalID] = append(t.groupsByExternal[a.ExternalID], id)
	}
}

// GroupsNamed returns the ids of the groups with attributes whose display
// name is name, in byte order. The slice is the table's, as
// WithExternalID's is.
func (t *Table) GroupsNamed(name string) []string { return t.groupsByName[name] }

// GroupsWithExternalID returns the ids of the groups whose external id is
// id, in byte order. The slice is the table's, as WithExternalID's is.
func (t *Table) GroupsWithExternalID(id string) []string { return t.groupsByExternal[id] }

// Export copies the accounts, for a snapshot.
func (t *Table) Export() map[membership.UID]Entry {
	out := make(map[membership.UID]Entry, len(t.byUID))
	for uid, e := range t.byUID {
		out[uid] = *e
	}
	return out
}

// UIDs returns the uids with accounts, ascending, as a copy.
func (t *Table) UIDs() []membership.UID { return slices.Clone(t.order) }

// insertSorted inserts v in s, sorted, unless it is there, and returns s.
func insertSorted[T cmp.Ordered](s []T, v T) []T {
	i, ok := slices.BinarySearch(s, v)
	if ok {
		return s
	}
	return slices.Insert(s, i, v)
}

// removeSorted removes v from s, sorted, and returns s.
func removeSorted[T cmp.Ordered](s []T, v T) []T {
	i, ok := slices.BinarySearch(s, v)
	if !ok {
		return s
	}
	return slices.Delete(s, i, i+1)
}
