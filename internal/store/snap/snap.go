// Package snap is the format of snapshots and backups: the whole state of
// a store as plain values (State), its encoder, which streams, and its
// reader, which checks the checksum and the rules of the service, and the
// names of snapshot files in a data directory (files.go). A backup
// (Backup) is a snapshot file that is sent instead of written.
package snap

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
	"time"

	"example.com/groupmembership/internal/fileheader"
	"example.com/groupmembership/internal/fileutil"
	"example.com/groupmembership/internal/store/writecodec"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/scope"
)

// castagnoli is the CRC-32C table of the snapshots' checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A snapshot file holds the whole state: a header (magic word and format
// version), a body, and a CRC-32C of the body. The body of version 9 is
//
//   - the revisions: the latest, that of the last nickname change, and that
//     of the last group deleted;
//   - the nicknames: count, then uid and nickname each;
//   - the groups (those with members, and those with subgroups only, with
//     no member): count, then id, revision, member count, and the members in
//     ascending order, each as the difference from the one before, then
//     the expiries of the members that have one: count, then each member's
//     uid, ascending, as the difference from the one before, and the time
//     its membership ends, in milliseconds since 1970-01-01 UTC (a signed,
//     zigzag varint, never 0);
//   - the changes the feed keeps: count, then revision, op, group id, uid
//     count and uids (as differences), nickname count and uid and nickname
//     each, and for an add or a replace the expiries it set, laid out as a
//     group's but for 0, a membership it made permanent. The op is 1 add,
//     2 remove, 3 replace (its uids are the group's whole new membership),
//     4 delete_group (no uid, no nickname), 5 remove_user (group id "", one
//     uid, no nickname), 7 expire (memberships that ended at their expiry,
//     laid out as a remove), 8 add_groups, 9 remove_groups, 10
//     replace_groups, 11 expire_groups (a nesting change: its group id, then,
//     instead of uids and nicknames, its groups: count, then each group id,
//     in byte order, and the time its nesting ends, as a member's expiry, 0
//     for none), 6 batch: after the op, instead of a group id, uids and
//     nicknames, the count of its changes (at least 1), then each as op (1
//     to 4, 8 to 10), group id, uids, nicknames and expiries, or groups,
//     with no revision and no stamp (they share the batch's); then the change's
//     stamp: a byte of flags (1 a time follows, 2 an actor follows, 4 a
//     principal follows), the time in milliseconds since 1970-01-01 UTC (a
//     signed, zigzag varint), the actor's uid and the principal's name;
//   - the Idempotency-Keys remembered, oldest first: count, then each key
//     (1 to 255 printable ASCII bytes), the principal it is remembered for
//     ("" for none), its fingerprint (16 bytes), the
//     time of its write's commit (milliseconds since 1970-01-01 UTC, a
//     signed, zigzag varint), a byte that says whose it is (0 a write's, 1
//     a batch's), the revision its write or batch returned, and its
//     results: count (1 for a write's), then each one's count, removed and
//     revision;
//   - the groups in groups: the count of groups that have subgroups, then
//     each one's id, in byte order, its subgroup count, and each subgroup's
//     id, in byte order, and the time the nesting ends (as a member's
//     expiry, 0 for none);
//   - the accounts: count, then each one's uid, in ascending order, its
//     attributes as package writecodec lays an account out (the display
//     name "": it is the user's nickname, among the nicknames), the times
//     it was created and modified (milliseconds since 1970-01-01 UTC, as
//     signed, zigzag varints, 0 for none) and its revision;
//   - the groups' attributes: count, then each group's id, in byte order,
//     its attributes as package writecodec lays them out, and the times
//     they were set first and last, as an account's. A group with
//     attributes but no members is among the groups, with no member, so
//     that its revision is kept.
//
// A change of op 12 set_user is laid out as a remove_user (group id "",
// one uid, no nickname) followed by its account; 13 delete_user as a
// remove_user; 14 set_group as a delete_group followed by its attributes.
// A batch may hold changes of op 14.
//
// Version 8, still read, is version 9 without the principals (no stamp
// has flag 4, and a key has no principal, not even ""), without the
// accounts and the groups' attributes, and without ops 12 to 14. Version
// 7 is version 8 without the groups in groups (every group has members)
// and without ops 8 to 11. Version 6 is version 7
// without the expiries (no member has one) and without op 7; version 5 is
// version 6 without the keys (it remembers none); version 4 is version 5
// without batches; version 3 is version 4 without the stamps (its changes
// have no time and no actor); version 2 is version 3 with ops 1 and 2
// only; version 1 has only the nicknames and the groups without their
// revisions. A build that reads an
// older version at most so refuses a snapshot that may hold ops it does
// not know by its version, not halfway through its changes. All integers
// are unsigned varints but the time, strings a length and bytes.
var snapshotKind = fileheader.Kind{Magic: "GMSN", Name: "snapshot", Version: 9}

// The flags of a change's stamp.
const (
	stampTime      byte = 1
	stampActor     byte = 2
	stampPrincipal byte = 4 // version 9 on
)

