package memory

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"example.com/groupmembership/internal/store/memory/directory"
	"example.com/groupmembership/internal/store/memory/expiring"
	"example.com/groupmembership/internal/store/memory/expiry"
	"example.com/groupmembership/internal/store/memory/feed"
	"example.com/groupmembership/internal/store/memory/group"
	"example.com/groupmembership/internal/store/memory/keys"
	"example.com/groupmembership/internal/store/memory/nesting"
	"example.com/groupmembership/internal/store/memory/nicknames"
	"example.com/groupmembership/internal/store/memory/reverse"
	"example.com/groupmembership/internal/store/memory/shards"
	"example.com/groupmembership/internal/store/memory/transitive"
	"example.com/groupmembership/membership"
)

// DefaultShards is the number of independently locked shards of a Store.
const DefaultShards = 64

// DefaultChangesKeepBytes is the default bound, in bytes, of the changes the
// feed keeps.
const DefaultChangesKeepBytes = feed.DefaultKeepBytes

// Store is a membership.Store that keeps everything in memory: each group as
// a sorted set of uids, and one nickname directory shared by all groups.
// Everything is lost when the process exits, unless another store (the
// durable one, the PostgreSQL one) keeps the changes and applies them to it.
//
// Groups are spread over shards by a hash of their id, each shard with its own
// lock, so that requests to different groups do not wait for each other.
type Store struct {
	epoch  uint64
	seed   maphash.Seed
	shards []shard

	// nicknames are the users' nicknames, one directory for all groups.
	nicknames nicknames.Directory

	// feed gives every change the next revision and keeps the latest
	// changes, so a revision names one change in the whole store.
	feed feed.Feed
	// keys are the Idempotency-Keys remembered, with what their writes
	// returned.
	keys keys.Table
	// due holds every expiry, by time (expiry.go).
	due expiry.Due
	// Queue is the expirer's side of the store (package expiring), which
	// reads and changes it through expiringStore.
	*expiring.Queue
	// replaysCountedByCaller is Options.ReplaysCountedByCaller.
	replaysCountedByCaller bool
	// removedRevision is the revision of the last group deleted. It is part
	// of every group's revision, as the nicknames' is: see revisionOf.
	removedRevision atomic.Uint64

	// The reverse index, from users to groups, by the groups' numbers
	// (group.Table). A change updates it while it holds the group's shard
	// lock, so forward and reverse change in one critical section.
	reverse reverse.Index
	// groups are the shards' tables of groups, shards[i].groups being
	// &groups[i]; groupNumbers guards their slots' ids.
	groups       group.Tables
	groupNumbers groupNumbers

	// indexMu guards index, the groups with members or subgroups in order
	// of their ids.
	// A change takes it with its group's shard held, and no later lock.
	indexMu sync.RWMutex
	index   group.Index

	// nestMu guards nest, the groups in groups, and nestRev, the revision
	// of the latest change of the nesting (nest.go). It is taken before
	// any shard.
	nestMu  sync.RWMutex
	nest    *nesting.Graph
	nestRev membership.Revision
	// nested is set once the nesting has held a nesting since the store
	// was made or loaded (nestChanged, Loader.Finish), under nestMu and
	// the shards of the groups at its ends. Until then no group has been
	// in one since, and revise records no group's making (group.Numbers).
	nested atomic.Bool
	// nestNext is when the earliest nesting ends (Unix milliseconds, 0:
	// none), written under nestMu, read without it by the expirer.
	nestNext atomic.Int64
	// Reader answers the reads of groups in groups (membership.Nesting)
	// through transitiveStore.
	*transitive.Reader
	// Directory is the accounts and the groups' attributes (their reads,
	// membership/directory's Reader), and their writes, through
	// directoryStore.
	*directory.Directory

	// counts are kept as the store changes, so that reading them for
	// metrics costs the same whatever the store holds.
	counts storeCounts
}

