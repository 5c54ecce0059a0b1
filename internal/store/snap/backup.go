package snap

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// Backup is a consistent copy of a store's whole state at one revision: the
// members of every group and their expiries, the groups in groups, the
// nicknames and the Idempotency-Keys
// remembered (a restored store answers a retry as the store did), not the
// change feed's history.
// It holds about as much memory as the memberships take in the store, until
// it is dropped. Its bytes are a snapshot file, which Restore reads.
type Backup struct {
	st *State
}

// NewBackup returns the backup of st, which it keeps: st must not change.
func NewBackup(st *State) *Backup { return &Backup{st: st} }

// Revision returns the revision of the state the backup holds.
func (b *Backup) Revision() membership.Revision { return b.st.LastRevision }

// WriteTo writes the backup to w, encoding it as it goes.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := Encode(cw, b.st)
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Check returns an error unless st keeps the service's rules: valid and
// distinct group ids, each with members, subgroups or attributes, no
// revision past the latest, expiries of members only, valid nicknames of
// users who are in a group or have an account, distinct keys, nestings of
// valid groups, each parent among the groups, that make no cycle, accounts
// with distinct user names (compared case-insensitively), none inactive
// and in a group, and attributes of groups among the groups. The
// checksum says that a file is whole; this says that it came from the
// service.
func (st *State) Check() error {
	parents := make(map[string]bool) // and groups with attributes: they too may have no member
	for _, n := range st.Nestings {
		parents[n.Parent] = true
	}
	for _, g := range st.GroupAttributes {
		parents[g.ID] = true
	}
	inGroup := map[membership.UID]bool{}
	ids := make(map[string]bool, len(st.Groups))
	for _, g := range st.Groups {
		if err := membership.ValidateGroupID(g.ID); err != nil {
			return fmt.Errorf("a group: %v", err)
		}
		switch {
		case ids[g.ID]:
			return fmt.Errorf("group %q is there twice", g.ID)
		case len(g.UIDs) == 0 && !parents[g.ID]:
			return fmt.Errorf("group %q has no members, no subgroups and no attributes", g.ID)
		case g.Revision > st.LastRevision:
			return fmt.Errorf("group %q has revision %d, past the latest, %d", g.ID, g.Revision, st.LastRevision)
		}
		ids[g.ID] = true
		for _, uid := range g.UIDs {
			inGroup[uid] = true
		}
		for _, e := range g.Expiries {
			if _, member := slices.BinarySearch(g.UIDs, e.UID); !member {
				return fmt.Errorf("user %d has an expiry in group %q but is not a member", e.UID, g.ID)
			}
		}
	}
	if err := checkNestings(st.Nestings, ids); err != nil {
		return err
	}
	if err := checkDirectory(st, ids, inGroup); err != nil {
		return err
	}
	if st.NicknamesRevision > st.LastRevision || st.RemovedRevision > st.LastRevision {
		return fmt.Errorf("a revision is past the latest, %d", st.LastRevision)
	}
	for uid, nick := range st.Nicknames {
		if err := membership.ValidateUser(membership.User{UID: uid, Nickname: nick, HasNickname: true}); err != nil || nick == "" {
			return fmt.Errorf("the nickname of user %d is not valid", uid)
		}
		if !inGroup[uid] && !hasAccount(st, uid) {
			return fmt.Errorf("user %d has a nickname but is in no group and has no account", uid)
		}
	}
	type scoped struct{ principal, key string } // a key is its principal's
	keys := make(map[scoped]bool, len(st.Keys))
	for _, k := range st.Keys {
		if keys[scoped{k.Principal, k.Key}] {
			return fmt.Errorf("the Idempotency-Key %q of principal %q is there twice", k.Key, k.Principal)
		}
		keys[scoped{k.Principal, k.Key}] = true
		if k.Revision > st.LastRevision || slices.ContainsFunc(k.Results, func(res membership.Result) bool { return res.Revision > st.LastRevision }) {
			return fmt.Errorf("the Idempotency-Key %q has a revision past the latest, %d", k.Key, st.LastRevision)
		}
	}
	return nil
}

