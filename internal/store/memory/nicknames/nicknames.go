// Package nicknames is the in-memory store's nickname directory: one
// nickname for each user, shared by every group, and the revision of its
// last change, which is part of every group's revision. A user without an
// entry has the nickname "", so "" is never kept; a user that a change
// leaves in no group is forgotten, so that memory follows the memberships,
// unless it has an account: the accounts (package directory) are kept
// under the same lock, since an account's display name is its user's
// nickname.
//
// Its lock's place in the store's lock order is in package memory's doc.
package nicknames

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store/memory/accounts"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// Directory is the nicknames of a store, and its accounts.
type Directory struct {
	// mu guards byUID and accounts.
	mu    sync.RWMutex
	byUID map[membership.UID]string
	// accounts are the accounts and the index of groups' attributes.
	accounts accounts.Table
	// inactive is accounts.Inactive(), set under mu and read without it:
	// an add skips the lock while no account is inactive.
	inactive atomic.Int64
	// count is len(byUID), set under mu and read without it: an add of
	// users without nicknames skips the lock while no user has one.
	count atomic.Int64
	// revision is the revision of the last change of a nickname.
	revision atomic.Uint64
}

// New returns an empty directory.
func New() Directory {
	return Directory{byUID: make(map[membership.UID]string), accounts: accounts.New()}
}

// Count returns how many users have a nickname.
func (d *Directory) Count() int64 { return d.count.Load() }

// Revision returns the revision of the last change of a nickname.
func (d *Directory) Revision() membership.Revision { return membership.Revision(d.revision.Load()) }

// RLock holds the directory for reading, so that a list reads every
// nickname, and the revision, as of one change.
func (d *Directory) RLock() { d.mu.RLock() }

// RUnlock lets go of what RLock holds.
func (d *Directory) RUnlock() { d.mu.RUnlock() }

// Of returns uid's nickname. The caller holds the directory (RLock, or a
// Write that set some).
func (d *Directory) Of(uid membership.UID) string {
	if len(d.byUID) == 0 {
		return ""
	}
	return d.byUID[uid]
}

// WithNicknamesOf returns changed, the nicknames an add changed, with the
// nickname of each user of added (ascending) who has one and is not in
// changed: the feed tells every nickname a user brings into a group, so
// that a follower who never saw the user in a list knows it. Both are in
// ascending uid order, and so is the result. The caller holds the
// directory.
func (d *Directory) WithNicknamesOf(added []membership.UID, changed []membership.Member) []membership.Member {
	if len(d.byUID) == 0 {
		return changed
	}
	var out []membership.Member
	i := 0
	for _, uid := range added {
		for i < len(changed) && changed[i].UID < uid {
			out = append(out, changed[i])
			i++
		}
		if i < len(changed) && changed[i].UID == uid {
			continue // changed, so in changed
		}
		if nick, ok := d.byUID[uid]; ok {
			out = append(out, membership.Member{UID: uid, Nickname: nick})
		}
	}
	if out == nil {
		return changed
	}
	return append(out, changed[i:]...)
}

// Changes reports whether recording the nicknames users give (the last of
// each user's) would change any.
func (d *Directory) Changes(users []membership.User) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, u := range last(users) {
		if d.byUID[u.UID] != u.Nickname {
			return true
		}
	}
	return false
}

// set records the nicknames users give, the last one when a user is given
// several, and returns those that changed, in ascending uid order. The
// caller holds mu.
func (d *Directory) set(users []membership.User) []membership.Member {
	var changed []membership.Member
	for _, u := range last(users) {
		if d.byUID[u.UID] == u.Nickname {
			continue
		}
		if u.Nickname == "" {
			delete(d.byUID, u.UID)
		} else {
			d.byUID[u.UID] = u.Nickname
		}
		changed = append(changed, u)
	}
	d.count.Store(int64(len(d.byUID)))
	return changed
}

// last returns the nicknames users give, in ascending uid order: for a
// user given several, the last one, which is the one that counts.
func last(users []membership.User) []membership.Member {
	var given []membership.Member
	for _, u := range users {
		if u.HasNickname {
			given = append(given, membership.Member{UID: u.UID, Nickname: u.Nickname})
		}
	}
	slices.SortStableFunc(given, func(a, b membership.Member) int { return cmp.Compare(a.UID, b.UID) })
	last := given[:0]
	for i, u := range given {
		if i+1 < len(given) && given[i+1].UID == u.UID {
			continue // a later nickname for the same user wins
		}
		last = append(last, u)
	}
	return last
}

