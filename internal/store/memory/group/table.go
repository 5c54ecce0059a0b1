package group

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
	"unsafe"
)

// A Table holds the groups of one shard of the store, each in a slot of
// pages that never move, and finds them by id through an open-addressing
// index of slots: a group costs its struct and four bytes an index entry,
// where a map of ids to *Group costs a pointer, an id's header and a
// control byte an entry, and an allocation a group. A *Group stays valid
// while its group lives; its slot, once the group is dropped, is given to
// the next group made in the shard.
//
// A group's Number, its name in the reverse index and the due set, is its
// place among the slots of every shard: slot*shards + shard, so that
// Tables.At finds the group of a number with no map of numbers.
//
// The shard's lock guards a Table, but for what Tables.At reads: the
// pages, which it reads with an atomic load, and a slot's ID, which the
// caller keeps from changing otherwise (Numbers' lock).
type Table struct {
	shard, shards uint32
	seed          maphash.Seed
	// pages holds the slots (pageSlotsOf a page); the slice is replaced,
	// never changed in place, when a page is added.
	pages atomic.Pointer[[][]Group]
	// slots is how many slots have been handed out, free ones included.
	slots uint32
	// free are the slots of dropped groups, given out again first.
	free []uint32
	// index holds, for each id hashed to it (or, probing, after it), the
	// slot of its group plus one; 0 is an empty entry. It grows by half
	// when three quarters full, so that it is half to three quarters full:
	// 5 to 8 bytes a group.
	index []uint32
	// groups is how many slots hold a group.
	groups int
	// attrs are the attributes of the groups that have some, by slot:
	// few groups have them, so a map beside the slots costs less than a
	// pointer in each.
	attrs map[uint32]*Attrs
}

// A page of slots is one allocation of 4 KiB: its slots and the 8-byte
// header the allocator puts before an object of pointers over 512 bytes,
// with no room lost to its size classes but what is left over a slot. A
// table's first pages are smaller (256 bytes, then 512, 1 KiB and 2 KiB),
// so that a shard of a few groups takes little: a store of a thousand
// groups takes 64 shards of 16.
const groupBytes = uint32(unsafe.Sizeof(Group{}))

// firstPages are the slots of a table's first pages; pageSlots those of
// every page after them.
var firstPages = [...]uint32{max(1, 256/groupBytes), max(1, 512/groupBytes), max(1, (1024-8)/groupBytes), max(1, (2048-8)/groupBytes)}

const pageSlots = (4096 - 8) / groupBytes

// firstSlots is the slots of the first pages.
var firstSlots = firstPages[0] + firstPages[1] + firstPages[2] + firstPages[3]

// locate returns the page of slot s, and its place in the page.
func locate(s uint32) (page int, at uint32) {
	if s >= firstSlots {
		s -= firstSlots
		return len(firstPages) + int(s/pageSlots), s % pageSlots
	}
	for page, n := range firstPages {
		if s < n {
			return page, s
		}
		s -= n
	}
	panic("unreachable")
}

// pageSlotsOf returns the slots of page p.
func pageSlotsOf(p int) uint32 {
	if p < len(firstPages) {
		return firstPages[p]
	}
	return pageSlots
}

// NewTables returns the empty tables of n shards, hashing ids with seed.
// Their first slot is firstSlot: a store gives 0, and a test the numbers
// of a store that has seen many groups come and go.
func NewTables(n int, seed maphash.Seed, firstSlot uint32) Tables {
	ts := make(Tables, n)
	for i := range ts {
		t := &ts[i]
		t.shard, t.shards, t.seed, t.slots = uint32(i), uint32(n), seed, firstSlot
		t.pages.Store(new([][]Group))
	}
	return ts
}

// Len returns how many groups t holds.
func (t *Table) Len() int { return t.groups }

// home returns the index entry id hashes to: the top half of its hash,
// scaled to the index's length.
func (t *Table) home(id string) int {
	return int((maphash.String(t.seed, id) >> 32) * uint64(len(t.index)) >> 32)
}

// next returns the entry after i, the first after the last.
func (t *Table) next(i int) int {
	if i++; i == len(t.index) {
		return 0
	}
	return i
}

// slot returns the group in slot s of pages.
func slot(pages [][]Group, s uint32) *Group {
	p, at := locate(s)
	return &pages[p][at]
}

// Get returns the group groupID, nil when t has none.
func (t *Table) Get(groupID string) *Group {
	if t.groups == 0 {
		return nil
	}
	pages := *t.pages.Load()
	for i := t.home(groupID); ; i = t.next(i) {
		e := t.index[i]
		if e == 0 {
			return nil
		}
		if g := slot(pages, e-1); g.ID == groupID {
			return g
		}
	}
}