// storeCounts are the store's sizes (the reverse index counts the users).
// Each changes under the lock of what it counts, a group's shard; readers
// load them without locks, so together they are only as consistent as
// metrics need.
type storeCounts struct {
	groups  atomic.Int64 // groups with members or subgroups
	members atomic.Int64 // memberships
}

type shard struct {
	// mu guards groups and everything in them (but for what
	// groupNumbers guards), and counts its writers (package transitive
	// keeps what it read of a shard by that count).
	mu shards.Mutex
	// groups holds the shard's groups by id. A group with neither
	// members nor subgroups is deleted, so that removing everyone frees
	// its slot for the next group.
	groups *group.Table
}

var _ membership.Store = (*Store)(nil)

// Options configure NewWith.
type Options struct {
	// Shards is the number of shards; DefaultShards when <= 0.
	Shards int
	// ChangesKeep is how many of the latest changes the change feed keeps;
	// 0 keeps none (revisions still count), as -changes-keep 0 does.
	// New keeps membership.DefaultChangesKeep.
	ChangesKeep int
	// ChangesKeepBytes bounds the memory of the changes the feed keeps:
	// DefaultChangesKeepBytes when <= 0.
	ChangesKeepBytes int64
	// Epoch is the store's epoch (see membership.Store): a new random one
	// when 0.
	Epoch uint64
	// IdempotencyBytes and IdempotencyRetention bound the
	// Idempotency-Keys remembered (see membership.Idempotency):
	// membership.DefaultIdempotencyBytes and DefaultIdempotencyRetention
	// when <= 0.
	IdempotencyBytes     int64
	IdempotencyRetention time.Duration
	// ReplaysCountedByCaller says the store's Write and Batch are applied
	// from a log that every instance applies (the PostgreSQL store), so a
	// repeat they find is not one answered here: the caller counts those
	// it answers (NoteReplay).
	ReplaysCountedByCaller bool
}

// New returns an empty store with the default options.
func New() *Store {
	return NewWith(Options{ChangesKeep: membership.DefaultChangesKeep})
}

// NewWith returns an empty store configured by opts.
func NewWith(opts Options) *Store {
	n := opts.Shards
	if n <= 0 {
		n = DefaultShards
	}
	keep := max(opts.ChangesKeep, 0)
	keepBytes := opts.ChangesKeepBytes
	if keepBytes <= 0 {
		keepBytes = DefaultChangesKeepBytes
	}
	epoch := opts.Epoch
	if epoch == 0 {
		epoch = newEpoch()
	}
	m := &Store{
		epoch:                  epoch,
		feed:                   feed.New(keep, keepBytes),
		due:                    expiry.NewDue(),
		keys:                   keys.New(opts.IdempotencyBytes, opts.IdempotencyRetention),
		replaysCountedByCaller: opts.ReplaysCountedByCaller,
		seed:                   maphash.MakeSeed(),
		shards:                 make([]shard, max(n, 1)),
		nicknames:              nicknames.New(),
		reverse:                reverse.New(max(n, 1)),
		nest:                   nesting.New(),
	}
	m.setTables(group.NewTables(len(m.shards), m.seed, 0))
	m.Reader = transitive.New(transitiveStore{m})
	m.Directory = directory.New(directoryStore{expiringStore{m}}, &m.groups, &m.reverse, &m.due, &m.nicknames, &m.feed, &m.counts.members)
	m.Queue = expiring.New(expiringStore{m}, &m.due, &m.reverse, &m.nicknames, &m.counts.members)
	return m
}

// setTables makes ts the tables of m's groups, which has none yet, and
// indexes them.
func (m *Store) setTables(ts group.Tables) {
	m.groups = ts
	for i := range m.shards {
		m.shards[i].groups = &m.groups[i]
	}
	m.index = group.NewIndex(m.groups.At)
}