// State is a copy of a store's whole contents, as a snapshot holds it.
type State struct {
	// LastRevision is the latest revision; NicknamesRevision that of the
	// last nickname change, and RemovedRevision that of the last group
	// deleted (see memory.Store's revisions).
	LastRevision      membership.Revision
	NicknamesRevision membership.Revision
	RemovedRevision   membership.Revision
	Nicknames         map[membership.UID]string
	Groups            []Group
	// Changes are the changes the feed keeps, oldest first, ending at
	// LastRevision; none in a backup.
	Changes []membership.Change
	// Keys are the Idempotency-Keys the store remembers, oldest first; in
	// a backup too.
	Keys []Key
	// Nestings are the groups in groups, by parent then child in byte
	// order. A group that has subgroups but no members is among Groups
	// with no UIDs, so that its revision is kept.
	Nestings []Nesting
	// Accounts are the accounts, by uid ascending; their display names
	// are the users' nicknames, in Nicknames. GroupAttributes are the
	// groups' attributes, by id in byte order; a group with attributes
	// but no members or subgroups is among Groups with no UIDs.
	Accounts        []Account
	GroupAttributes []GroupAttributes
}

// Account is one account as a State keeps it: its DisplayName is "".
type Account struct {
	UID               membership.UID
	Account           account.Account
	Created, Modified time.Time
	Revision          membership.Revision
}

// GroupAttributes are one group's attributes as a State keeps them.
type GroupAttributes struct {
	ID                string
	Attributes        account.GroupAttributes
	Created, Modified time.Time
}

// Nesting is one group nested in another, as a State keeps it.
type Nesting struct {
	Parent, Child string
	// Expires is when the nesting ends; zero when it does not.
	Expires time.Time
}

// Key is an Idempotency-Key a store remembers, with what its write
// returned.
type Key struct {
	Key string
	// Principal is the principal the key is remembered for, "" for
	// none: each principal's keys are its own.
	Principal   string
	Fingerprint membership.Fingerprint
	// Time is the write's commit time.
	Time time.Time
	// Batch says the key is a batch's: Results holds each write's Result,
	// and Revision the batch's. A write's Results holds its one Result.
	Batch    bool
	Results  []membership.Result
	Revision membership.Revision
}

// Group is one group of a State.
type Group struct {
	ID       string
	Revision membership.Revision
	UIDs     []membership.UID // ascending
	// Expiries are those of the members that have one, ascending by uid.
	Expiries []membership.MemberExpiry
}

// How many op bytes (writecodec.Ops) each version knows, 0 included:
// versions 1 and 2 the first two ops only, versions 3 and 4 the first
// five, versions 5 and 6 the first six, version 7 the first seven,
// version 8 the first eleven, version 9 all of them.
const (
	opsOfVersion2 = 3
	opsOfVersion4 = 6
	opsOfVersion6 = 7
	opsOfVersion7 = 8
	opsOfVersion8 = 12
)

// opsOf returns how many op bytes version knows, 0 included.
func opsOf(version uint32) int {
	switch {
	case version <= 2:
		return opsOfVersion2
	case version <= 4:
		return opsOfVersion4
	case version <= 6:
		return opsOfVersion6
	case version <= 7:
		return opsOfVersion7
	case version <= 8:
		return opsOfVersion8
	}
	return len(writecodec.Ops)
}

// withExpiries is the first version with expiries, withNestings the first
// with groups in groups, withPrincipals the first with principals, and
// withDirectory the first with accounts and groups' attributes.
const (
	withExpiries   = 7
	withNestings   = 8
	withPrincipals = 9
	withDirectory  = 9
)

// WriteFile writes st to the file at path, atomically and durably (see
// fileutil.WriteAtomic): path is always either absent or a whole snapshot.
// The file is 0600.
func WriteFile(path string, st *State) error {
	return fileutil.WriteAtomic(path, 0o600, func(w io.Writer) error { return Encode(w, st) })
}

// Encode writes st to out in the snapshot format: the header, the
// body as it is encoded (never all of it in memory), and its checksum.
func Encode(out io.Writer, st *State) error {
	return encode(out, st, snapshotKind.Version)
}