// checkNestings returns an error unless nestings are of valid groups,
// none in itself, each parent among groups, once each, and make no cycle.
func checkNestings(nestings []Nesting, groups map[string]bool) error {
	seen := make(map[Nesting]bool, len(nestings))
	subgroups := make(map[string][]string)
	for _, n := range nestings {
		for _, id := range []string{n.Parent, n.Child} {
			if err := membership.ValidateGroupID(id); err != nil {
				return fmt.Errorf("a nesting: %v", err)
			}
		}
		key := Nesting{Parent: n.Parent, Child: n.Child}
		switch {
		case n.Parent == n.Child:
			return fmt.Errorf("group %q is nested in itself", n.Parent)
		case !groups[n.Parent]:
			return fmt.Errorf("group %q has subgroups but is not among the groups", n.Parent)
		case seen[key]:
			return fmt.Errorf("the nesting of %q in %q is there twice", n.Child, n.Parent)
		}
		seen[key] = true
		subgroups[n.Parent] = append(subgroups[n.Parent], n.Child)
	}
	if path := findCycle(subgroups); path != nil {
		return fmt.Errorf("the nestings make a cycle: %s", strings.Join(path, " > "))
	}
	return nil
}

// findCycle returns a cycle of the graph subgroups (a group's
// subgroups), as the path from a group round to itself, or nil when there
// is none. It walks depth first without recursion, so that a chain as deep
// as the file allows cannot overflow the stack.
func findCycle(subgroups map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]int, len(subgroups))
	type frame struct {
		id   string
		next int
	}
	starts := make([]string, 0, len(subgroups))
	for id := range subgroups {
		starts = append(starts, id)
	}
	slices.Sort(starts)
	for _, start := range starts {
		if state[start] != unseen {
			continue
		}
		stack := []frame{{id: start}}
		state[start] = onPath
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			children := subgroups[top.id]
			if top.next == len(children) {
				state[top.id] = done
				stack = stack[:len(stack)-1]
				continue
			}
			child := children[top.next]
			top.next++
			switch state[child] {
			case onPath:
				var path []string
				for i := range stack {
					if stack[i].id == child || path != nil {
						path = append(path, stack[i].id)
					}
				}
				return append(path, child)
			case unseen:
				state[child] = onPath
				stack = append(stack, frame{id: child})
			}
		}
	}
	return nil
}

// hasAccount reports whether uid has an account in st, whose accounts are
// in order.
func hasAccount(st *State, uid membership.UID) bool {
	_, found := slices.BinarySearchFunc(st.Accounts, uid, func(a Account, uid membership.UID) int {
		return cmp.Compare(a.UID, uid)
	})
	return found
}

// checkDirectory returns an error unless st's accounts have distinct user
// names, revisions no later than the latest, and none inactive in a group
// (inGroup), and its groups' attributes are of groups among ids.
func checkDirectory(st *State, ids map[string]bool, inGroup map[membership.UID]bool) error {
	if err := checkDirectoryOrder(st); err != nil {
		return err
	}
	names := make(map[string]membership.UID, len(st.Accounts))
	for _, a := range st.Accounts {
		fold := account.FoldUserName(a.Account.UserName)
		if other, ok := names[fold]; ok {
			return fmt.Errorf("users %d and %d have the userName %q", other, a.UID, a.Account.UserName)
		}
		names[fold] = a.UID
		switch {
		case a.Revision > st.LastRevision:
			return fmt.Errorf("the account of user %d has revision %d, past the latest, %d", a.UID, a.Revision, st.LastRevision)
		case !a.Account.Active && inGroup[a.UID]:
			return fmt.Errorf("user %d is inactive but in a group", a.UID)
		}
	}
	for _, g := range st.GroupAttributes {
		if !ids[g.ID] {
			return fmt.Errorf("group %q has attributes but is not among the groups", g.ID)
		}
	}
	return nil
}
