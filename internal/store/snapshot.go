package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"

	"example.com/groupmembership/internal/fileheader"
	"example.com/groupmembership/internal/wal"
	"example.com/groupmembership/membership"
)

// castagnoli is the CRC-32C table of the snapshots' checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A snapshot file holds the whole state: a header (magic word and format
// version), a body, and a CRC-32C of the body. The body of version 2 is
//
//   - the revisions: the latest, that of the last nickname change, and that
//     of the last group deleted;
//   - the nicknames: count, then uid and nickname each;
//   - the groups: count, then id, revision, member count, and the members in
//     ascending order, each as the difference from the one before;
//   - the changes the feed keeps: count, then revision, op, group id, uid
//     count and uids (as differences), nickname count and uid and nickname
//     each.
//
// Version 1, still read, has only the nicknames and the groups without their
// revisions. All integers are unsigned varints, strings a length and bytes.
var snapshotKind = fileheader.Kind{Magic: "GMSN", Name: "snapshot", Version: 2}

// state is a copy of a Memory's contents, taken for a snapshot.
type state struct {
	lastRevision      membership.Revision
	nicknamesRevision membership.Revision
	removedRevision   membership.Revision
	nicknames         map[membership.UID]string
	groups            []groupState
	changes           []membership.Change // oldest first, ending at lastRevision
}

type groupState struct {
	id       string
	revision membership.Revision
	uids     []membership.UID // ascending
}

// exportState copies m's contents. For a snapshot, it copies the feed's
// changes too, and changes made while it runs may or may not be in the copy,
// so the caller must keep them out. For a backup, the caller holds every
// shard (read locked), and the feed's changes are left out.
func (m *Memory) exportState(forBackup bool) *state {
	shardsHeld := forBackup
	st := &state{
		nicknamesRevision: membership.Revision(m.nicknamesRevision.Load()),
		removedRevision:   membership.Revision(m.removedRevision.Load()),
	}
	if forBackup {
		st.lastRevision = m.feed.stats().last
	} else {
		st.lastRevision, st.changes = m.feed.export()
	}
	m.nicknamesMu.RLock()
	st.nicknames = make(map[membership.UID]string, len(m.nicknames))
	for uid, nick := range m.nicknames {
		st.nicknames[uid] = nick
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
			st.groups = append(st.groups, groupState{id: id, revision: g.revision, uids: uids})
		}
		if !shardsHeld {
			s.mu.RUnlock()
		}
	}
	return st
}

