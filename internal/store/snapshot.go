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

	"example.com/groupmembership/membership"
)

// A snapshot file holds the whole state: a header (magic word and format
// version), a body, and a CRC-32C of the body. The body is the nicknames
// (count, then uid and nickname each) and the groups (count, then id, member
// count, and the members in ascending order, each as the difference from the
// one before). All integers are unsigned varints.
const (
	snapMagic   = "GMSN"
	snapVersion = 1
)

// state is a copy of a Memory's contents, taken for a snapshot.
type state struct {
	nicknames map[membership.UID]string
	groups    []groupState
}

type groupState struct {
	id   string
	uids []membership.UID // ascending
}

// exportState copies m's contents. Changes made while it runs may or may not
// be in the copy, so the caller must keep them out.
func (m *Memory) exportState() *state {
	st := &state{}
	m.nicknamesMu.RLock()
	st.nicknames = make(map[membership.UID]string, len(m.nicknames))
	for uid, nick := range m.nicknames {
		st.nicknames[uid] = nick
	}
	m.nicknamesMu.RUnlock()
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		for id, g := range s.groups {
			uids := make([]membership.UID, 0, g.members.size)
			for uid := range g.members.all {
				uids = append(uids, uid)
			}
			st.groups = append(st.groups, groupState{id: id, uids: uids})
		}
		s.mu.RUnlock()
	}
	return st
}

// importState loads st into m, which must be empty and not yet shared. It
// builds every index in bulk: each group's chunks directly, and the reverse
// index from all pairs sorted at once, rather than one insert at a time.
func (m *Memory) importState(st *state) {
	nickUsers := make([]membership.User, 0, len(st.nicknames))
	for uid, nick := range st.nicknames {
		nickUsers = append(nickUsers, membership.User{UID: uid, Nickname: nick, HasNickname: true})
	}
	m.setNicknames(nickUsers)
	pairs := make([][]pair, len(m.reverse))
	for _, g := range st.groups {
		if len(g.uids) == 0 {
			continue
		}
		grp := &group{number: m.groupNumbers.number(g.id), revision: m.nextRevision()}
		grp.members.fill(g.uids)
		m.shardOf(g.id).groups[g.id] = grp
		for _, uid := range g.uids {
			k := m.reverseShardIndex(uid)
			pairs[k] = append(pairs[k], pair{uid: uid, group: grp.number})
		}
	}
	for k, ps := range pairs {
		slices.SortFunc(ps, comparePairs)
		m.reverse[k].pairs.fill(ps)
	}
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
	header := make([]byte, 8)
	copy(header, snapMagic)
	binary.LittleEndian.PutUint32(header[4:], snapVersion)
	if _, err := tmp.Write(header); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, crc), 1<<20)
	var b []byte
	b = binary.AppendUvarint(b[:0], uint64(len(st.nicknames)))
	for uid, nick := range st.nicknames {
		b = binary.AppendUvarint(b, uint64(uid))
		b = binary.AppendUvarint(b, uint64(len(nick)))
		b = append(b, nick...)
		if len(b) > 64<<10 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	b = binary.AppendUvarint(b, uint64(len(st.groups)))
	for _, g := range st.groups {
		b = binary.AppendUvarint(b, uint64(len(g.id)))
		b = append(b, g.id...)
		b = binary.AppendUvarint(b, uint64(len(g.uids)))
		var prev membership.UID
		for _, uid := range g.uids {
			b = binary.AppendUvarint(b, uint64(uid-prev))
			prev = uid
			if len(b) > 64<<10 {
				if _, err := w.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := binary.Write(tmp, binary.LittleEndian, crc.Sum32()); err != nil {
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
	return syncDir(dir)
}

// readSnapshot reads the snapshot at path.
func readSnapshot(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < 12 || string(data[:4]) != snapMagic {
		return nil, fmt.Errorf("%s: not a membership snapshot", path)
	}
	if v := binary.LittleEndian.Uint32(data[4:]); v != snapVersion {
		return nil, fmt.Errorf("%s: snapshot format version %d, this build reads version %d", path, v, snapVersion)
	}
	body := data[8 : len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, fmt.Errorf("%s: snapshot checksum does not match: the file is damaged", path)
	}
	st, err := decodeState(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

func decodeState(r *bytes.Reader) (*state, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	st := &state{nicknames: make(map[membership.UID]string, min(n, 1<<20))}
	for range n {
		uid, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if st.nicknames[membership.UID(uid)], err = readString(r); err != nil {
			return nil, err
		}
	}
	if n, err = binary.ReadUvarint(r); err != nil {
		return nil, err
	}
	for range n {
		var g groupState
		if g.id, err = readString(r); err != nil {
			return nil, err
		}
		count, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if count > uint64(r.Len()) {
			return nil, errors.New("member count larger than the file")
		}
		g.uids = make([]membership.UID, 0, count)
		var prev membership.UID
		for range count {
			d, err := binary.ReadUvarint(r)
			if err != nil {
				return nil, err
			}
			if d == 0 || d > math.MaxInt64-uint64(prev) {
				return nil, fmt.Errorf("group %q: members not in ascending order", g.id)
			}
			prev += membership.UID(d)
			g.uids = append(g.uids, prev)
		}
		st.groups = append(st.groups, g)
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes after the groups")
	}
	return st, nil
}

// syncDir fsyncs a directory, so that files created or renamed in it stay.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
