package snap

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// directory encodes st's accounts and groups' attributes, which must be in
// order (checkDirectoryOrder), in a snapshot of version: none before
// withDirectory.
func (c *encoder) directory(st *State, version uint32) {
	if version < withDirectory {
		return
	}
	c.uvarint(uint64(len(st.Accounts)))
	for _, a := range st.Accounts {
		c.uvarint(uint64(a.UID))
		c.b = writecodec.AppendAccount(c.b, a.Account)
		c.b = appendTime(c.b, a.Created)
		c.b = appendTime(c.b, a.Modified)
		c.uvarint(uint64(a.Revision))
		c.flushIfFull()
	}
	c.uvarint(uint64(len(st.GroupAttributes)))
	for _, g := range st.GroupAttributes {
		c.string(g.ID)
		c.b = writecodec.AppendGroupAttributes(c.b, g.Attributes)
		c.b = appendTime(c.b, g.Created)
		c.b = appendTime(c.b, g.Modified)
		c.flushIfFull()
	}
}

// checkDirectoryToEncode returns an error unless st's accounts and groups'
// attributes can be encoded in a snapshot of version: none before
// withDirectory, and in order (checkDirectoryOrder).
func checkDirectoryToEncode(st *State, version uint32) error {
	if version < withDirectory && (len(st.Accounts) > 0 || len(st.GroupAttributes) > 0) {
		return fmt.Errorf("version %d holds no account and no group attributes", version)
	}
	return checkDirectoryOrder(st)
}

// checkDirectoryOrder returns an error unless st's accounts are by uid
// ascending, once each, valid, with no display name, and its groups'
// attributes by id in byte order, once each, valid, each time one a
// snapshot can hold.
func checkDirectoryOrder(st *State) error {
	for i, a := range st.Accounts {
		switch {
		case i > 0 && a.UID <= st.Accounts[i-1].UID:
			return fmt.Errorf("the account of user %d is out of order", a.UID)
		case !membership.ValidUID(a.UID):
			return fmt.Errorf("an account of uid %d", a.UID)
		case a.Account.DisplayName != "":
			return fmt.Errorf("the account of user %d has a display name: it is the user's nickname", a.UID)
		case !holdable(a.Created) || !holdable(a.Modified):
			return fmt.Errorf("the account of user %d has a time a snapshot cannot hold", a.UID)
		}
		if err := account.Check(a.Account); err != nil {
			return fmt.Errorf("the account of user %d: %v", a.UID, err)
		}
	}
	for i, g := range st.GroupAttributes {
		switch {
		case i > 0 && g.ID <= st.GroupAttributes[i-1].ID:
			return fmt.Errorf("the attributes of group %q are out of order", g.ID)
		case !holdable(g.Created) || !holdable(g.Modified):
			return fmt.Errorf("the attributes of group %q have a time a snapshot cannot hold", g.ID)
		}
		if err := membership.ValidateGroupID(g.ID); err != nil {
			return fmt.Errorf("the attributes of a group: %v", err)
		}
		if err := account.CheckGroup(g.Attributes); err != nil {
			return fmt.Errorf("the attributes of group %q: %v", g.ID, err)
		}
	}
	return nil
}

// holdable reports whether a snapshot can hold t: none, or one that is not
// 1970-01-01 to the millisecond.
func holdable(t time.Time) bool { return t.IsZero() || t.UnixMilli() != 0 }

// readDirectory reads the accounts and the groups' attributes into st.
func readDirectory(r *reader, st *State) error {
	var err error
	st.Accounts, err = readList(r, 1, "more accounts than the file", func() (Account, error) {
		var a Account
		uid, err := binary.ReadUvarint(r)
		if err != nil {
			return a, err
		}
		if uid > math.MaxInt64 {
			return a, fmt.Errorf("an account of uid %d", uid)
		}
		a.UID = membership.UID(uid)
		if a.Account, err = writecodec.ReadAccount(r.Reader); err != nil {
			return a, fmt.Errorf("the account of user %d: %w", uid, err)
		}
		if a.Created, a.Modified, err = readTimes(r); err != nil {
			return a, err
		}
		rev, err := binary.ReadUvarint(r)
		a.Revision = membership.Revision(rev)
		return a, err
	})
	if err != nil {
		return err
	}
	st.GroupAttributes, err = readList(r, 1, "more groups' attributes than the file", func() (GroupAttributes, error) {
		var g GroupAttributes
		var err error
		if g.ID, err = readGroupID(r); err != nil {
			return g, err
		}
		if g.Attributes, err = writecodec.ReadGroupAttributes(r.Reader); err != nil {
			return g, fmt.Errorf("the attributes of group %q: %w", g.ID, err)
		}
		g.Created, g.Modified, err = readTimes(r)
		return g, err
	})
	if err != nil {
		return err
	}
	return checkDirectoryOrder(st)
}

// readTimes reads two times as appendTime wrote them.
func readTimes(r *reader) (a, b time.Time, err error) {
	if a, err = readTime(r); err == nil {
		b, err = readTime(r)
	}
	return a, b, err
}
