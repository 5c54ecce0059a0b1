package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/directory"
	"example.com/groupmembership/membership/scope"
)

// The ops of membership_changes (migrations 0001, 0002, 0004, 0006, 0007 and
// 0009), indexed by their number there: the numbers of the data
// directory's log.
var ops = &writecodec.Ops

// The ops of the expire rows (migrations 0006 and 0007).
const (
	opExpire       int16 = 7
	opExpireGroups int16 = 11
)

// change is a membership.Write as a row of membership_changes holds it.
type change struct {
	op      int16
	groupID string
	uids    []int64
	// nicknames go with uids on an add or a replace: each user's, nil for
	// none given.
	nicknames [][]byte
	// expiries go with uids on an add or a replace: each user's expiry,
	// in milliseconds since 1970, 0 for made permanent, nil for none
	// given (the membership keeps its own); nil (NULL) when no user has
	// one. A TTL is a time here (changeOf).
	expiries []*int64
	// asOf is an expire's: its uids whose expiry is at or before it end.
	// Nil (NULL) for the other ops.
	asOf *time.Time
	// subgroups are a nesting write's (ops 8 to 11), in its order; nil
	// (NULL) for the other ops.
	subgroups []string
	// subgroupExpiries go with subgroups on an add_groups or a
	// replace_groups, as expiries with uids.
	subgroupExpiries []*int64
	// maxDepth is the writer's bound on the depth of a chain of nestings,
	// and maxAncestors on the groups a group may be below (migration
	// 0010), on a write that may deepen one (add_groups, replace_groups,
	// a batch); nil (NULL) or 0 for none.
	maxDepth     *int32
	maxAncestors *int32
	ifRevisions  []int64 // revisions, bit for bit
	ifExists     bool
	ifEmpty      bool
	actor        *int64 // nil: none (NULL)
	// principal is who made the change, as the service authenticated it
	// (migration 0008); nil (NULL) for none.
	principal *string
	// batch holds a batch's writes (op 6), encoded by appendBatch; nil
	// for the other ops.
	batch []byte
	// attributes hold a set_user's account or a set_group's attributes,
	// as package writecodec lays them out (migration 0009); nil (NULL) for
	// the other ops.
	attributes []byte
	// idem is the write's or batch's Idempotency, with its fingerprint;
	// a zero Key for none (NULL).
	idem membership.Idempotency
	// sequencedAt is when the sequencer placed the change: its time, the
	// same on every instance. Only a change read from the log has one.
	sequencedAt time.Time
}

