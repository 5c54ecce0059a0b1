package lists

import (
	"container/list"
	"unsafe"

	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/membership"
)

// Cache keeps the encoded list of recently read groups, each with the
// revision it shows, so that reading an unchanged group costs a lookup and a
// write. It holds at most maxBytes of bodies (plus the bookkeeping of each
// entry) and drops the least recently used first.
//
// It has no lock of its own: EncodedLists.mu guards it.
type Cache struct {
	maxBytes int64

	used    int64
	entries map[string]*list.Element // group id to an element of lru
	lru     list.List                // of *EncodedList, most recently used first
}

// entryOverhead counts the bytes an entry costs besides its body, group id
// and marks: the EncodedList, its list element, its map slot (a string and a
// pointer), and its three header values (a one-string slice each, and at
// most 40 bytes of text).
const entryOverhead = int64(unsafe.Sizeof(EncodedList{})+unsafe.Sizeof(list.Element{})) + 24 + 3*(16+40)

func NewCache(maxBytes int64) *Cache {
	return &Cache{maxBytes: maxBytes, entries: make(map[string]*list.Element)}
}

func (e *EncodedList) cost() int64 {
	return int64(cap(e.Body)+len(e.groupID)+cap(e.marks)*int(unsafe.Sizeof(encode.ListMark{}))) + entryOverhead
}

// get returns the cached list of groupID, if it shows revision.
func (c *Cache) get(groupID string, revision membership.Revision) (*EncodedList, bool) {
	if c.maxBytes <= 0 {
		return nil, false
	}
	el, ok := c.entries[groupID]
	if !ok {
		return nil, false
	}
	e := el.Value.(*EncodedList)
	if e.revision != revision {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return e, true
}

// put caches e as its group's list, unless a newer revision is cached
// already or e alone is over the bound. Callers must not change e
// afterwards: readers share it.
func (c *Cache) put(e *EncodedList) {
	if c.maxBytes <= 0 || e.cost() > c.maxBytes {
		return
	}
	if el, ok := c.entries[e.groupID]; ok {
		old := el.Value.(*EncodedList)
		if old.revision > e.revision {
			return // a slower reader listed an older state
		}
		c.remove(el)
	}
	for c.used+e.cost() > c.maxBytes {
		c.remove(c.lru.Back())
	}
	c.entries[e.groupID] = c.lru.PushFront(e)
	c.used += e.cost()
}

// lastSize returns the cost of the cached list of groupID, of any revision;
// 0 when there is none.
func (c *Cache) lastSize(groupID string) int64 {
	if el, ok := c.entries[groupID]; ok {
		return el.Value.(*EncodedList).cost()
	}
	return 0
}

// holds reports whether e is the cached list of its group.
func (c *Cache) holds(e *EncodedList) bool {
	el, ok := c.entries[e.groupID]
	return ok && el.Value == e
}

// bytes returns what the cache holds now.
func (c *Cache) bytes() int64 {
	return c.used
}

func (c *Cache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*EncodedList)
	delete(c.entries, e.groupID)
	c.used -= e.cost()
}