func (m *Store) shardOf(groupID string) *shard {
	return &m.shards[m.shardIndex(groupID)]
}

// shardIndex returns the index of groupID's shard in m.shards.
func (m *Store) shardIndex(groupID string) int {
	return int(maphash.String(m.seed, groupID) % uint64(len(m.shards)))
}

// revisionOf returns the revision of g (nil: a group with neither members
// nor subgroups). A
// nickname change alters the list of every group the user is in, and the
// store does not track which those are, so it counts as a change of every
// group; likewise a group deleted leaves no revision of its own behind, so
// the last deletion counts as a change of every absent group. Revisions come
// from one counter, so the maximum changes whenever any of them does.
func (m *Store) revisionOf(g *group.Group) membership.Revision {
	r := m.nicknames.Revision()
	if g != nil {
		return max(r, g.Revision)
	}
	return max(r, membership.Revision(m.removedRevision.Load()))
}

// add adds users to the group, when cond holds and none of them is
// inactive: in memory, it cannot fail otherwise.
func (m *Store) add(groupID string, users []membership.User, cond membership.Precondition, st feed.Stamp) (membership.Result, error) {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups.Get(groupID)
	if err := m.check(g, cond); err != nil {
		return membership.Result{}, err
	}
	if len(users) == 0 {
		return membership.Result{Revision: m.revisionOf(g)}, nil
	}
	if err := m.Directory.RefuseInactive(users); err != nil {
		return membership.Result{}, err
	}
	if g == nil {
		g = m.newGroup(s, groupID)
	}
	var buf [4]uint64
	locked := m.reverse.Lock(func(yield func(membership.UID) bool) {
		for _, u := range users {
			if !yield(u.UID) {
				return
			}
		}
	}, buf[:])
	added := g.Insert(&m.reverse, users)
	st = st.WithTimeFor(users)
	expiries := m.setExpiries(g, users, st.At)
	nicks := m.nicknames.Write()
	defer nicks.Release()
	hasNicknames := slices.ContainsFunc(users, func(u membership.User) bool { return u.HasNickname })
	var changed, reported []membership.Member
	if hasNicknames {
		changed, reported = nicks.Set(users, added)
	} else if len(added) > 0 && m.nicknames.Count() > 0 {
		m.nicknames.RLock()
		reported = m.nicknames.WithNicknamesOf(added, nil)
		m.nicknames.RUnlock()
	}
	m.counts.members.Add(int64(len(added)))
	added = group.Tight(added)
	if len(added) == 0 {
		if len(changed) == 0 && len(expiries) == 0 {
			m.reverse.Unlock(locked)
			return membership.Result{Revision: m.revisionOf(g)}, nil
		}
		added = nil // a change of nicknames or expiries only
	}
	m.reverse.TouchChanged(changed, expiries)
	rev := nicks.Record(&m.feed, membership.Change{Op: membership.OpAdd, GroupID: g.ID, UIDs: added, Nicknames: reported, Expiries: expiries}, st)
	m.reverse.UnlockAt(locked, rev)
	m.revise(g, rev)
	return membership.Result{Count: len(added), Revision: rev}, nil
}

// newGroup creates the group groupID in s, which the caller holds. It has
// no members yet: the caller adds some before it lets go of s.
func (m *Store) newGroup(s *shard, groupID string) *group.Group {
	m.groupNumbers.Lock()
	g := s.groups.Add(groupID)
	m.groupNumbers.Given(g.Number)
	m.groupNumbers.Unlock()
	m.counts.groups.Add(1)
	m.indexMu.Lock()
	m.index.Insert(g)
	m.indexMu.Unlock()
	return g
}

