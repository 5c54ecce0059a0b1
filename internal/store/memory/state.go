package memory

import (
	"slices"

	"example.com/groupmembership/internal/store/snap"
	"example.com/groupmembership/membership"
)

// Export copies m's contents for a snapshot, the feed's changes included.
// Changes made while it runs may or may not be in the copy, so the caller
// must keep them out: the durable store's committer, the only goroutine
// that changes its Store, calls it.
func (m *Store) Export() *snap.State { return m.exportState(false) }

// exportState copies m's contents. For a snapshot, it copies the feed's
// changes too, and changes made while it runs may or may not be in the copy,
// so the caller must keep them out. For a backup, the caller holds every
// shard (read locked), and the feed's changes are left out.
func (m *Store) exportState(forBackup bool) *snap.State {
	shardsHeld := forBackup
	st := &snap.State{
		NicknamesRevision: membership.Revision(m.nicknamesRevision.Load()),
		RemovedRevision:   membership.Revision(m.removedRevision.Load()),
	}
	if forBackup {
		st.LastRevision = m.feed.stats().last
	} else {
		st.LastRevision, st.Changes = m.feed.export()
	}
	st.Keys = m.exportKeys()
	m.nicknamesMu.RLock()
	st.Nicknames = make(map[membership.UID]string, len(m.nicknames))
	for uid, nick := range m.nicknames {
		st.Nicknames[uid] = nick
	}
	m.nicknamesMu.RUnlock()
	for i := range m.shards {
		s := &m.shards[i]
		if !shardsHeld {
			s.mu.RLock()
		}
		for id, g := range s.groups {
			uids := make([]membership.UID, 0, g.members.size)
			for uid := range g.members.all {
				uids = append(uids, uid)
			}
			st.Groups = append(st.Groups, snap.Group{ID: id, Revision: g.revision, UIDs: uids, Expiries: exportExpiries(g.expiries)})
		}
		if !shardsHeld {
			s.mu.RUnlock()
		}
	}
	return st
}

// Import loads st into m, which must be empty and not yet shared, but for
// the nicknames of users in no group. It builds every index in bulk: each
// group's chunks directly, and the reverse index from all pairs sorted at
// once, rather than one insert at a time.
func (m *Store) Import(st *snap.State) {
	for uid, nick := range st.Nicknames {
		if nick != "" {
			m.nicknames[uid] = nick
		}
	}
	m.nicknamesRevision.Store(uint64(st.NicknamesRevision))
	m.removedRevision.Store(uint64(st.RemovedRevision))
	m.feed.load(st.LastRevision, st.Changes)
	m.importKeys(st.Keys)
	pairs := make([][]pair, len(m.reverse))
	var due []dueKey
	for _, g := range st.Groups {
		if len(g.UIDs) == 0 {
			continue
		}
		grp := &group{id: g.ID, number: m.groupNumbers.number(g.ID), revision: g.Revision}
		grp.members.fill(g.UIDs)
		due = m.importExpiries(grp, g.Expiries, due)
		m.shardOf(g.ID).groups[g.ID] = grp
		m.index.insert(grp)
		m.counts.groups.Add(1)
		m.counts.members.Add(int64(len(g.UIDs)))
		for _, uid := range g.UIDs {
			k, user := m.reverseKey(uid)
			pairs[k] = append(pairs[k], pair{user: user, group: grp.number})
		}
	}
	slices.SortFunc(due, dueCodec{}.compare)
	m.due.set.fill(due)
	for k, ps := range pairs {
		slices.SortFunc(ps, comparePairs)
		m.reverse[k].pairs.fill(ps)
		for i, p := range ps {
			if i == 0 || p.user != ps[i-1].user {
				m.counts.users.Add(1)
			}
		}
	}
	// A snapshot written before users in no group were forgotten may hold
	// their nicknames: forget them now.
	for uid := range m.nicknames {
		if k, user := m.reverseKey(uid); !m.reverse[k].pairs.hasUser(user) {
			delete(m.nicknames, uid)
		}
	}
	m.nicknameCount.Store(int64(len(m.nicknames)))
}

// Backup copies the whole state at one revision. Writes wait while it
// copies: it holds every shard, so that no change is halfway, and the copy
// is of memory only (no encoding, no I/O).
func (m *Store) Backup() *snap.Backup {
	m.keyedMu.Lock()
	defer m.keyedMu.Unlock()
	for i := range m.shards {
		m.shards[i].mu.RLock()
	}
	st := m.exportState(true)
	for i := range m.shards {
		m.shards[i].mu.RUnlock()
	}
	return snap.NewBackup(st)
}