// changeOf returns w as a row of the log, or an error for a write that
// memory would refuse: an unknown op, a remove_user that names not one uid,
// an expire (of memberships or nestings) with no time.
//
// A keyed write's row carries its key and the Service's fingerprint
// (membership.FingerprintWrite, TTLs and all, so that a retry with the
// same TTLs repeats it).
//
// Each user's and subgroup's TTL is turned into the time it sets, counted
// from now, by this instance's clock: the log holds times only, and the
// change is committed, and placed (its time), moments later. A nesting
// write that may deepen a chain carries its bounds on depth and ancestors.
func changeOf(w membership.Write) (change, error) {
	c := change{groupID: w.GroupID, idem: w.Idem, principal: principalOf(w.Principal)}
	if w.Actor != 0 {
		actor := int64(w.Actor)
		c.actor = &actor
	}
	c.op = int16(opNumber(w.Op))
	switch w.Op {
	case membership.OpAdd, membership.OpReplace:
		c.setUsers(membership.ResolveTTLs(w.Users, time.Now()))
	case membership.OpDeleteGroup:
		c.uids = []int64{} // it names no uid
	case membership.OpRemove:
		c.uids = int64s(w.UIDs)
	case membership.OpRemoveUser:
		if len(w.UIDs) != 1 {
			return change{}, fmt.Errorf("remove_user names %d uids, not one", len(w.UIDs))
		}
		c.uids = []int64{int64(w.UIDs[0])}
		return c, nil // it has no group to hold a precondition
	case membership.OpExpire:
		if w.AsOf.IsZero() {
			return change{}, fmt.Errorf("an expire of group %q names no time its expiries are due as of", w.GroupID)
		}
		c.uids = int64s(w.UIDs)
		asOf := w.AsOf
		c.asOf = &asOf
		return c, nil // the service's own change: no precondition
	case membership.OpAddGroups, membership.OpReplaceGroups:
		c.setSubgroups(membership.ResolveSubgroupTTLs(w.Subgroups, time.Now()))
		c.setBounds(w.MaxDepth, w.MaxAncestors)
	case membership.OpRemoveGroups:
		c.setSubgroups(w.Subgroups)
		c.subgroupExpiries = nil // a remove ignores them
	case membership.OpExpireGroups:
		if w.AsOf.IsZero() {
			return change{}, fmt.Errorf("an expire of group %q's subgroups names no time they are due as of", w.GroupID)
		}
		c.setSubgroups(w.Subgroups)
		c.subgroupExpiries = nil
		asOf := w.AsOf
		c.asOf = &asOf
		return c, nil // the service's own change: no precondition
	case membership.OpSetUser, membership.OpDeleteUser:
		if len(w.UIDs) != 1 || (w.Op == membership.OpSetUser) != (w.Account != nil) {
			return change{}, fmt.Errorf("%s names %d uids, account %v", w.Op, len(w.UIDs), w.Account != nil)
		}
		c.groupID, c.uids = "", []int64{int64(w.UIDs[0])}
		if w.Account != nil {
			c.attributes = writecodec.AppendAccount(nil, *w.Account)
		}
	case membership.OpSetGroup:
		if w.Group == nil {
			return change{}, fmt.Errorf("set_group without attributes")
		}
		c.uids = []int64{}
		c.attributes = writecodec.AppendGroupAttributes(nil, *w.Group)
	default:
		return change{}, fmt.Errorf("unknown op %q", w.Op)
	}
	for _, rev := range w.If.Revisions {
		c.ifRevisions = append(c.ifRevisions, int64(rev))
	}
	c.ifExists, c.ifEmpty = w.If.Exists, w.If.Empty
	return c, nil
}

// setUsers sets c's uids, nicknames and expiries from users, whose TTLs
// are times already.
func (c *change) setUsers(users []membership.User) {
	c.uids = make([]int64, len(users))
	c.nicknames = make([][]byte, len(users)) // bytea: a nickname may hold any character, NUL included
	for i, u := range users {
		c.uids[i] = int64(u.UID)
		if u.HasNickname {
			c.nicknames[i] = append([]byte{}, u.Nickname...) // not nil, even when empty: nil is NULL, no nickname
		}
		if u.Expiry.Set {
			if c.expiries == nil {
				c.expiries = make([]*int64, len(users))
			}
			ms := writecodec.Millis(u.Expiry.At) // 0: made permanent
			c.expiries[i] = &ms
		}
	}
}

// int64s returns uids as the column holds them.
func int64s(uids []membership.UID) []int64 {
	out := make([]int64, len(uids))
	for i, uid := range uids {
		out[i] = int64(uid)
	}
	return out
}

// setSubgroups sets c's subgroups and their expiries from groups, whose
// TTLs are times already; a nesting row names no uid.
func (c *change) setSubgroups(groups []membership.Subgroup) {
	c.uids = []int64{}
	c.subgroups = make([]string, len(groups))
	for i, g := range groups {
		c.subgroups[i] = g.GroupID
		if g.Expiry.Set {
			if c.subgroupExpiries == nil {
				c.subgroupExpiries = make([]*int64, len(groups))
			}
			ms := writecodec.Millis(g.Expiry.At) // 0: made permanent
			c.subgroupExpiries[i] = &ms
		}
	}
}

// setBounds sets c's bounds on depth and ancestors as the max_depth and
// max_ancestors columns hold them: NULL for none, at most
// membership.MaxMaxDepth and MaxMaxAncestors, which an int32 holds.
func (c *change) setBounds(depth, ancestors int) {
	if depth > 0 {
		d := int32(min(depth, membership.MaxMaxDepth))
		c.maxDepth = &d
	}
	if ancestors > 0 {
		a := int32(min(ancestors, membership.MaxMaxAncestors))
		c.maxAncestors = &a
	}
}