// Forget forgets the nickname of uid, which a change left in no group,
// unless it has an account. It
// holds the directory only while it does, so that a change of a million
// members does not hold up every list meanwhile: no list shows uid, which
// is in no group, and the caller holds its reverse shard, so no add brings
// it back before the change is recorded.
func (d *Directory) Forget(uid membership.UID) {
	if d.count.Load() == 0 {
		return
	}
	d.mu.Lock()
	d.forget(uid)
	d.mu.Unlock()
}

// forget forgets the nickname of uid, unless it has an account. The
// caller holds mu.
func (d *Directory) forget(uid membership.UID) {
	if _, ok := d.byUID[uid]; ok && !d.accounts.Has(uid) {
		delete(d.byUID, uid)
		d.count.Store(int64(len(d.byUID)))
	}
}

// Clear forgets the nicknames of uids, users a change left in no group,
// but for those with an account, and returns them as the change says so: "" for each nickname it
// cleared, ascending by uid. No list showed the nickname any more, so no
// revision moves for it.
func (d *Directory) Clear(uids []membership.UID) []membership.Member {
	if len(uids) == 0 {
		return nil
	}
	var cleared []membership.Member
	d.mu.Lock()
	for _, uid := range uids {
		if _, ok := d.byUID[uid]; ok && !d.accounts.Has(uid) {
			delete(d.byUID, uid)
			cleared = append(cleared, membership.Member{UID: uid})
		}
	}
	d.count.Store(int64(len(d.byUID)))
	d.mu.Unlock()
	slices.SortFunc(cleared, func(a, b membership.Member) int { return cmp.Compare(a.UID, b.UID) })
	return cleared
}

// Export copies the nicknames, for a snapshot.
func (d *Directory) Export() map[membership.UID]string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return maps.Clone(d.byUID)
}

// Load sets the directory, which must be empty but for its accounts
// (LoadAccount) and not yet shared, from a snapshot: its nicknames of users
// inAGroup or with an account (one written before users in no group were
// forgotten may hold others'), and its revision.
func (d *Directory) Load(nicknames map[membership.UID]string, rev membership.Revision, inAGroup func(membership.UID) bool) {
	d.accounts.FinishLoad()
	d.inactive.Store(int64(d.accounts.Inactive()))
	for uid, nick := range nicknames {
		if nick != "" && (inAGroup(uid) || d.accounts.Has(uid)) {
			d.byUID[uid] = nick
		}
	}
	d.revision.Store(uint64(rev))
	d.count.Store(int64(len(d.byUID)))
}

// Write is how every write sets nicknames: it takes the directory at its
// first set and holds it until the write's change is recorded and, when a
// nickname changed, its revision published as the nicknames' (Record). A
// list reads the nicknames and the revision holding the directory for
// reading, so it never shows a nickname with a revision older than the
// change that set it. The zero value with d set holds nothing; Release is
// safe to call on every path, and again.
type Write struct {
	d       *Directory
	held    bool
	changed bool
	// touched are the users with an account whose account or nickname
	// the write changed: their accounts take its revision.
	touched []membership.UID
	// also run with the change's revision and time before any reader can
	// see it (Also).
	also []func(membership.Revision, time.Time)
}

// Also has fn run with the revision and the time of the write's change
// (zero for none) as Record records it, before any reader of the feed can
// see it, as the nicknames' and the accounts' revisions are published.
func (w *Write) Also(fn func(membership.Revision, time.Time)) { w.also = append(w.also, fn) }

// Write returns a Write of d.
func (d *Directory) Write() Write { return Write{d: d} }

// Set records the nicknames users give and returns those that changed,
// and those the change reports for added (see WithNicknamesOf).
func (w *Write) Set(users []membership.User, added []membership.UID) (changed, reported []membership.Member) {
	if !w.held {
		w.d.mu.Lock()
		w.held = true
	}
	changed = w.d.set(users)
	w.changed = w.changed || len(changed) > 0
	if w.d.accounts.Len() > 0 {
		for _, c := range changed {
			if w.d.accounts.Has(c.UID) {
				w.touched = append(w.touched, c.UID)
			}
		}
	}
	return changed, w.d.WithNicknamesOf(added, changed)
}