// revise gives g the revision rev of its change. A group made by it (it
// has no revision yet) is in no nesting since then: a read of it in no
// nesting answers at rev at least (group.Numbers), once the store has had
// a nesting (nested); before, the group was in none since the store was
// made or loaded, as a loaded group (0). Its shard orders this after any
// nesting a group of its id was in. The caller holds g's shard, and no
// reverse shard.
func (m *Store) revise(g *group.Group, rev membership.Revision) {
	if g.Revision == 0 && m.nested.Load() {
		m.groupNumbers.setUnnested(g.Number, rev)
	}
	g.Revision = rev
}

// dropGroup deletes g, which its last change, rev, left with no members,
// from s, which the caller holds with no later lock.
func (m *Store) dropGroup(s *shard, g *group.Group, rev membership.Revision) {
	m.counts.groups.Add(-1)
	// Out of the index first: a walk of it reads the ids of groups of
	// every shard.
	m.indexMu.Lock()
	m.index.Remove(g)
	m.indexMu.Unlock()
	storeMax(&m.removedRevision, uint64(rev))
	m.nest.NoteDropped(g.ID, rev)
	// g is zeroed: a transitive read that kept it (package transitive)
	// sees it changed.
	m.groupNumbers.Lock()
	s.groups.Remove(g)
	m.groupNumbers.Unlock()
}