// known reports whether this build knows c's op.
func (c change) known() bool { return c.op > 0 && int(c.op) < len(ops) && ops[c.op] != "" }

// unreadable says why c, read from the log, cannot be applied as it was
// written ("" when it can): the database's checks refuse such rows (0006),
// and one that holds them anyway is neither applied otherwise nor
// skipped. c's op is known.
func (c change) unreadable() string {
	expire := c.op == opExpire || c.op == opExpireGroups
	nesting := membership.IsNestingOp(ops[c.op])
	addsGroups := ops[c.op] == membership.OpAddGroups || ops[c.op] == membership.OpReplaceGroups
	switch {
	case c.principal != nil && scope.ValidatePrincipal(*c.principal) != nil:
		return fmt.Sprintf("a principal that is not one (%v)", scope.ValidatePrincipal(*c.principal))
	case expire && c.asOf == nil:
		return "an expire without its time (as_of)"
	case !expire && c.asOf != nil:
		return "a time (as_of) on an op other than expire"
	case nesting != (c.subgroups != nil):
		return "subgroups on an op other than a nesting write, or a nesting write without them"
	case nesting && len(c.uids) != 0:
		return "uids on a nesting write"
	case c.subgroupExpiries != nil && !addsGroups:
		return "subgroup expiries on an op other than add_groups and replace_groups"
	case c.subgroupExpiries != nil && len(c.subgroupExpiries) != len(c.subgroups):
		return fmt.Sprintf("%d subgroup expiries for %d subgroups", len(c.subgroupExpiries), len(c.subgroups))
	case c.maxDepth != nil && (*c.maxDepth < 0 || !addsGroups && c.op != opBatch):
		return fmt.Sprintf("a bound on depth of %d on op %s", *c.maxDepth, ops[c.op])
	case c.maxAncestors != nil && (*c.maxAncestors < 0 || !addsGroups && c.op != opBatch):
		return fmt.Sprintf("a bound on ancestors of %d on op %s", *c.maxAncestors, ops[c.op])
	}
	if why := c.unreadableAttributes(); why != "" {
		return why
	}
	for _, ms := range c.subgroupExpiries {
		if ms != nil && *ms < 0 {
			return fmt.Sprintf("a subgroup expiry before 1970 (%d)", *ms)
		}
	}
	switch {
	case c.expiries == nil:
		return ""
	case ops[c.op] != membership.OpAdd && ops[c.op] != membership.OpReplace:
		return "expiries on an op other than add and replace"
	case len(c.expiries) != len(c.uids):
		return fmt.Sprintf("%d expiries for %d uids", len(c.expiries), len(c.uids))
	}
	for _, ms := range c.expiries {
		if ms != nil && *ms < 0 {
			return fmt.Sprintf("an expiry before 1970 (%d)", *ms)
		}
	}
	return ""
}

// unreadableAttributes says why c's attributes, or uids, do not go with
// its op ("" when they do): a set_user names one uid and holds a valid
// account, a delete_user one uid and nothing else, a set_group no uid and
// valid attributes; no other op holds attributes.
func (c change) unreadableAttributes() string {
	op := ops[c.op]
	switch {
	case (op == membership.OpSetUser || op == membership.OpSetGroup) != (c.attributes != nil):
		return "attributes on an op other than set_user and set_group, or one of them without"
	case (op == membership.OpSetUser || op == membership.OpDeleteUser) && len(c.uids) != 1:
		return fmt.Sprintf("a %s of %d uids", op, len(c.uids))
	case op == membership.OpSetGroup && len(c.uids) != 0:
		return "uids on a set_group"
	}
	if _, _, err := c.decodeAttributes(); err != nil {
		return fmt.Sprintf("attributes that cannot be read (%v)", err)
	}
	return ""
}

