package memory

import (
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/membership"
)

// nicknameWrite is how every write sets nicknames: it takes nicknamesMu at
// its first set and holds it until the write's change is recorded and,
// when a nickname changed, its revision published as the nicknames'
// (record). A list reads the nicknames and the revision under nicknamesMu,
// so it never shows a nickname with a revision older than the change that
// set it. The zero value with m set holds nothing; release is safe to call
// on every path, and again.
type nicknameWrite struct {
	m       *Store
	held    bool
	changed bool
}

// set records the nicknames users give and returns those that changed, and
// those the change reports for added (see withNicknamesOf).
func (w *nicknameWrite) set(users []membership.User, added []membership.UID) (changed, reported []membership.Member) {
	if !w.held {
		w.m.nicknamesMu.Lock()
		w.held = true
	}
	changed = w.m.setNicknames(users)
	w.changed = w.changed || len(changed) > 0
	return changed, w.m.withNicknamesOf(added, changed)
}

// forget forgets the nickname of uid, which the write left in no group,
// under the lock the write holds if it holds it (see Store.forget).
func (w *nicknameWrite) forget(uid membership.UID) {
	if !w.held {
		w.m.forget(uid)
		return
	}
	if _, ok := w.m.nicknames[uid]; ok {
		delete(w.m.nicknames, uid)
		w.m.nicknameCount.Store(int64(len(w.m.nicknames)))
	}
}

// record records c in the feed, publishing its revision as the
// nicknames' when the write changed any, then releases nicknamesMu.
func (w *nicknameWrite) record(c membership.Change, st feed.Stamp) membership.Revision {
	var published func(membership.Revision)
	if w.changed {
		// A nickname change moves every group's revision: before a reader
		// of the feed or of X-Revision can see it, so that no list (nor
		// 304) of another group is older than a revision seen.
		published = func(rev membership.Revision) { w.m.nicknamesRevision.Store(uint64(rev)) }
	}
	rev := w.m.feed.Record(c, st, published)
	w.release()
	return rev
}

// release lets go of nicknamesMu, if the write holds it.
func (w *nicknameWrite) release() {
	if w.held {
		w.held = false
		w.m.nicknamesMu.Unlock()
	}
}