// storeMax stores v in a unless a holds more already: groups dropped in
// different shards at once may get there out of their revisions' order.
func storeMax(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// check returns the error of a write whose precondition does not hold for
// g (nil: a group with no members), whose shard the caller holds.
func (m *Store) check(g *group.Group, cond membership.Precondition) error {
	if cond.IsZero() {
		return nil
	}
	size := 0
	if g != nil {
		size = g.Size()
	}
	if rev := m.revisionOf(g); !cond.Holds(size, rev) {
		return membership.PreconditionFailed(rev)
	}
	return nil
}

// remove removes uids from the group, when cond holds: in memory, it cannot
// fail otherwise.
func (m *Store) remove(groupID string, uids []membership.UID, cond membership.Precondition, st feed.Stamp) (membership.Result, error) {
	s := m.shardOf(groupID)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups.Get(groupID)
	if err := m.check(g, cond); err != nil {
		return membership.Result{}, err
	}
	if g == nil {
		return membership.Result{Revision: m.revisionOf(nil)}, nil
	}
	return m.removeHeld(s, g, uids, membership.OpRemove, st), nil
}

// removeHeld removes uids from g, in s, as a change of op (OpRemove or
// OpExpire). The caller holds s.
func (m *Store) removeHeld(s *shard, g *group.Group, uids []membership.UID, op membership.Op, st feed.Stamp) membership.Result {
	var buf [4]uint64
	locked := m.reverse.Lock(slices.Values(uids), buf[:])
	removed := make([]membership.UID, 0, len(uids))
	var inNoGroup []membership.UID
	for _, uid := range uids {
		if g.Members.Remove(uid) {
			if op != membership.OpExpire {
				m.due.End(&g.Expiries, g.Number, uid)
			}
			if m.reverse.Remove(uid, g.Number) {
				inNoGroup = append(inNoGroup, uid)
			}
			removed = append(removed, uid)
		}
	}
	if len(removed) == 0 {
		m.reverse.Unlock(locked)
		return membership.Result{Revision: m.revisionOf(g)}
	}
	slices.Sort(removed)
	if op == membership.OpExpire {
		m.due.EndExpired(&g.Expiries, removed)
	}
	cleared := m.nicknames.Clear(inNoGroup)
	m.counts.members.Add(-int64(len(removed)))
	rev := m.feed.Record(membership.Change{Op: op, GroupID: g.ID, UIDs: group.Tight(removed), Nicknames: cleared}, st, nil)
	m.reverse.UnlockAt(locked, rev)
	if g.Vacant() {
		m.dropGroup(s, g, rev)
	} else {
		g.Revision = rev
	}
	return membership.Result{Count: len(removed), Revision: rev}
}

// Writable returns nil: memory always takes changes. It is here so that
// every store answers readiness checks alike.
func (m *Store) Writable() error { return nil }

// Close does nothing: there is nothing to release.
func (m *Store) Close() error { return nil }

// Changes implements membership.Store.
func (m *Store) Changes(ctx context.Context, opts membership.ChangeOptions) ([]membership.Change, membership.Revision, error) {
	return m.feed.Changes(ctx, opts)
}

// ListMembers implements membership.Store.
func (m *Store) ListMembers(_ context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error) {
	s := m.shardOf(groupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	m.nicknames.RLock()
	defer m.nicknames.RUnlock()
	g := s.groups.Get(groupID)
	if g == nil {
		list(0, func(func(membership.Member) bool) {})
		return m.revisionOf(nil), nil
	}
	list(g.Members.Len(), g.Records(opts.After, opts.Limit, &m.nicknames))
	return m.revisionOf(g), nil
}

// Member implements membership.Store.
func (m *Store) Member(_ context.Context, groupID string, uid membership.UID) (membership.Member, bool, error) {
	s := m.shardOf(groupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.groups.Get(groupID)
	if g == nil || !g.Members.Contains(uid) {
		return membership.Member{}, false, nil
	}
	m.nicknames.RLock()
	defer m.nicknames.RUnlock()
	return membership.Member{UID: uid, Nickname: m.nicknames.Of(uid), Expires: expiry.Time(g.Expiries.Of(uid))}, true, nil
}

// Epoch implements membership.Store.
func (m *Store) Epoch() uint64 { return m.epoch }

// Revision implements membership.Store.
func (m *Store) Revision(_ context.Context, groupID string) (membership.Revision, error) {
	s := m.shardOf(groupID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return m.revisionOf(s.groups.Get(groupID)), nil
}

// UserGroups implements membership.Store. A user's group ids are sorted
// here, when listed (group.IDPage): a page of l groups costs O(k log l)
// time and O(l) memory for a user in k groups, however deep the page; the
// whole list O(k log k) and O(k).
func (m *Store) UserGroups(_ context.Context, uid membership.UID, opts membership.GroupListOptions, list membership.GroupListFunc) error {
	page := group.NewIDPage(opts.Limit)
	total := 0
	m.reverse.RLock(uid)
	// While uid's reverse shard is locked, no group of uid can be emptied,
	// so none of these numbers can be freed and given to another group.
	m.groupNumbers.RLock()
	m.reverse.GroupsOf(uid, func(n uint32) {
		id := m.groups.At(n).ID
		if opts.Within != nil && !opts.Within.Contains(id) {
			return
		}
		total++
		if id > opts.After {
			page.Add(id)
		}
	})
	m.groupNumbers.RUnlock()
	m.reverse.RUnlock(uid)
	list(total, slices.Values(page.Sorted()))
	return nil
}

// ReadOnly is the read methods of membership.Store. The durable store and
// the PostgreSQL store embed their Store as one, and apply every change to
// it themselves.
type ReadOnly interface {
	Groups(ctx context.Context, opts membership.GroupsOptions, list membership.GroupsFunc) (membership.Revision, error)
	ListMembers(ctx context.Context, groupID string, opts membership.ListOptions, list membership.ListFunc) (membership.Revision, error)
	Member(ctx context.Context, groupID string, uid membership.UID) (membership.Member, bool, error)
	CheckMembers(ctx context.Context, checks []membership.Check) ([]bool, membership.Revision, error)
	UserGroups(ctx context.Context, uid membership.UID, opts membership.GroupListOptions, list membership.GroupListFunc) error
	Revision(ctx context.Context, groupID string) (membership.Revision, error)
	Changes(ctx context.Context, opts membership.ChangeOptions) ([]membership.Change, membership.Revision, error)
}

// LatestRevision returns the latest revision given out.
func (m *Store) LatestRevision() membership.Revision { return m.feed.Stats().Last }

// newEpoch returns a random epoch, never 0.
func newEpoch() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}