// decodeAttributes returns c's account or group attributes, nil for none.
func (c change) decodeAttributes() (*account.Account, *account.GroupAttributes, error) {
	if c.attributes == nil {
		return nil, nil, nil
	}
	r := bytes.NewReader(c.attributes)
	var user *account.Account
	var group *account.GroupAttributes
	var err error
	if ops[c.op] == membership.OpSetUser {
		var a account.Account
		a, err = writecodec.ReadAccount(r)
		user = &a
	} else {
		var g account.GroupAttributes
		g, err = writecodec.ReadGroupAttributes(r)
		group = &g
	}
	if err == nil && r.Len() != 0 {
		err = errors.New("trailing bytes")
	}
	return user, group, err
}

// write returns c as the membership.Write it was made of, with the time
// it was placed in the log, as of which memory decides whether its key
// repeats one it remembers; an expire, with the time its expiries were
// found due. c's op is known, and c is readable.
func (c change) write() membership.Write {
	w := membership.Write{Op: ops[c.op], GroupID: c.groupID, Time: c.sequencedAt, Idem: c.idem}
	if c.actor != nil {
		w.Actor = membership.UID(*c.actor)
	}
	if c.principal != nil {
		w.Principal = *c.principal
	}
	if c.asOf != nil {
		w.AsOf = *c.asOf
	}
	switch w.Op {
	case membership.OpAdd, membership.OpReplace:
		w.Users = make([]membership.User, len(c.uids))
		for i, uid := range c.uids {
			w.Users[i].UID = membership.UID(uid)
			if i < len(c.nicknames) && c.nicknames[i] != nil {
				w.Users[i].Nickname, w.Users[i].HasNickname = string(c.nicknames[i]), true
			}
			if c.expiries != nil && c.expiries[i] != nil {
				w.Users[i].Expiry = expiryOf(*c.expiries[i])
			}
		}
	case membership.OpAddGroups, membership.OpRemoveGroups, membership.OpReplaceGroups, membership.OpExpireGroups:
		w.Subgroups = make([]membership.Subgroup, len(c.subgroups))
		for i, g := range c.subgroups {
			w.Subgroups[i].GroupID = g
			if c.subgroupExpiries != nil && c.subgroupExpiries[i] != nil {
				w.Subgroups[i].Expiry = expiryOf(*c.subgroupExpiries[i])
			}
		}
		w.MaxDepth, w.MaxAncestors = c.depth(), c.ancestors()
	case membership.OpSetGroup:
		_, w.Group, _ = c.decodeAttributes() // unreadable read them
	default:
		w.UIDs = make([]membership.UID, len(c.uids))
		for i, uid := range c.uids {
			w.UIDs[i] = membership.UID(uid)
		}
	}
	if w.Op == membership.OpSetUser {
		w.Account, _, _ = c.decodeAttributes() // unreadable read them
	}
	for _, rev := range c.ifRevisions {
		w.If.Revisions = append(w.If.Revisions, membership.Revision(rev))
	}
	w.If.Exists, w.If.Empty = c.ifExists, c.ifEmpty
	return w
}

// principalOf returns a principal's name as a row holds it: nil (NULL)
// for none.
func principalOf(name string) *string {
	if name == "" {
		return nil
	}
	return &name
}

// expiryOf returns an expiry as a row holds it, in milliseconds since
// 1970, as the Expiry it was: 0 is made permanent.
func expiryOf(ms int64) membership.Expiry {
	return membership.Expiry{Set: true, At: writecodec.TimeOfMillis(ms)}
}

// depth returns c's bound on depth: 0 for none.
func (c change) depth() int {
	if c.maxDepth == nil {
		return 0
	}
	return int(*c.maxDepth)
}

// ancestors returns c's bound on ancestors: 0 for none.
func (c change) ancestors() int {
	if c.maxAncestors == nil {
		return 0
	}
	return int(*c.maxAncestors)
}

