package lists

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/membership"
)

func TestListCache(t *testing.T) {
	list := func(groupID string, revision membership.Revision, body []byte) *EncodedList {
		return &EncodedList{groupID: groupID, revision: revision, Body: body, total: 1, ETag: encode.ETag(1, revision)}
	}
	body := func(n int) []byte { // with cap exactly n: the cache charges cap
		b := make([]byte, n)
		copy(b, strings.Repeat("x", n))
		return b
	}

	t.Run("hit only at the same revision", func(t *testing.T) {
		c := NewCache(1 << 20)
		c.put(list("g", 5, body(10)))
		got, ok := c.get("g", 5)
		assert.True(t, ok)
		assert.Equal(t, body(10), got.Body)
		assert.Equal(t, []string{`"0000000000000001-5"`}, got.ETag)
		_, ok = c.get("g", 6)
		assert.False(t, ok, "a newer revision misses")
		_, ok = c.get("other", 5)
		assert.False(t, ok)
	})

	t.Run("an older revision never replaces a newer one", func(t *testing.T) {
		c := NewCache(1 << 20)
		c.put(list("g", 7, []byte("new")))
		c.put(list("g", 6, []byte("old")))
		got, ok := c.get("g", 7)
		assert.True(t, ok)
		assert.Equal(t, "new", string(got.Body))
		c.put(list("g", 8, []byte("newer")))
		got, _ = c.get("g", 8)
		assert.Equal(t, "newer", string(got.Body))
	})

	t.Run("bounded in bytes, least recently used dropped first", func(t *testing.T) {
		c := NewCache(3 * (1000 + 1 + entryOverhead))
		c.put(list("a", 1, body(1000)))
		c.put(list("b", 1, body(1000)))
		c.put(list("c", 1, body(1000)))
		_, ok := c.get("a", 1) // a is now the most recently used
		assert.True(t, ok)
		c.put(list("d", 1, body(1000)))
		_, ok = c.get("b", 1)
		assert.False(t, ok, "b was the least recently used")
		for _, g := range []string{"a", "c", "d"} {
			_, ok := c.get(g, 1)
			assert.True(t, ok, g)
		}
		assert.LessOrEqual(t, c.used, c.maxBytes)
		assert.Equal(t, c.used, c.bytes())
		assert.Len(t, c.entries, 3)
		assert.Equal(t, 3, c.lru.Len())
	})

	t.Run("a body over the bound is not cached", func(t *testing.T) {
		c := NewCache(500)
		c.put(list("g", 1, body(1000)))
		_, ok := c.get("g", 1)
		assert.False(t, ok)
		assert.Zero(t, c.used)
	})

	t.Run("a zero bound turns it off", func(t *testing.T) {
		c := NewCache(0)
		c.put(list("g", 1, body(1)))
		_, ok := c.get("g", 1)
		assert.False(t, ok)
	})
}