// importState loads st into m, which must be empty and not yet shared, but
// for the nicknames of users in no group. It builds every index in bulk: each group's chunks directly, and the reverse
// index from all pairs sorted at once, rather than one insert at a time.
func (m *Memory) importState(st *state) {
	for uid, nick := range st.nicknames {
		if nick != "" {
			m.nicknames[uid] = nick
		}
	}
	m.nicknamesRevision.Store(uint64(st.nicknamesRevision))
	m.removedRevision.Store(uint64(st.removedRevision))
	m.feed.load(st.lastRevision, st.changes)
	pairs := make([][]pair, len(m.reverse))
	for _, g := range st.groups {
		if len(g.uids) == 0 {
			continue
		}
		grp := &group{id: g.id, number: m.groupNumbers.number(g.id), revision: g.revision}
		grp.members.fill(g.uids)
		m.shardOf(g.id).groups[g.id] = grp
		m.counts.groups.Add(1)
		m.counts.members.Add(int64(len(g.uids)))
		for _, uid := range g.uids {
			k, user := m.reverseKey(uid)
			pairs[k] = append(pairs[k], pair{user: user, group: grp.number})
		}
	}
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

// writeSnapshot writes st to path: a temporary file first, synced, then
// renamed over path, then the directory synced, so that path is always either
// absent or a whole snapshot.
func writeSnapshot(dir, path string, st *state) (err error) {
	tmp, err := os.CreateTemp(dir, "snapshot-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := encodeSnapshot(tmp, st); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return wal.SyncDir(dir)
}

// encodeSnapshot writes st to out in the snapshot format: the header, the
// body as it is encoded (never all of it in memory), and its checksum.
func encodeSnapshot(out io.Writer, st *state) error {
	if _, err := out.Write(snapshotKind.Append(nil)); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(out, crc), 1<<20)
	c := &chunks{w: w}
	c.uvarint(uint64(st.lastRevision))
	c.uvarint(uint64(st.nicknamesRevision))
	c.uvarint(uint64(st.removedRevision))
	c.uvarint(uint64(len(st.nicknames)))
	for uid, nick := range st.nicknames {
		c.uvarint(uint64(uid))
		c.string(nick)
		c.flushIfFull()
	}
	c.uvarint(uint64(len(st.groups)))
	for _, g := range st.groups {
		c.string(g.id)
		c.uvarint(uint64(g.revision))
		c.ascendingUIDs(g.uids)
	}
	c.uvarint(uint64(len(st.changes)))
	for _, ch := range st.changes {
		c.b = appendChange(c.b, ch)
		c.flushIfFull()
	}
	c.flush()
	if c.err != nil {
		return c.err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return binary.Write(out, binary.LittleEndian, crc.Sum32())
}

// chunks encodes into a buffer that it hands to w whenever it holds more
// than 64 KiB, so that encoding a large state never holds it all. The first
// error of w stops every later write, and stays in err.
type chunks struct {
	w   io.Writer
	b   []byte
	err error
}

func (c *chunks) uvarint(v uint64) { c.b = binary.AppendUvarint(c.b, v) }

func (c *chunks) string(s string) {
	c.uvarint(uint64(len(s)))
	c.b = append(c.b, s...)
}

// ascendingUIDs encodes uids as appendAscendingUIDs does, flushing as it
// goes: a group may hold millions.
func (c *chunks) ascendingUIDs(uids []membership.UID) {
	c.uvarint(uint64(len(uids)))
	var prev membership.UID
	for _, uid := range uids {
		c.uvarint(uint64(uid - prev))
		prev = uid
		c.flushIfFull()
	}
}

func (c *chunks) flushIfFull() {
	if len(c.b) > 64<<10 {
		c.flush()
	}
}

func (c *chunks) flush() {
	if c.err == nil {
		_, c.err = c.w.Write(c.b)
	}
	c.b = c.b[:0]
}

// readSnapshot reads the snapshot at path.
func readSnapshot(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeSnapshot(data, path)
}

// decodeSnapshot decodes the snapshot data, read from path.
func decodeSnapshot(data []byte, path string) (*state, error) {
	v, err := snapshotKind.Read(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) < fileheader.Size+4 {
		return nil, fmt.Errorf("%s: the snapshot is cut short: it has no checksum", path)
	}
	body := data[fileheader.Size : len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, fmt.Errorf("%s: snapshot checksum does not match: the file is damaged", path)
	}
	st, err := decodeState(bytes.NewReader(body), v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

func decodeState(r *bytes.Reader, version uint32) (*state, error) {
	st := &state{}
	if version >= 2 {
		for _, rev := range []*membership.Revision{&st.lastRevision, &st.nicknamesRevision, &st.removedRevision} {
			n, err := binary.ReadUvarint(r)
			if err != nil {
				return nil, err
			}
			*rev = membership.Revision(n)
		}
	}
	var err error
	if st.nicknames, err = readNicknames(r); err != nil {
		return nil, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	for range n {
		g, err := readGroup(r, version)
		if err != nil {
			return nil, err
		}
		st.groups = append(st.groups, g)
	}
	if version >= 2 {
		if st.changes, err = readChanges(r, st.lastRevision); err != nil {
			return nil, err
		}
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes after the groups")
	}
	return st, nil
}

// readNicknames reads the nicknames' count, then each uid and nickname.
func readNicknames(r *bytes.Reader) (map[membership.UID]string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	nicknames := make(map[membership.UID]string, min(n, 1<<20))
	for range n {
		uid, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if nicknames[membership.UID(uid)], err = readString(r); err != nil {
			return nil, err
		}
	}
	return nicknames, nil
}

// readGroup reads one group: its id, its revision (from version 2), its
// member count and its members' uids.
func readGroup(r *bytes.Reader, version uint32) (groupState, error) {
	var g groupState
	var err error
	if g.id, err = readString(r); err != nil {
		return g, err
	}
	if version >= 2 {
		rev, err := binary.ReadUvarint(r)
		if err != nil {
			return g, err
		}
		g.revision = membership.Revision(rev)
	}
	count, err := binary.ReadUvarint(r)
	if err != nil {
		return g, err
	}
	if count > uint64(r.Len()) {
		return g, errors.New("member count larger than the file")
	}
	if g.uids, err = readAscendingUIDs(r, count); err != nil {
		return g, fmt.Errorf("group %q: %w", g.id, err)
	}
	return g, nil
}

// readAscendingUIDs reads count uids written as differences.
func readAscendingUIDs(r *bytes.Reader, count uint64) ([]membership.UID, error) {
	if count == 0 {
		return nil, nil
	}
	return readAscendingUIDsInto(r, make([]membership.UID, 0, count), count)
}

// readAscendingUIDsInto appends count uids written as differences to uids.
func readAscendingUIDsInto(r *bytes.Reader, uids []membership.UID, count uint64) ([]membership.UID, error) {
	var prev membership.UID
	for range count {
		d, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if d == 0 || d > math.MaxInt64-uint64(prev) {
			return nil, errors.New("uids not in ascending order")
		}
		prev += membership.UID(d)
		uids = append(uids, prev)
	}
	return uids, nil
}

// appendAscendingUIDs appends uids, which must be ascending, as a count and
// differences.
func appendAscendingUIDs(b []byte, uids []membership.UID) []byte {
	b = binary.AppendUvarint(b, uint64(len(uids)))
	var prev membership.UID
	for _, uid := range uids {
		b = binary.AppendUvarint(b, uint64(uid-prev))
		prev = uid
	}
	return b
}

// appendChange appends one change of the feed.
func appendChange(b []byte, c membership.Change) []byte {
	b = binary.AppendUvarint(b, uint64(c.Revision))
	op := opAdd
	if c.Op == membership.OpRemove {
		op = opRemove
	}
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(c.GroupID)))
	b = append(b, c.GroupID...)
	b = appendAscendingUIDs(b, c.UIDs)
	b = binary.AppendUvarint(b, uint64(len(c.Nicknames)))
	for _, n := range c.Nicknames {
		b = binary.AppendUvarint(b, uint64(n.UID))
		b = binary.AppendUvarint(b, uint64(len(n.Nickname)))
		b = append(b, n.Nickname...)
	}
	return b
}

// readChanges reads the feed's changes, which must be consecutive and end at
// last.
func readChanges(r *bytes.Reader, last membership.Revision) ([]membership.Change, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(last) || n > uint64(r.Len()) {
		return nil, errors.New("more changes than revisions")
	}
	changes := make([]membership.Change, 0, n)
	next := last - membership.Revision(n) + 1
	cr := changeReader{r: r, ids: map[string]string{}}
	for range n {
		c, err := cr.read(next)
		if err != nil {
			return nil, err
		}
		changes = append(changes, c)
		next++
	}
	return changes, nil
}

// changeReader reads the changes of a snapshot. A restart may load a
// hundred thousand changes: their group ids are interned (most changes name
// a group others do), and their uids cut from shared blocks, rather than
// allocated one by one.
type changeReader struct {
	r     *bytes.Reader
	ids   map[string]string
	idBuf []byte
	block []membership.UID
}

// read reads one change, which must have revision rev.
func (cr *changeReader) read(rev membership.Revision) (membership.Change, error) {
	r := cr.r
	c := membership.Change{Revision: rev}
	got, err := binary.ReadUvarint(r)
	if err != nil {
		return c, err
	}
	if membership.Revision(got) != rev {
		return c, fmt.Errorf("change %d where %d was due", got, rev)
	}
	op, err := r.ReadByte()
	if err != nil {
		return c, err
	}
	switch op {
	case opAdd:
		c.Op = membership.OpAdd
	case opRemove:
		c.Op = membership.OpRemove
	default:
		return c, fmt.Errorf("change %d: unknown op %d", rev, op)
	}
	if c.GroupID, err = cr.groupID(); err != nil {
		return c, err
	}
	if c.UIDs, err = cr.uids(); err != nil {
		return c, fmt.Errorf("change %d: %w", rev, err)
	}
	count, err := binary.ReadUvarint(r)
	if err != nil {
		return c, err
	}
	if count > uint64(r.Len()) {
		return c, errors.New("nickname count larger than the file")
	}
	for range count {
		uid, err := binary.ReadUvarint(r)
		if err != nil {
			return c, err
		}
		nick, err := readString(r)
		if err != nil {
			return c, err
		}
		c.Nicknames = append(c.Nicknames, membership.Member{UID: membership.UID(uid), Nickname: nick})
	}
	return c, nil
}

// groupID reads a group id, interned.
func (cr *changeReader) groupID() (string, error) {
	idLen, err := binary.ReadUvarint(cr.r)
	if err != nil {
		return "", err
	}
	if idLen > uint64(cr.r.Len()) {
		return "", io.ErrUnexpectedEOF
	}
	cr.idBuf = slices.Grow(cr.idBuf[:0], int(idLen))[:idLen]
	if _, err := io.ReadFull(cr.r, cr.idBuf); err != nil {
		return "", err
	}
	id, ok := cr.ids[string(cr.idBuf)]
	if !ok {
		id = string(cr.idBuf)
		cr.ids[id] = id
	}
	return id, nil
}

// uids reads a change's uids into the shared block.
func (cr *changeReader) uids() ([]membership.UID, error) {
	count, err := binary.ReadUvarint(cr.r)
	if err != nil {
		return nil, err
	}
	if count > uint64(cr.r.Len()) {
		return nil, errors.New("uid count larger than the file")
	}
	if count == 0 {
		return nil, nil
	}
	if uint64(cap(cr.block)-len(cr.block)) < count {
		cr.block = make([]membership.UID, 0, max(count, 1<<16))
	}
	start := len(cr.block)
	if cr.block, err = readAscendingUIDsInto(cr.r, cr.block, count); err != nil {
		return nil, err
	}
	return cr.block[start:len(cr.block):len(cr.block)], nil
}