// Write implements membership.Store. It returns once the change is
// committed, placed in the log and applied here, or with CodeUnavailable.
// Its precondition is checked when it is applied, against the state the
// log built before it, on every instance alike: of two writes racing with
// one If-Match, the first in the log wins, the other fails everywhere.
// A write whose outcome this instance already knows is answered without
// going to the log (answerHere). A directory write (set_user, delete_user,
// set_group) always goes to the log, which checks its user name and
// precondition as it is applied, every instance alike.
//
// A write with an Idempotency key (w.Idem) is applied once for its key,
// w.Principal's own, whichever instance takes it: its row carries the key, and every
// instance, applying the log in order, has memory decide whether the row
// repeats a keyed change it remembers, as of the row's time. A repeat
// changes nothing, and its writer gets the first change's result,
// Replayed. So a keyed write is answered here only when this instance
// has applied a change with its key already (memory.Store.ReplayWrite):
// the first's result, or CodeIdempotencyKeyReused; otherwise it goes to
// the log, even
// when it would change nothing (its key is remembered all the same) or
// its precondition seems to fail here (the change with its key may be
// being applied meanwhile: the log settles it).
//
// An expire (the expirer's, membership.OpExpire) always goes to the log,
// with its AsOf: memory applies it there, every instance alike, ending
// only the memberships still due as of AsOf; a repeat of another
// instance's changes nothing, and its writer gets a Count of 0. So does
// an expire of nestings (membership.OpExpireGroups).
//
// A nesting write's checks of cycles, depth and ancestors (CodeCycle,
// CodeTooDeep, CodeTooManyAncestors, with the row's bounds, w.MaxDepth and
// MaxAncestors) are made as it is applied, against the
// state the log built before it, every instance alike: of two writes
// racing to make a cycle, the first in the log wins everywhere.
func (s *Store) Write(ctx context.Context, w membership.Write) (membership.Result, error) {
	c, err := changeOf(w)
	if err != nil {
		return membership.Result{}, err
	}
	if c.idem.Key != "" {
		if res, replayed, err := s.mem.ReplayWrite(w.Principal, c.idem, time.Now()); replayed || err != nil {
			return res, err
		}
		res, err := s.commit(ctx, c)
		if res.Replayed {
			s.mem.NoteReplay()
		}
		return res, err
	}
	if res, answered, err := s.answerHere(ctx, w); answered {
		return res, err
	}
	return s.commit(ctx, c)
}

// answerHere answers w from this instance's memory, without a change in
// the log, when memory tells its outcome for sure. Memory may lag behind
// the log, so it answers at once only what no change still to come could
// alter: an add or remove of no user, or a precondition that names only
// revisions below the group's (which never goes back); what memory would
// answer without changing anything (a precondition that fails, a deletion
// of an empty group, the removal of a user in no group) it answers once
// the database says this instance has applied the whole log as placed
// now, so that the answer is not older than a change already
// acknowledged. Otherwise answered is false, and the log settles it.
func (s *Store) answerHere(ctx context.Context, w membership.Write) (res membership.Result, answered bool, err error) {
	if directory.IsOp(w.Op) {
		return membership.Result{}, false, nil // its precondition is of a user, or counts attributes: the log decides
	}
	cond := w.If
	if w.Op == membership.OpRemoveUser {
		cond = membership.Precondition{} // it has no group to hold one
	}
	empty := w.Op == membership.OpAdd && len(w.Users) == 0 || w.Op == membership.OpRemove && len(w.UIDs) == 0
	st := s.localState(ctx, w)
	switch {
	case st.unsure:
		return membership.Result{}, false, nil // the log decides
	case empty && cond.IsZero():
		return membership.Result{Revision: st.revision}, true, nil
	case failsForGood(cond, st):
		return membership.Result{}, true, membership.PreconditionFailed(st.revision)
	case cond.Holds(st.size, st.revision) && !st.unchanged:
		return membership.Result{}, false, nil // a change: the log decides
	}
	if !s.caughtUp(ctx) {
		return membership.Result{}, false, nil
	}
	st = s.localState(ctx, w) // at least as new as the log was when asked
	switch {
	case st.unsure:
		return membership.Result{}, false, nil
	case !cond.Holds(st.size, st.revision):
		return membership.Result{}, true, membership.PreconditionFailed(st.revision)
	case st.unchanged:
		return membership.Result{Revision: st.revision}, true, nil
	}
	return membership.Result{}, false, nil
}