// Forget forgets the nickname of uid, which the write left in no group,
// under the lock the write holds if it holds it (see Directory.Forget).
func (w *Write) Forget(uid membership.UID) {
	if !w.held {
		w.d.Forget(uid)
		return
	}
	w.d.forget(uid)
}

// Record records c in f, publishing its revision as the nicknames' when
// the write changed any, and as the revision of each account it changed
// (with the change's time), then releases the directory.
func (w *Write) Record(f *feed.Feed, c membership.Change, st feed.Stamp) membership.Revision {
	var published func(membership.Revision, time.Time)
	if w.changed || len(w.touched) > 0 || len(w.also) > 0 {
		published = func(rev membership.Revision, at time.Time) {
			for _, fn := range w.also {
				fn(rev, at)
			}
			millis := int64(0)
			if !at.IsZero() {
				millis = at.UnixMilli()
			}
			// A nickname change moves every group's revision: before a
			// reader of the feed or of X-Revision can see it, so that no
			// list (nor 304) of another group is older than a revision
			// seen.
			if w.changed {
				w.d.revision.Store(uint64(rev))
			}
			for _, uid := range w.touched {
				w.d.accounts.Stamp(uid, rev, millis)
			}
		}
	}
	rev := f.Record(c, st, published)
	w.Release()
	return rev
}

// Release lets go of the directory, if the write holds it.
func (w *Write) Release() {
	if w.held {
		w.held = false
		w.d.mu.Unlock()
	}
}

// Accounts returns the accounts, which the caller reads holding the
// directory (RLock, or a Write that holds it: Write.Accounts).
func (d *Directory) Accounts() *accounts.Table { return &d.accounts }

// InactiveAccounts returns how many accounts are inactive, without the
// lock: while none is, an add need not look for one.
func (d *Directory) InactiveAccounts() int64 { return d.inactive.Load() }

// LoadAccount adds uid's account as a snapshot keeps it, to a directory
// not yet shared; Load must follow the last.
func (d *Directory) LoadAccount(uid membership.UID, e accounts.Entry) { d.accounts.Load(uid, e) }

// LoadGroup indexes group id with attributes a, in a directory not yet
// shared; Load must follow the last.
func (d *Directory) LoadGroup(id string, a account.GroupAttributes) { d.accounts.LoadGroup(id, a) }

// hold takes the directory for the write, if it does not hold it yet.
func (w *Write) hold() {
	if !w.held {
		w.d.mu.Lock()
		w.held = true
	}
}

// Accounts holds the directory and returns its accounts.
func (w *Write) Accounts() *accounts.Table {
	w.hold()
	return &w.d.accounts
}

// SetAccount sets uid's account to a, and the user's nickname to a's
// DisplayName; the account takes the revision and the time of the change
// as Record records it. The caller has checked that no other account has
// its user name.
func (w *Write) SetAccount(uid membership.UID, a account.Account) {
	w.hold()
	w.d.accounts.Set(uid, a)
	w.d.inactive.Store(int64(w.d.accounts.Inactive()))
	w.touched = append(w.touched, uid)
	if changed := w.d.set([]membership.User{{UID: uid, Nickname: a.DisplayName, HasNickname: true}}); len(changed) > 0 {
		w.changed = true
	}
}

// DeleteAccount removes uid's account, and its nickname when it is in no
// group (inNoGroup), and reports whether it had an account.
func (w *Write) DeleteAccount(uid membership.UID, inNoGroup bool) bool {
	w.hold()
	had := w.d.accounts.Delete(uid)
	w.d.inactive.Store(int64(w.d.accounts.Inactive()))
	if inNoGroup {
		w.d.forget(uid)
	}
	return had
}

// IndexGroup moves group id in the index of groups' attributes from old
// to new (nil: none).
func (w *Write) IndexGroup(id string, old, new *account.GroupAttributes) {
	w.hold()
	w.d.accounts.IndexGroup(id, old, new)
}