// encode is Encode as version (4 on) lays st out, for the tests of the
// older versions: a state that version cannot hold (a key before version
// 6, an expiry or an expire before version 7, a nesting before version 8,
// a principal before version 9) is refused.
func encode(out io.Writer, st *State, version uint32) error {
	if version < 4 || version > snapshotKind.Version {
		return fmt.Errorf("cannot encode version %d", version)
	}
	if version < 6 && len(st.Keys) > 0 {
		return fmt.Errorf("version %d holds no key", version)
	}
	if version < withNestings && len(st.Nestings) > 0 {
		return fmt.Errorf("version %d holds no group in a group", version)
	}
	if err := checkDirectoryToEncode(st, version); err != nil {
		return err
	}
	if err := checkNestingOrder(st.Nestings); err != nil {
		return err
	}
	kind := snapshotKind
	kind.Version = version
	if _, err := out.Write(kind.Append(nil)); err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(out, crc), 1<<20)
	c := &encoder{w: w, expiries: version >= withExpiries}
	principals := version >= withPrincipals
	c.uvarint(uint64(st.LastRevision))
	c.uvarint(uint64(st.NicknamesRevision))
	c.uvarint(uint64(st.RemovedRevision))
	c.uvarint(uint64(len(st.Nicknames)))
	for uid, nick := range st.Nicknames {
		c.uvarint(uint64(uid))
		c.string(nick)
		c.flushIfFull()
	}
	c.uvarint(uint64(len(st.Groups)))
	for _, g := range st.Groups {
		c.string(g.ID)
		c.uvarint(uint64(g.Revision))
		c.ascendingUIDs(g.UIDs)
		if err := c.memberExpiries(g); err != nil {
			return err
		}
	}
	c.uvarint(uint64(len(st.Changes)))
	for _, ch := range st.Changes {
		if err := checkChangeToEncode(ch, opsOf(version), c.expiries, false); err != nil {
			return fmt.Errorf("change %d: %w", ch.Revision, err)
		}
		if err := checkPrincipal(ch.Principal, principals); err != nil {
			return fmt.Errorf("change %d: %w", ch.Revision, err)
		}
		c.b = appendChange(c.b, ch, c.expiries)
		c.flushIfFull()
	}
	if version >= 6 {
		c.uvarint(uint64(len(st.Keys)))
	}
	for _, k := range st.Keys {
		if err := checkKey(k); err != nil {
			return err
		}
		if err := checkPrincipal(k.Principal, principals); err != nil {
			return fmt.Errorf("the key %q: %w", k.Key, err)
		}
		c.b = appendKey(c.b, k, principals)
		c.flushIfFull()
	}
	if version >= withNestings {
		c.nestings(st.Nestings)
	}
	c.directory(st, version)
	c.flush()
	if err := w.Flush(); err != nil { // the first error of out, which w keeps
		return err
	}
	return binary.Write(out, binary.LittleEndian, crc.Sum32())
}

// encoder encodes into a buffer that it hands to w whenever it holds more
// than 64 KiB, so that encoding a large state never holds it all. w keeps
// the first error of what it writes to, takes nothing after it, and its
// Flush returns it.
type encoder struct {
	w *bufio.Writer
	b []byte
	// expiries says the version has them (7 on).
	expiries bool
}

// memberExpiries encodes the expiries of g's members, which must each
// have a time, ascending by uid; a version before expiries holds none.
func (c *encoder) memberExpiries(g Group) error {
	if !c.expiries {
		if len(g.Expiries) > 0 {
			return fmt.Errorf("group %q: this version holds no expiry", g.ID)
		}
		return nil
	}
	if err := checkExpiries(g.Expiries); err != nil {
		return fmt.Errorf("group %q: %w", g.ID, err)
	}
	for _, e := range g.Expiries {
		if e.At.IsZero() || e.At.UnixMilli() == 0 {
			return fmt.Errorf("group %q: the expiry of member %d has no time", g.ID, e.UID)
		}
	}
	c.b = appendExpiries(c.b, g.Expiries)
	c.flushIfFull()
	return nil
}

// nestings encodes nestings, which must be in order (checkNestingOrder):
// the count of parents, then each parent's id and its subgroups.
func (c *encoder) nestings(nestings []Nesting) {
	parents := 0
	for i, n := range nestings {
		if i == 0 || n.Parent != nestings[i-1].Parent {
			parents++
		}
	}
	c.uvarint(uint64(parents))
	for i := 0; i < len(nestings); {
		j := i
		for j < len(nestings) && nestings[j].Parent == nestings[i].Parent {
			j++
		}
		c.string(nestings[i].Parent)
		c.uvarint(uint64(j - i))
		for _, n := range nestings[i:j] {
			c.string(n.Child)
			c.b = appendTime(c.b, n.Expires)
			c.flushIfFull()
		}
		i = j
	}
}

// appendTime appends t in milliseconds since 1970 (a signed varint), 0
// for the zero time.
func appendTime(b []byte, t time.Time) []byte {
	return binary.AppendVarint(b, writecodec.Millis(t))
}

// readTime reads what appendTime wrote.
func readTime(r *reader) (time.Time, error) {
	ms, err := binary.ReadVarint(r)
	return writecodec.TimeOfMillis(ms), err
}

// checkNestingOrder returns an error unless nestings are by parent then
// child in byte order, once each, each of a time a snapshot can hold (one
// that is not 1970-01-01 to the millisecond).
func checkNestingOrder(nestings []Nesting) error {
	for i, n := range nestings {
		if i > 0 {
			prev := nestings[i-1]
			if n.Parent < prev.Parent || n.Parent == prev.Parent && n.Child <= prev.Child {
				return fmt.Errorf("the nesting of %q in %q is out of order", n.Child, n.Parent)
			}
		}
		if !holdable(n.Expires) {
			return fmt.Errorf("the nesting of %q in %q ends at a time a snapshot cannot hold", n.Child, n.Parent)
		}
	}
	return nil
}

func (c *encoder) uvarint(v uint64) { c.b = binary.AppendUvarint(c.b, v) }

func (c *encoder) string(s string) { c.b = writecodec.AppendString(c.b, s) }

// ascendingUIDs encodes uids as appendAscendingUIDs does, flushing as it
// goes: a group may hold millions.
func (c *encoder) ascendingUIDs(uids []membership.UID) {
	c.uvarint(uint64(len(uids)))
	var prev membership.UID
	for _, uid := range uids {
		c.uvarint(uint64(uid - prev))
		prev = uid
		c.flushIfFull()
	}
}

func (c *encoder) flushIfFull() {
	if len(c.b) > 64<<10 {
		c.flush()
	}
}

func (c *encoder) flush() {
	_, _ = c.w.Write(c.b) // an error is Flush's to return
	c.b = c.b[:0]
}

