package client

import (
	"container/list"
	"net/http"
	"sync"
)

// listCache keeps the last reply of each list URL with its ETag, the
// least recently used dropped first, in at most limit bytes of bodies,
// URLs and ETags. Safe for concurrent use.
type listCache struct {
	limit int64

	mu    sync.Mutex // guards the fields below
	size  int64
	order *list.List // of *cacheEntry, the most recently used first
	byURL map[string]*list.Element
}

// cacheEntry is one cached reply. Its fields are never written once it is
// in the cache: readers share them.
type cacheEntry struct {
	url, etag string
	header    http.Header
	body      []byte
}

// cachedHeaders are the header fields of a reply the cache keeps: those a
// page is read from. The others, which a server may make as large as it
// likes, are dropped.
var cachedHeaders = []string{"Content-Type", "ETag", "Link", "X-Total-Count", "X-Revision", "X-Epoch"}

// entryOverhead is what an entry costs besides its bytes: the entry, its
// list element, its map slot and its header map, about.
const entryOverhead = 512

// cost is what e counts against the bound.
func (e *cacheEntry) cost() int64 {
	n := entryOverhead + len(e.body) + len(e.url) + len(e.etag)
	for k, vs := range e.header {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return int64(n)
}

// keptHeader returns the fields of h the cache keeps.
func keptHeader(h http.Header) http.Header {
	kept := make(http.Header, len(cachedHeaders))
	for _, k := range cachedHeaders {
		if vs := h.Values(k); len(vs) > 0 {
			kept[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
		}
	}
	return kept
}

func newListCache(limit int64) *listCache {
	return &listCache{limit: limit, order: list.New(), byURL: map[string]*list.Element{}}
}

// etag returns the ETag of the reply cached for url; "" when none is.
func (c *listCache) etag(url string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byURL[url]; ok {
		return el.Value.(*cacheEntry).etag
	}
	return ""
}

// get returns the reply cached for url with this etag, and marks it used.
func (c *listCache) get(url, etag string) (*cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byURL[url]
	if !ok || (etag != "" && el.Value.(*cacheEntry).etag != etag) {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry), true
}

// put caches the reply of url, unless it has no ETag or is larger than the
// bound, and drops the least recently used replies past the bound.
func (c *listCache) put(url, etag string, header http.Header, body []byte) {
	e := &cacheEntry{url: url, etag: etag, header: keptHeader(header), body: body}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byURL[url]; ok {
		c.remove(el)
	}
	if etag == "" || e.cost() > c.limit {
		return
	}
	c.byURL[url] = c.order.PushFront(e)
	c.size += e.cost()
	for c.size > c.limit {
		c.remove(c.order.Back())
	}
}

// remove drops el. The caller holds mu.
func (c *listCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	delete(c.byURL, e.url)
	c.size -= e.cost()
}

// stats returns the entries and bytes cached.
func (c *listCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.size
}
