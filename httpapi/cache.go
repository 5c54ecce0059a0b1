package httpapi

import (
	"container/list"
	"sync"

	"example.com/groupmembership/membership"
)

// listCache keeps the encoded list of recently read groups, each with the
// revision it shows, so that reading an unchanged group costs a lookup and a
// write. It holds at most maxBytes of bodies (plus the bookkeeping of each
// entry) and drops the least recently used first.
type listCache struct {
	maxBytes int64

	// mu guards everything below.
	mu      sync.Mutex
	used    int64
	entries map[string]*list.Element // group id to an element of lru
	lru     list.List                // of *cacheEntry, most recently used first
}

type cacheEntry struct {
	groupID  string
	revision membership.Revision
	body     []byte
	total    int      // the group's size, for X-Total-Count
	etag     []string // the ETag header's value, made once
}

// entryOverhead is a rough count of the bytes an entry costs besides its body
// and group id: the map slot, the list element and the cacheEntry.
const entryOverhead = 128

func newListCache(maxBytes int64) *listCache {
	return &listCache{maxBytes: maxBytes, entries: make(map[string]*list.Element)}
}

func (e *cacheEntry) cost() int64 {
	return int64(cap(e.body) + len(e.groupID) + entryOverhead)
}

// get returns the cached body of groupID, the group's size and the ETag
// header, if they show revision.
func (c *listCache) get(groupID string, revision membership.Revision) (body []byte, total int, etag []string, ok bool) {
	if c.maxBytes <= 0 {
		return nil, 0, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[groupID]
	if !ok {
		return nil, 0, nil, false
	}
	e := el.Value.(*cacheEntry)
	if e.revision != revision {
		return nil, 0, nil, false
	}
	c.lru.MoveToFront(el)
	return e.body, e.total, e.etag, true
}

// put caches body as groupID's list at revision, with its ETag header, unless a newer revision is
// cached already or the body alone is over the bound. Callers must not
// change body afterwards: readers share it.
func (c *listCache) put(groupID string, revision membership.Revision, body []byte, total int, etag []string) {
	if c.maxBytes <= 0 {
		return
	}
	e := &cacheEntry{groupID: groupID, revision: revision, body: body, total: total, etag: etag}
	if e.cost() > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[groupID]; ok {
		old := el.Value.(*cacheEntry)
		if old.revision > revision {
			return // a slower reader listed an older state
		}
		c.remove(el)
	}
	for c.used+e.cost() > c.maxBytes {
		c.remove(c.lru.Back())
	}
	c.entries[groupID] = c.lru.PushFront(e)
	c.used += e.cost()
}

func (c *listCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, e.groupID)
	c.used -= e.cost()
}