// ReadFile reads the snapshot at path. With each nil, the State it returns
// holds every group. Otherwise each is given each group, in the file's
// order, rather than keeping it: the State it returns has no Groups. A
// group's UIDs are in a buffer the next group reuses, so each must copy
// what it keeps; an error from each stops the reading and is returned. The
// checksum is checked before the first group is given, but a group that
// breaks a rule further on is found only when it is reached: on an error,
// the caller drops what each built.
//
// A restart loads a snapshot so, without holding every uid twice, and a
// snapshot's check after it is written reads it so, keeping nothing.
func ReadFile(path string, each func(Group) error) (*State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decode(data, path, each)
}

// Decode decodes the snapshot data, read from path (which its errors name).
func Decode(data []byte, path string) (*State, error) { return decode(data, path, nil) }

// decode decodes data as ReadFile does.
func decode(data []byte, path string, each func(Group) error) (*State, error) {
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
	st, err := decodeState(newReader(body), v, each)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// decodeState decodes a snapshot's body. With each nil, it keeps every
// group in the State; otherwise it gives each group to each, its uids in
// a buffer that the next group reuses, and keeps none.
func decodeState(r *reader, version uint32, each func(Group) error) (*State, error) {
	st := &State{}
	if version >= 2 {
		for _, rev := range []*membership.Revision{&st.LastRevision, &st.NicknamesRevision, &st.RemovedRevision} {
			n, err := binary.ReadUvarint(r)
			if err != nil {
				return nil, err
			}
			*rev = membership.Revision(n)
		}
	}
	var err error
	if st.Nicknames, err = readNicknames(r); err != nil {
		return nil, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	var uids []membership.UID // each group's, reused, when each is given
	for range n {
		g, err := readGroup(r, version, uids)
		if err != nil {
			return nil, err
		}
		if each == nil {
			st.Groups = append(st.Groups, g)
			continue
		}
		if cap(g.UIDs) > cap(uids) {
			uids = g.UIDs[:0]
		}
		if err := each(g); err != nil {
			return nil, err
		}
	}
	if version >= 2 {
		if st.Changes, err = readChanges(r, st.LastRevision, version); err != nil {
			return nil, err
		}
	}
	if version >= 6 {
		readKeyOf := func() (Key, error) { return readKey(r, version >= withPrincipals) }
		if st.Keys, err = readList(r, 1, "more keys than the file", readKeyOf); err != nil {
			return nil, err
		}
	}
	if version >= withNestings {
		if st.Nestings, err = readNestings(r); err != nil {
			return nil, err
		}
	}
	if version >= withDirectory {
		if err := readDirectory(r, st); err != nil {
			return nil, err
		}
	}
	if r.Len() != 0 {
		return nil, errors.New("trailing bytes after the groups")
	}
	return st, nil
}

// readNestings reads the groups in groups: nil when there is none.
func readNestings(r *reader) ([]Nesting, error) {
	parents, err := readCount(r, 1, "more groups with subgroups than the file")
	if err != nil || parents == 0 {
		return nil, err
	}
	var nestings []Nesting
	for range parents {
		parent, err := readGroupID(r)
		if err != nil {
			return nil, err
		}
		if len(nestings) > 0 && parent <= nestings[len(nestings)-1].Parent {
			return nil, fmt.Errorf("the subgroups of %q out of order", parent)
		}
		n, err := readCount(r, 1, "more subgroups than the file")
		switch {
		case err != nil:
			return nil, err
		case n == 0:
			return nil, fmt.Errorf("group %q has subgroups, none of them", parent)
		}
		for range n {
			child, err := readGroupID(r)
			if err != nil {
				return nil, err
			}
			expires, err := readTime(r)
			if err != nil {
				return nil, err
			}
			nestings = append(nestings, Nesting{Parent: parent, Child: child, Expires: expires})
		}
	}
	if err := checkNestingOrder(nestings); err != nil {
		return nil, err
	}
	return nestings, nil
}

// readGroupID reads a group id, which must be valid.
func readGroupID(r *reader) (string, error) {
	id, err := readString(r)
	if err != nil {
		return "", err
	}
	if err := membership.ValidateGroupID(id); err != nil {
		return "", err
	}
	return id, nil
}

// readNicknames reads the nicknames' count, then each uid and nickname.
func readNicknames(r *reader) (map[membership.UID]string, error) {
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
// member count, its members' uids and their expiries (from version 7). It
// reads the uids into uids' room when it has some, and otherwise into a
// slice of their number.
func readGroup(r *reader, version uint32, uids []membership.UID) (Group, error) {
	var g Group
	var err error
	if g.ID, err = readString(r); err != nil {
		return g, err
	}
	if version >= 2 {
		rev, err := binary.ReadUvarint(r)
		if err != nil {
			return g, err
		}
		g.Revision = membership.Revision(rev)
	}
	count, err := readCount(r, 1, "member count larger than the file")
	if err != nil {
		return g, err
	}
	if uids == nil && count > 0 {
		uids = make([]membership.UID, 0, count)
	}
	if g.UIDs, err = readAscendingUIDsInto(r, uids[:0], count); err != nil {
		return g, fmt.Errorf("group %q: %w", g.ID, err)
	}
	if version >= withExpiries {
		if g.Expiries, err = readExpiries(r, false); err != nil {
			return g, fmt.Errorf("group %q: %w", g.ID, err)
		}
	}
	return g, nil
}

// readAscendingUIDsInto appends count uids written as differences to uids.
// It decodes them from the unread bytes in place, not a byte at a time
// through io.ByteReader: a restart of a hundred million memberships reads
// as many.
func readAscendingUIDsInto(r *reader, uids []membership.UID, count uint64) ([]membership.UID, error) {
	var prev membership.UID
	b := r.unread()
	off := 0
	for range count {
		d, n := binary.Uvarint(b[off:])
		switch {
		case n == 0:
			return nil, io.ErrUnexpectedEOF
		case n < 0:
			return nil, errors.New("a uid's varint overflows 64 bits")
		case d == 0 || d > math.MaxInt64-uint64(prev):
			return nil, errors.New("uids not in ascending order")
		}
		off += n
		prev += membership.UID(d)
		uids = append(uids, prev)
	}
	r.skip(off)
	return uids, nil
}

// reader reads a snapshot's body: a bytes.Reader that also gives its
// unread bytes.
type reader struct {
	*bytes.Reader
	data []byte
}

func newReader(data []byte) *reader { return &reader{Reader: bytes.NewReader(data), data: data} }

// unread returns the bytes not read yet.
func (r *reader) unread() []byte { return r.data[len(r.data)-r.Len():] }

// skip reads n bytes, which must be unread, and drops them.
func (r *reader) skip(n int) { _, _ = r.Seek(int64(n), io.SeekCurrent) }

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

// checkChangeToEncode returns an error unless c's op is one of the first
// known of writecodec.Ops (and one a batch takes, for a batch's change),
// and, for a batch, it has changes; unless c has expiries only when it is
// an add or a replace of a version that has them (withExpiries), ascending
// by uid; and unless c has groups, in byte order, once each, only when it
// is a nesting change, which has no uid and no nickname.
func checkChangeToEncode(c membership.Change, known int, withExpiries, batched bool) error {
	op := slices.Index(writecodec.Ops[:known], c.Op)
	switch {
	case op < 1 || batched && !writecodec.BatchTakes(c.Op):
		return fmt.Errorf("op %q, which a snapshot cannot hold here", c.Op)
	case len(c.Groups) > 0 && !membership.IsNestingOp(c.Op):
		return fmt.Errorf("a change of op %s with groups", c.Op)
	case membership.IsNestingOp(c.Op) && (len(c.UIDs) > 0 || len(c.Nicknames) > 0):
		return fmt.Errorf("a change of op %s with users", c.Op)
	case (c.Op == membership.OpSetUser) != (c.Account != nil), (c.Op == membership.OpSetGroup) != (c.GroupAttributes != nil):
		return fmt.Errorf("a change of op %s with an account or attributes that do not go with it", c.Op)
	case c.Op == membership.OpBatch && len(c.Changes) == 0:
		return errors.New("a batch of no change")
	case len(c.Expiries) > 0 && !(withExpiries && hasExpiries(c.Op)):
		return fmt.Errorf("a change of op %s with expiries, which a snapshot cannot hold here", c.Op)
	}
	if err := checkExpiries(c.Expiries); err != nil {
		return err
	}
	if err := checkChangeGroups(c.Groups); err != nil {
		return err
	}
	if c.Op == membership.OpBatch {
		for _, sub := range c.Changes {
			if err := checkChangeToEncode(sub, known, withExpiries, true); err != nil {
				return fmt.Errorf("in a batch: %w", err)
			}
		}
	}
	return nil
}

// checkChangeGroups returns an error unless groups are in byte order of
// ids, once each, each ending at a time a snapshot can hold.
func checkChangeGroups(groups []membership.Nested) error {
	for i, g := range groups {
		if i > 0 && g.GroupID <= groups[i-1].GroupID {
			return errors.New("a change's groups not in byte order")
		}
		if !holdable(g.Expires) {
			return fmt.Errorf("a change's group %q ends at a time a snapshot cannot hold", g.GroupID)
		}
	}
	return nil
}

// hasExpiries reports whether a change of op has expiries in a snapshot:
// an add's or a replace's.
func hasExpiries(op membership.Op) bool {
	return op == membership.OpAdd || op == membership.OpReplace
}

// checkExpiries returns an error unless expiries are of uids, ascending,
// once each.
func checkExpiries(expiries []membership.MemberExpiry) error {
	var prev membership.UID
	for _, e := range expiries {
		if e.UID <= prev {
			return errors.New("expiries not of uids in ascending order")
		}
		prev = e.UID
	}
	return nil
}

// appendChange appends one change of the feed, with its expiries when
// the version has them.
func appendChange(b []byte, c membership.Change, expiries bool) []byte {
	b = binary.AppendUvarint(b, uint64(c.Revision))
	b = appendChangeBody(b, c, expiries)
	return appendStamp(b, c)
}

// appendChangeBody appends a change but for its revision and stamp: its
// op, then a batch's changes or another op's group id, uids and
// nicknames, and an add's or a replace's expiries when the version has
// them.
func appendChangeBody(b []byte, c membership.Change, expiries bool) []byte {
	b = append(b, byte(slices.Index(writecodec.Ops[:], c.Op))) // Encode checked the op
	if c.Op == membership.OpBatch {
		b = binary.AppendUvarint(b, uint64(len(c.Changes)))
		for _, sub := range c.Changes {
			b = appendChangeBody(b, sub, expiries)
		}
		return b
	}
	b = writecodec.AppendString(b, c.GroupID)
	if membership.IsNestingOp(c.Op) {
		b = binary.AppendUvarint(b, uint64(len(c.Groups)))
		for _, g := range c.Groups {
			b = appendTime(writecodec.AppendString(b, g.GroupID), g.Expires)
		}
		return b
	}
	b = appendAscendingUIDs(b, c.UIDs)
	b = binary.AppendUvarint(b, uint64(len(c.Nicknames)))
	for _, n := range c.Nicknames {
		b = binary.AppendUvarint(b, uint64(n.UID))
		b = writecodec.AppendString(b, n.Nickname)
	}
	if expiries && hasExpiries(c.Op) {
		b = appendExpiries(b, c.Expiries)
	}
	switch c.Op {
	case membership.OpSetUser:
		b = writecodec.AppendAccount(b, *c.Account)
	case membership.OpSetGroup:
		b = writecodec.AppendGroupAttributes(b, *c.GroupAttributes)
	}
	return b
}

// appendExpiries appends expiries, ascending by uid: their count, then
// each uid as the difference from the one before and the time in
// milliseconds since 1970 (a signed varint), 0 for none (made permanent).
func appendExpiries(b []byte, expiries []membership.MemberExpiry) []byte {
	b = binary.AppendUvarint(b, uint64(len(expiries)))
	var prev membership.UID
	for _, e := range expiries {
		b = binary.AppendUvarint(b, uint64(e.UID-prev))
		prev = e.UID
		b = appendTime(b, e.At)
	}
	return b
}

// readExpiries reads what appendExpiries wrote: nil for none. A time of 0
// is a membership made permanent, which only a change may hold
// (permanent).
func readExpiries(r *reader, permanent bool) ([]membership.MemberExpiry, error) {
	var prev membership.UID
	return readList(r, 2, "expiry count larger than the file", func() (membership.MemberExpiry, error) {
		d, err := binary.ReadUvarint(r)
		if err != nil {
			return membership.MemberExpiry{}, err
		}
		if d == 0 || d > math.MaxInt64-uint64(prev) {
			return membership.MemberExpiry{}, errors.New("expiries not in ascending order of uid")
		}
		prev += membership.UID(d)
		ms, err := binary.ReadVarint(r)
		switch {
		case err != nil:
			return membership.MemberExpiry{}, err
		case ms == 0 && !permanent:
			return membership.MemberExpiry{}, fmt.Errorf("the expiry of member %d has no time", prev)
		}
		return membership.MemberExpiry{UID: prev, At: writecodec.TimeOfMillis(ms)}, nil
	})
}

// checkPrincipal returns an error unless name is "" or, in a version
// that has principals, a principal's name.
func checkPrincipal(name string, principals bool) error {
	switch {
	case name == "":
		return nil
	case !principals:
		return errors.New("a principal, which a snapshot of this version cannot hold")
	}
	return scope.ValidatePrincipal(name)
}

// appendStamp appends c's time, actor and principal.
func appendStamp(b []byte, c membership.Change) []byte {
	var flags byte
	if !c.Time.IsZero() {
		flags |= stampTime
	}
	if c.Actor != 0 {
		flags |= stampActor
	}
	if c.Principal != "" {
		flags |= stampPrincipal
	}
	b = append(b, flags)
	if flags&stampTime != 0 {
		b = binary.AppendVarint(b, c.Time.UnixMilli())
	}
	if flags&stampActor != 0 {
		b = binary.AppendUvarint(b, uint64(c.Actor))
	}
	if flags&stampPrincipal != 0 {
		b = writecodec.AppendString(b, c.Principal)
	}
	return b
}

// stamp reads c's time, actor and principal.
func (cr *changeReader) stamp(c *membership.Change) error {
	r := cr.r
	known := stampTime | stampActor
	if cr.principals {
		known |= stampPrincipal
	}
	flags, err := writecodec.ReadFlags(r, known, "unknown stamp flags %#x")
	if err != nil {
		return err
	}
	if flags&stampTime != 0 {
		ms, err := binary.ReadVarint(r)
		if err != nil {
			return err
		}
		if c.Time = time.UnixMilli(ms).UTC(); c.Time.IsZero() {
			return errors.New("a time flagged that is none")
		}
	}
	if flags&stampActor != 0 {
		actor, err := binary.ReadUvarint(r)
		if err != nil {
			return err
		}
		if actor == 0 || actor > math.MaxInt64 {
			return fmt.Errorf("actor %d is not a uid", actor)
		}
		c.Actor = membership.UID(actor)
	}
	if flags&stampPrincipal != 0 {
		if c.Principal, err = cr.interned(); err != nil {
			return err
		}
		if err := scope.ValidatePrincipal(c.Principal); err != nil {
			return err
		}
	}
	return nil
}

// readChanges reads the feed's changes, which must be consecutive and end at
// last, from a snapshot of version.
func readChanges(r *reader, last membership.Revision, version uint32) ([]membership.Change, error) {
	n, err := readCount(r, 1, "more changes than revisions")
	switch {
	case err != nil:
		return nil, err
	case n > uint64(last):
		return nil, errors.New("more changes than revisions")
	}
	changes := make([]membership.Change, 0, n)
	next := last - membership.Revision(n) + 1
	cr := changeReader{r: r, ids: map[string]string{}, ops: opsOf(version), stamped: version >= 4, expiries: version >= withExpiries,
		principals: version >= withPrincipals}
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
// hundred thousand changes: their group ids and principals are interned
// (most changes name a group others do, and a principal of a few), and
// their uids cut from shared blocks, rather than allocated one by one.
type changeReader struct {
	r       *reader
	ops     int  // the op bytes the snapshot's version knows, 0 included
	stamped bool // its changes have stamps (version 4 on), not a batch's own
	// expiries says its adds and replaces have expiries (version 7 on).
	expiries bool
	// principals says its stamps may have principals (version 9 on).
	principals bool
	ids        map[string]string
	block      []membership.UID
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
	if c, err = cr.body(cr.ops); err != nil {
		return c, fmt.Errorf("change %d: %w", rev, err)
	}
	c.Revision = rev
	if cr.stamped {
		if err := cr.stamp(&c); err != nil {
			return c, fmt.Errorf("change %d: %w", rev, err)
		}
	}
	return c, nil
}

// body reads a change but for its revision and stamp, of one of the
// first known ops: a batch's changes, or another op's group id, uids,
// nicknames and, for an add or a replace, expiries.
func (cr *changeReader) body(known int) (membership.Change, error) {
	r := cr.r
	var c membership.Change
	op, err := r.ReadByte()
	if err != nil {
		return c, err
	}
	if op == 0 || int(op) >= known {
		return c, fmt.Errorf("unknown op %d", op)
	}
	c.Op = writecodec.Ops[op]
	if c.Op == membership.OpBatch {
		return cr.batch()
	}
	if c.GroupID, err = cr.interned(); err != nil {
		return c, err
	}
	if membership.IsNestingOp(c.Op) {
		if c.Groups, err = cr.groups(); err != nil {
			return c, err
		}
		return c, checkChange(c)
	}
	if c.UIDs, err = cr.uids(); err != nil {
		return c, err
	}
	c.Nicknames, err = readList(r, 1, "nickname count larger than the file", func() (membership.Member, error) {
		uid, err := binary.ReadUvarint(r)
		if err != nil {
			return membership.Member{}, err
		}
		nick, err := readString(r)
		return membership.Member{UID: membership.UID(uid), Nickname: nick}, err
	})
	if err != nil {
		return c, err
	}
	if cr.expiries && hasExpiries(c.Op) {
		if c.Expiries, err = readExpiries(r, true); err != nil {
			return c, err
		}
	}
	switch c.Op {
	case membership.OpSetUser:
		a, err := writecodec.ReadAccount(r.Reader)
		if err != nil {
			return c, err
		}
		c.Account = &a
	case membership.OpSetGroup:
		a, err := writecodec.ReadGroupAttributes(r.Reader)
		if err != nil {
			return c, err
		}
		c.GroupAttributes = &a
	}
	return c, checkChange(c)
}

// batch reads a batch's changes, after its op.
func (cr *changeReader) batch() (membership.Change, error) {
	c := membership.Change{Op: membership.OpBatch}
	var err error
	c.Changes, err = readList(cr.r, 1, "batch count larger than the file", func() (membership.Change, error) {
		sub, err := cr.body(cr.ops)
		if err == nil && !writecodec.BatchTakes(sub.Op) {
			err = fmt.Errorf("a change of op %s", sub.Op)
		}
		if err != nil {
			return sub, fmt.Errorf("in a batch: %w", err)
		}
		return sub, nil
	})
	if err == nil && len(c.Changes) == 0 {
		err = errors.New("a batch of no change")
	}
	return c, err
}

// checkChange returns an error unless c has what its op has: a group id
// but for OpRemoveUser, which names one uid and no nickname;
// OpDeleteGroup names neither.
func checkChange(c membership.Change) error {
	switch {
	case isUserOp(c.Op) && (c.GroupID != "" || len(c.UIDs) != 1 || len(c.Nicknames) > 0):
		return fmt.Errorf("a %s names one uid, no group and no nickname", c.Op)
	case (c.Op == membership.OpDeleteGroup || c.Op == membership.OpSetGroup) && (len(c.UIDs) > 0 || len(c.Nicknames) > 0):
		return fmt.Errorf("a %s names no uid and no nickname", c.Op)
	case !isUserOp(c.Op) && c.GroupID == "":
		return fmt.Errorf("a change of op %s names no group", c.Op)
	}
	return nil
}

// isUserOp reports whether a change of op names a user and no group:
// remove_user, set_user, delete_user.
func isUserOp(op membership.Op) bool {
	return op == membership.OpRemoveUser || op == membership.OpSetUser || op == membership.OpDeleteUser
}

// groups reads a nesting change's groups: nil for none.
func (cr *changeReader) groups() ([]membership.Nested, error) {
	groups, err := readList(cr.r, 2, "group count larger than the file", func() (membership.Nested, error) {
		id, err := cr.interned()
		if err == nil {
			err = membership.ValidateGroupID(id)
		}
		if err != nil {
			return membership.Nested{}, err
		}
		expires, err := readTime(cr.r)
		return membership.Nested{GroupID: id, Expires: expires}, err
	})
	if err != nil {
		return nil, err
	}
	return groups, checkChangeGroups(groups)
}

// interned reads a string, interned.
func (cr *changeReader) interned() (string, error) {
	b, err := readBytes(cr.r)
	if err != nil {
		return "", err
	}
	id, ok := cr.ids[string(b)]
	if !ok {
		id = string(b)
		cr.ids[id] = id
	}
	return id, nil
}

// uids reads a change's uids into the shared block.
func (cr *changeReader) uids() ([]membership.UID, error) {
	count, err := readCount(cr.r, 1, "uid count larger than the file")
	if err != nil || count == 0 {
		return nil, err
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

// readString reads a string: its length, then its bytes.
func readString(r *reader) (string, error) {
	b, err := readBytes(r)
	return string(b), err
}

// readBytes reads a string's bytes, which are the snapshot's own.
func readBytes(r *reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(r.Len()) {
		return nil, io.ErrUnexpectedEOF
	}
	b := r.unread()[:n]
	r.skip(int(n))
	return b, nil
}

// preallocated is how many items readList makes room for before it reads
// them.
const preallocated = 4096

// readCount reads a count of items that take at least size bytes each:
// one larger than what is left of r is refused, with the error tooMany.
func readCount(r *reader, size int, tooMany string) (uint64, error) {
	n, err := binary.ReadUvarint(r)
	if err == nil && n > uint64(r.Len()/size) {
		return 0, errors.New(tooMany)
	}
	return n, err
}

// readList reads a count (readCount), then as many items with read: nil
// for none. It makes room for at most preallocated items ahead of reading
// them: a count is bounded by the bytes left, an item in memory is larger.
func readList[T any](r *reader, size int, tooMany string, read func() (T, error)) ([]T, error) {
	n, err := readCount(r, size, tooMany)
	if err != nil || n == 0 {
		return nil, err
	}
	items := make([]T, 0, min(n, preallocated))
	for range n {
		item, err := read()
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, nil
}

// The byte that says whose a key is.
const (
	keyOfWrite byte = 0
	keyOfBatch byte = 1
)

// checkKey returns an error unless k is a key a store remembers: a valid
// key, and a write's with one result. Whether its version may hold its
// principal is checkPrincipal's to say.
func checkKey(k Key) error {
	if err := membership.ValidateIdempotencyKey(k.Key); err != nil {
		return fmt.Errorf("a remembered key: %v", err)
	}
	if !k.Batch && len(k.Results) != 1 {
		return fmt.Errorf("the key %q of a write has %d results", k.Key, len(k.Results))
	}
	return nil
}

// appendKey appends a remembered Idempotency-Key, with its principal when
// the version has principals.
func appendKey(b []byte, k Key, principals bool) []byte {
	b = writecodec.AppendString(b, k.Key)
	if principals {
		b = writecodec.AppendString(b, k.Principal)
	}
	b = append(b, k.Fingerprint[:]...)
	b = binary.AppendVarint(b, k.Time.UnixMilli())
	kind := keyOfWrite
	if k.Batch {
		kind = keyOfBatch
	}
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(k.Revision))
	b = binary.AppendUvarint(b, uint64(len(k.Results)))
	for _, res := range k.Results {
		b = binary.AppendUvarint(b, uint64(res.Count))
		b = binary.AppendUvarint(b, uint64(res.Removed))
		b = binary.AppendUvarint(b, uint64(res.Revision))
	}
	return b
}

// readKey reads one remembered Idempotency-Key, with its principal when
// the version has principals.
func readKey(r *reader, principals bool) (Key, error) {
	var k Key
	var err error
	if k.Key, err = readString(r); err != nil {
		return k, err
	}
	if principals {
		if k.Principal, err = readString(r); err != nil {
			return k, err
		}
		if err := checkPrincipal(k.Principal, true); err != nil {
			return k, fmt.Errorf("the key %q: %w", k.Key, err)
		}
	}
	if _, err := io.ReadFull(r, k.Fingerprint[:]); err != nil {
		return k, err
	}
	ms, err := binary.ReadVarint(r)
	if err != nil {
		return k, err
	}
	k.Time = time.UnixMilli(ms).UTC()
	kind, err := r.ReadByte()
	switch {
	case err != nil:
		return k, err
	case kind != keyOfWrite && kind != keyOfBatch:
		return k, fmt.Errorf("the key %q: unknown kind %d", k.Key, kind)
	}
	k.Batch = kind == keyOfBatch
	rev, err := binary.ReadUvarint(r)
	if err != nil {
		return k, err
	}
	k.Revision = membership.Revision(rev)
	n, err := readCount(r, 1, "more results than the file")
	if err != nil {
		return k, err
	}
	k.Results = make([]membership.Result, 0, n)
	for range n {
		var res membership.Result
		var f [3]uint64
		for i := range f {
			if f[i], err = binary.ReadUvarint(r); err != nil {
				return k, err
			}
		}
		if f[0] > math.MaxInt || f[1] > math.MaxInt {
			return k, fmt.Errorf("the key %q: a result's count is out of range", k.Key)
		}
		res.Count, res.Removed, res.Revision = int(f[0]), int(f[1]), membership.Revision(f[2])
		k.Results = append(k.Results, res)
	}
	return k, checkKey(k)
}