// local is what this instance's memory says of a write's group.
type local struct {
	// size is the group's members, subgroups and attributes (as one), as
	// a precondition counts them.
	size     int
	revision membership.Revision // the group's; for remove_user, the store's
	// unchanged says that applying the write to this state would change
	// nothing: an add or remove of no user, a deletion of a group with no
	// members, subgroups, attributes or parents, the removal of a user in
	// no group.
	unchanged bool
	// unsure says that memory changed while it was read, every time it
	// was tried: nothing can be answered from it.
	unsure bool
}

// localTries bounds how often localState reads a group that memory
// changes meanwhile before it gives up (local.unsure).
const localTries = 3

// localState reads what this instance's memory says of w's group, in one
// state (a group's size and revision are read together). Memory's reads
// do not fail.
func (s *Store) localState(ctx context.Context, w membership.Write) local {
	if w.Op == membership.OpRemoveUser {
		return s.localUser(ctx, w.UIDs[0])
	}
	st := local{unsure: true}
	for range localTries {
		if st = s.localGroup(ctx, w); !st.unsure {
			break
		}
	}
	switch w.Op {
	case membership.OpAdd:
		st.unchanged = len(w.Users) == 0
	case membership.OpRemove:
		st.unchanged = len(w.UIDs) == 0
	}
	return st
}

// localGroup reads w's group: its members, subgroups and attributes, with
// its revision, in one read; and, for a deletion, its parents, which are
// of the same state when no change was applied meanwhile (else unsure), as
// is the revision of a group that does not exist.
func (s *Store) localGroup(ctx context.Context, w membership.Write) local {
	var st local
	before := s.mem.LatestRevision()
	rec, ok, _ := s.mem.Group(ctx, w.GroupID, nil)
	if ok {
		st.size, st.revision = rec.Members+rec.Subgroups, rec.Revision
		if rec.HasAttributes {
			st.size++
		}
	} else {
		st.revision, _ = s.mem.Revision(ctx, w.GroupID)
	}
	if w.Op == membership.OpDeleteGroup {
		parents := 0
		_, _ = s.mem.Parents(ctx, w.GroupID, membership.NestingListOptions{Limit: 1},
			func(total int, _ iter.Seq[membership.Nested]) { parents = total })
		st.unchanged = st.size == 0 && parents == 0
	}
	st.unsure = (!ok || w.Op == membership.OpDeleteGroup) && s.mem.LatestRevision() != before
	return st
}

// localUser reads whether uid is in any group, as remove_user asks.
func (s *Store) localUser(ctx context.Context, uid membership.UID) local {
	var st local
	before := s.mem.LatestRevision()
	groups := 0
	_ = s.mem.UserGroups(ctx, uid, membership.GroupListOptions{Limit: 1},
		func(total int, _ iter.Seq[string]) { groups = total })
	st.revision = s.mem.LatestRevision()
	// Another change in between could have added the user to a
	// group: only a state that held still says so for sure.
	st.unchanged = groups == 0 && st.revision == before
	return st
}

// failsForGood reports whether cond fails for the group st tells of, and
// will fail whatever changes the log holds that this instance has not
// applied yet: a group's revision never goes back, and one revision is
// one list. So it fails for good when it names revisions, none above st's,
// and fails in st.
func failsForGood(cond membership.Precondition, st local) bool {
	if len(cond.Revisions) == 0 || cond.Holds(st.size, st.revision) {
		return false
	}
	for _, rev := range cond.Revisions {
		if rev > st.revision {
			return false // a revision still to come, maybe
		}
	}
	return true
}

// caughtUp reports whether this instance has applied every change placed
// in the log when the database answers: then memory, read afterwards, is
// not older than any change acknowledged before. A database that does not
// answer (in CommitTimeout) is a no: the write goes to the log, which
// reports it.
func (s *Store) caughtUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CommitTimeout)
	defer cancel()
	var last int64
	err := s.pool.QueryRow(ctx, "SELECT coalesce(max(pos), 0) FROM membership_changes").Scan(&last)
	return err == nil && s.applied.Load() >= last
}
