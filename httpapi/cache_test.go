package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestListCache(t *testing.T) {
	body := func(n int) []byte { // with cap exactly n: the cache charges cap
		b := make([]byte, n)
		copy(b, strings.Repeat("x", n))
		return b
	}

	t.Run("hit only at the same revision", func(t *testing.T) {
		c := newListCache(1 << 20)
		c.put("g", 5, body(10), 1, []string{`"5"`})
		got, _, tag, ok := c.get("g", 5)
		assert.True(t, ok)
		assert.Equal(t, body(10), got)
		assert.Equal(t, []string{`"5"`}, tag)
		_, _, _, ok = c.get("g", 6)
		assert.False(t, ok, "a newer revision misses")
		_, _, _, ok = c.get("other", 5)
		assert.False(t, ok)
	})

	t.Run("an older revision never replaces a newer one", func(t *testing.T) {
		c := newListCache(1 << 20)
		c.put("g", 7, []byte("new"), 1, nil)
		c.put("g", 6, []byte("old"), 1, nil)
		got, _, _, ok := c.get("g", 7)
		assert.True(t, ok)
		assert.Equal(t, "new", string(got))
		c.put("g", 8, []byte("newer"), 1, nil)
		got, _, _, _ = c.get("g", 8)
		assert.Equal(t, "newer", string(got))
	})

	t.Run("bounded in bytes, least recently used dropped first", func(t *testing.T) {
		c := newListCache(3 * (1000 + 1 + entryOverhead))
		c.put("a", 1, body(1000), 1, nil)
		c.put("b", 1, body(1000), 1, nil)
		c.put("c", 1, body(1000), 1, nil)
		_, _, _, ok := c.get("a", 1) // a is now the most recently used
		assert.True(t, ok)
		c.put("d", 1, body(1000), 1, nil)
		_, _, _, ok = c.get("b", 1)
		assert.False(t, ok, "b was the least recently used")
		for _, g := range []string{"a", "c", "d"} {
			_, _, _, ok := c.get(g, 1)
			assert.True(t, ok, g)
		}
		assert.LessOrEqual(t, c.used, c.maxBytes)
		assert.Len(t, c.entries, 3)
		assert.Equal(t, 3, c.lru.Len())
	})

	t.Run("a body over the bound is not cached", func(t *testing.T) {
		c := newListCache(500)
		c.put("g", 1, body(1000), 1, nil)
		_, _, _, ok := c.get("g", 1)
		assert.False(t, ok)
		assert.Zero(t, c.used)
	})

	t.Run("a zero bound turns it off", func(t *testing.T) {
		c := newListCache(0)
		c.put("g", 1, body(1), 1, nil)
		_, _, _, ok := c.get("g", 1)
		assert.False(t, ok)
	})
}
