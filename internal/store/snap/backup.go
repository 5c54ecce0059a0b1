package snap

import (
	"fmt"
	"io"
	"slices"

	"example.com/groupmembership/membership"
)

// Backup is a consistent copy of a store's whole state at one revision: the
// members of every group and their expiries, the nicknames and the
// Idempotency-Keys
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
// distinct group ids, each with members, no revision past the latest,
// expiries of members only, valid nicknames of users who are in a group,
// and distinct keys. The
// checksum says that a file is whole; this says that it came from the
// service.
func (st *State) Check() error {
	inGroup := map[membership.UID]bool{}
	ids := make(map[string]bool, len(st.Groups))
	for _, g := range st.Groups {
		if err := membership.ValidateGroupID(g.ID); err != nil {
			return fmt.Errorf("a group: %v", err)
		}
		switch {
		case ids[g.ID]:
			return fmt.Errorf("group %q is there twice", g.ID)
		case len(g.UIDs) == 0:
			return fmt.Errorf("group %q has no members", g.ID)
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
	if st.NicknamesRevision > st.LastRevision || st.RemovedRevision > st.LastRevision {
		return fmt.Errorf("a revision is past the latest, %d", st.LastRevision)
	}
	for uid, nick := range st.Nicknames {
		if err := membership.ValidateUser(membership.User{UID: uid, Nickname: nick, HasNickname: true}); err != nil || nick == "" {
			return fmt.Errorf("the nickname of user %d is not valid", uid)
		}
		if !inGroup[uid] {
			return fmt.Errorf("user %d has a nickname but is in no group", uid)
		}
	}
	keys := make(map[string]bool, len(st.Keys))
	for _, k := range st.Keys {
		if keys[k.Key] {
			return fmt.Errorf("the Idempotency-Key %q is there twice", k.Key)
		}
		keys[k.Key] = true
		past := k.Revision > st.LastRevision
		for _, res := range k.Results {
			past = past || res.Revision > st.LastRevision
		}
		if past {
			return fmt.Errorf("the Idempotency-Key %q has a revision past the latest, %d", k.Key, st.LastRevision)
		}
	}
	return nil
}