// Add makes the group groupID, which t must not hold, with no members,
// and returns it. It keeps a copy of groupID: the id a request names may
// share the memory of the whole request line, and the group outlives the
// request.
func (t *Table) Add(groupID string) *Group {
	if 4*(t.groups+1) > 3*len(t.index) {
		t.grow()
	}
	var s uint32
	if n := len(t.free); n > 0 {
		s, t.free = t.free[n-1], t.free[:n-1]
	} else {
		s = t.slots
		t.slots++
	}
	g := t.slotFor(s)
	*g = Group{ID: strings.Clone(groupID), Number: s*t.shards + t.shard}
	t.insert(s, g.ID)
	t.groups++
	return g
}

// slotFor returns slot s, adding its page when it has none.
func (t *Table) slotFor(s uint32) *Group {
	pages := *t.pages.Load()
	p, at := locate(s)
	if p >= len(pages) || pages[p] == nil {
		grown := make([][]Group, max(len(pages), p+1), max(2*len(pages), p+1))
		copy(grown, pages)
		grown[p] = make([]Group, pageSlotsOf(p))
		t.pages.Store(&grown)
		pages = grown
	}
	return &pages[p][at]
}

// insert enters slot s, holding groupID, in the index.
func (t *Table) insert(s uint32, groupID string) {
	i := t.home(groupID)
	for t.index[i] != 0 {
		i = t.next(i)
	}
	t.index[i] = s + 1
}

// grow makes the index half as long again (8 entries when it has none),
// entering every group again.
func (t *Table) grow() {
	old := t.index
	t.index = make([]uint32, max(8, len(old)+len(old)/2))
	pages := *t.pages.Load()
	for _, e := range old {
		if e != 0 {
			t.insert(e-1, slot(pages, e-1).ID)
		}
	}
}

// Remove drops g, a group of t, and frees its slot: g is zeroed, so that
// whatever kept it (package transitive's merges) sees it changed.
func (t *Table) Remove(g *Group) {
	pages := *t.pages.Load()
	s := g.Number / t.shards
	i := t.home(g.ID)
	for t.index[i] != s+1 {
		i = t.next(i)
	}
	// Backward shift: each entry after i, up to an empty one, that may
	// sit at i (its home is not between i and it) moves there.
	for j := t.next(i); t.index[j] != 0; j = t.next(j) {
		h := t.home(slot(pages, t.index[j]-1).ID)
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.index[i] = t.index[j]
			i = j
		}
	}
	t.index[i] = 0
	if g.HasAttrs() {
		delete(t.attrs, s)
	}
	*g = Group{}
	t.free = append(t.free, s)
	t.groups--
}

// All yields the groups of t, in the order of their slots.
func (t *Table) All(yield func(*Group) bool) {
	for _, p := range *t.pages.Load() {
		if p == nil {
			continue
		}
		for i := range p {
			if p[i].ID != "" && !yield(&p[i]) {
				return
			}
		}
	}
}

// Tables are the tables of every shard of a store.
type Tables []Table

// tableOf returns the table of g, and g's slot in it.
func (ts Tables) tableOf(g *Group) (*Table, uint32) {
	t := &ts[g.Number%uint32(len(ts))]
	return t, g.Number / t.shards
}

// Attrs returns the attributes of g, a group of ts, nil for none. The
// caller holds g's shard.
func (ts Tables) Attrs(g *Group) *Attrs {
	if !g.HasAttrs() {
		return nil
	}
	t, s := ts.tableOf(g)
	return t.attrs[s]
}

// SetAttrs gives g, a group of ts, the attributes a (nil: none). The
// caller holds g's shard for writing.
func (ts Tables) SetAttrs(g *Group, a *Attrs) {
	t, s := ts.tableOf(g)
	if a == nil {
		delete(t.attrs, s)
		g.subgroups &^= attributed
		return
	}
	if t.attrs == nil {
		t.attrs = make(map[uint32]*Attrs)
	}
	t.attrs[s] = a
	g.subgroups |= attributed
}

// At returns the group numbered n, nil when no slot has that number. The
// caller keeps its slot from being given out or freed meanwhile (see
// package memory): then it reads the group's ID, which is "" when the
// slot is free.
func (ts Tables) At(n uint32) *Group {
	t := &ts[n%uint32(len(ts))]
	s := n / t.shards
	pages := *t.pages.Load()
	p, at := locate(s)
	if p >= len(pages) || pages[p] == nil {
		return nil
	}
	return &pages[p][at]
}
