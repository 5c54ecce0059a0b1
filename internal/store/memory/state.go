package memory

import (
	"slices"
	"strings"

	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/packed"
	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/internal/store/memory/shards"
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
// so the caller must keep them out. For a backup, the caller holds the
// nesting and every shard (read locked), and the feed's changes are left
// out.
func (m *Store) exportState(forBackup bool) *snap.State {
	shardsHeld := forBackup
	st := &snap.State{
		NicknamesRevision: m.nicknames.Revision(),
		RemovedRevision:   membership.Revision(m.removedRevision.Load()),
	}
	if forBackup {
		st.LastRevision = m.feed.Stats().Last
	} else {
		st.LastRevision, st.Changes = m.feed.Export()
	}
	st.Keys = m.keys.Export()
	st.Nicknames = m.nicknames.Export()
	st.Accounts = m.ExportAccounts()
	// The shards are copied on every core at once: at a hundred million
	// memberships, the copy is seconds that writes wait.
	groups := make([][]snap.Group, len(m.shards))
	attrs := make([][]snap.GroupAttributes, len(m.shards))
	shards.Parallel(shards.Workers(len(m.shards)), len(m.shards), func(_, i int) {
		s := &m.shards[i]
		if !shardsHeld {
			s.mu.RLock()
			defer s.mu.RUnlock()
		}
		for g := range s.groups.All {
			var uids []membership.UID // nil for none, as a snapshot reads it
			if n := g.Members.Len(); n > 0 {
				uids = g.Members.AppendTo(make([]membership.UID, 0, n))
			}
			groups[i] = append(groups[i], snap.Group{ID: g.ID, Revision: g.Revision, UIDs: uids, Expiries: g.Expiries.Export()})
			if a := m.groups.Attrs(g); a != nil {
				attrs[i] = append(attrs[i], snap.GroupAttributes{ID: g.ID, Attributes: a.GroupAttributes, Created: nesting.TimeOf(a.Created), Modified: nesting.TimeOf(a.Modified)})
			}
		}
	})
	st.Groups = slices.Concat(groups...)
	st.GroupAttributes = slices.Concat(attrs...)
	slices.SortFunc(st.GroupAttributes, func(a, b snap.GroupAttributes) int { return strings.Compare(a.ID, b.ID) })
	if !forBackup {
		m.nestMu.RLock()
		defer m.nestMu.RUnlock()
	}
	m.nest.All(func(parent, child string, at int64) bool {
		st.Nestings = append(st.Nestings, snap.Nesting{Parent: parent, Child: child, Expires: nesting.TimeOf(at)})
		return true
	})
	return st
}

// A Loader loads a snapshot into an empty Store, which must not yet be
// shared, from its groups given one at a time (as snap.ReadFile gives
// them) and then the rest of it, building every index in bulk: a restart
// need not hold every uid of the snapshot decoded while it builds the
// Store. Its groups' members are filled as they come, and their reverse
// pairs gathered on another goroutine at the same time: a restart of a
// hundred million memberships is two passes over them, one on each core.
// Finish, or Drop, must follow.
type Loader struct {
	m       *Store
	indexed []*group.Group
	due     []expiry.Key
	scratch []packed.Pair // a group's members, for fill
	pairs   *reverse.Gathered
	// empty are the groups given with no members: those with subgroups
	// or attributes (Finish knows which) are kept, for their revisions.
	empty  []snap.Group
	nested bool
}

// Loader returns a Loader into m, which must be empty and not yet shared.
func (m *Store) Loader() *Loader {
	return &Loader{m: m, pairs: m.reverse.Gather()}
}

// Group loads g, whose UIDs it does not keep. It returns nil: its type is
// that of snap.ReadFile's each.
func (l *Loader) Group(g snap.Group) error {
	if len(g.UIDs) == 0 && !l.nested {
		l.empty = append(l.empty, snap.Group{ID: g.ID, Revision: g.Revision})
		return nil
	}
	m := l.m
	grp := m.shardOf(g.ID).groups.Add(g.ID)
	grp.Revision = g.Revision
	l.scratch = grp.Members.FillFrom(g.UIDs, l.scratch)
	l.due = m.due.Load(&grp.Expiries, grp.Number, g.Expiries, grp.Members.Contains, l.due)
	l.indexed = append(l.indexed, grp)
	m.counts.groups.Add(1)
	m.counts.members.Add(int64(len(g.UIDs)))
	l.pairs.Add(g.UIDs, grp.Number)
	return nil
}

// Drop stops l without finishing: the Store it loaded into is to be
// dropped (the snapshot did not read back).
func (l *Loader) Drop() {
	l.pairs.Drop()
	*l = Loader{}
}

// Finish loads the rest of st, all but its Groups, which were given to
// Group, and builds the indexes of the groups.
func (l *Loader) Finish(st *snap.State) {
	m := l.m
	l.nested = true
	for _, n := range st.Nestings {
		m.nest.Set(n.Parent, n.Child, nesting.MillisOf(n.Expires))
	}
	if len(st.Nestings) > 0 {
		m.nestRev = st.LastRevision
		m.nested.Store(true)
	}
	// Whatever changed of each group's nestings, it was by then; but a
	// group's revision moves with its subgroups, so theirs is as of its.
	m.nest.Stamp(st.LastRevision)
	m.nestNext.Store(m.nest.Next())
	attributed := make(map[string]bool, len(st.GroupAttributes))
	for _, a := range st.GroupAttributes {
		attributed[a.ID] = true
	}
	for _, g := range l.empty {
		if m.nest.Node(g.ID).SubgroupCount() > 0 || attributed[g.ID] {
			_ = l.Group(g)
		}
	}
	for _, g := range l.indexed {
		g.SetSubgroups(m.nest.Node(g.ID).SubgroupCount())
	}
	l.loadNodeRevisions(st.RemovedRevision)
	m.Directory.Load(st, func(id string) *group.Group { return m.shardOf(id).groups.Get(id) })
	m.removedRevision.Store(uint64(st.RemovedRevision))
	m.feed.Load(st.LastRevision, st.Changes)
	m.keys.Import(st.Keys)
	slices.SortFunc(l.indexed, func(a, b *group.Group) int { return strings.Compare(a.ID, b.ID) })
	m.index.Build(l.indexed)
	m.due.Fill(l.due)
	m.reverse.Fill(l.pairs)
	m.reverse.StampAll(st.LastRevision)
	m.nicknames.Load(st.Nicknames, st.NicknamesRevision, m.reverse.HasUser)
	*l = Loader{}
}

// loadNodeRevisions gives each node of the loaded nesting the revision of
// the latest change of its subgroups, as far as the snapshot tells it: its
// group's, which moves with them, even when none are left; for a group
// nested with neither members nor subgroups left, which the snapshot does
// not hold, the last group deletion's (removed), no older than the change
// that left it so, which is also the latest deletion of its group.
func (l *Loader) loadNodeRevisions(removed membership.Revision) {
	m := l.m
	for _, g := range l.indexed {
		if n := m.nest.Node(g.ID); n != nil {
			n.LoadChildrenRevision(g.Revision)
		}
	}
	var gone []string
	m.nest.All(func(_, child string, _ int64) bool {
		if m.shardOf(child).groups.Get(child) == nil {
			gone = append(gone, child)
		}
		return true
	})
	for _, id := range gone {
		m.nest.Node(id).LoadChildrenRevision(removed)
		m.nest.NoteDropped(id, removed)
	}
}

// Backup copies the whole state at one revision. Writes wait while it
// copies: it holds every shard, so that no change is halfway, and the copy
// is of memory only (no encoding, no I/O).
func (m *Store) Backup() *snap.Backup {
	m.keys.Block()
	defer m.keys.Unblock()
	m.nestMu.RLock()
	defer m.nestMu.RUnlock()
	unlock := m.lockAll(true)
	st := m.exportState(true)
	unlock()
	return snap.NewBackup(st)
}
