package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"example.com/groupmembership/membership"
)

// Backup is a consistent copy of a store's whole state at one revision: the
// members of every group and the nicknames, not the change feed's history.
// It holds about as much memory as the memberships take in the store, until
// it is dropped. Its bytes are a snapshot file, which Restore reads.
type Backup struct {
	st *state
}

// Revision returns the revision of the state the backup holds.
func (b *Backup) Revision() membership.Revision { return b.st.lastRevision }

// WriteTo writes the backup to w, encoding it as it goes.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := encodeSnapshot(cw, b.st)
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

// Backup copies the whole state at one revision. Writes wait while it
// copies: it holds every shard, so that no change is halfway, and the copy
// is of memory only (no encoding, no I/O).
func (m *Memory) Backup() *Backup {
	for i := range m.shards {
		m.shards[i].mu.RLock()
	}
	st := m.exportState(true)
	for i := range m.shards {
		m.shards[i].mu.RUnlock()
	}
	return &Backup{st: st}
}

// Backup copies the whole state at one revision; see Memory.Backup. What
// memory holds is on disk: a change is applied after it is written.
func (d *Durable) Backup() *Backup { return d.mem.Backup() }

// Restore writes the data directory dir from the backup in file: a
// snapshot of the backup's state, an empty log after it, and a DATA with a
// new directory id and a new epoch (the revisions after the backup's are
// given out again, for other states than those a client may have seen).
// dir must be empty or not exist: Restore never writes over data. It returns
// the backup's revision.
func Restore(file, dir string) (membership.Revision, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	st, err := decodeSnapshot(data, file)
	if err != nil {
		return 0, fmt.Errorf("%w: it is not a whole backup; take another", err)
	}
	if err := st.check(); err != nil {
		return 0, fmt.Errorf("%s: %w: it is not a backup this service wrote; take another", file, err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, err
	case len(entries) > 0:
		return 0, fmt.Errorf("%s is not empty (it has %s): restore into an empty or new directory, never over data", dir, entries[0].Name())
	}
	df := dataFile{id: newRandomID(), epoch: newRandomID(), lastLog: 1}
	if err := writeSnapshot(dir, snapshotPath(dir, 1), st); err != nil {
		return 0, err
	}
	if err := createLog(dir, 1, uint64(st.lastRevision), df.id); err != nil {
		return 0, err
	}
	if err := df.write(dir); err != nil {
		return 0, err
	}
	return st.lastRevision, nil
}

// check returns an error unless st keeps the service's rules: valid and
// distinct group ids, each with members, no revision past the latest, and
// valid nicknames of users who are in a group. The checksum says that a file
// is whole; this says that it came from the service.
func (st *state) check() error {
	inGroup := map[membership.UID]bool{}
	ids := make(map[string]bool, len(st.groups))
	for _, g := range st.groups {
		if err := membership.ValidateGroupID(g.id); err != nil {
			return fmt.Errorf("a group: %v", err)
		}
		switch {
		case ids[g.id]:
			return fmt.Errorf("group %q is there twice", g.id)
		case len(g.uids) == 0:
			return fmt.Errorf("group %q has no members", g.id)
		case g.revision > st.lastRevision:
			return fmt.Errorf("group %q has revision %d, past the latest, %d", g.id, g.revision, st.lastRevision)
		}
		ids[g.id] = true
		for _, uid := range g.uids {
			inGroup[uid] = true
		}
	}
	if st.nicknamesRevision > st.lastRevision || st.removedRevision > st.lastRevision {
		return fmt.Errorf("a revision is past the latest, %d", st.lastRevision)
	}
	for uid, nick := range st.nicknames {
		if err := membership.ValidateUser(membership.User{UID: uid, Nickname: nick, HasNickname: true}); err != nil || nick == "" {
			return fmt.Errorf("the nickname of user %d is not valid", uid)
		}
		if !inGroup[uid] {
			return fmt.Errorf("user %d has a nickname but is in no group", uid)
		}
	}
	return nil
}
