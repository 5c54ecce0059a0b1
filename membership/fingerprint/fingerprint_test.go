package fingerprint

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sum(kind byte, add func(f *Hasher)) [16]byte {
	f := New(kind)
	add(f)
	return f.Sum()
}

// Fields are length-prefixed: the same bytes split otherwise, or of
// another kind, hash otherwise; the same fields alike, however long.
func TestFieldsAreLengthPrefixed(t *testing.T) {
	ab := sum('w', func(f *Hasher) { f.String("a"); f.String("b") })
	assert.NotEqual(t, ab, sum('w', func(f *Hasher) { f.String("ab"); f.String("") }))
	assert.NotEqual(t, ab, sum('b', func(f *Hasher) { f.String("a"); f.String("b") }))
	assert.Equal(t, ab, sum('w', func(f *Hasher) { f.String("a"); f.String("b") }))

	many := func(f *Hasher) {
		for i := range 100000 {
			f.Uvarint(uint64(i))
		}
		f.String(strings.Repeat("x", 10000))
	}
	assert.Equal(t, sum('w', many), sum('w', many), "past the buffer")
	assert.NotEqual(t, sum('w', many), sum('w', func(f *Hasher) { many(f); f.Uvarint(0) }))
}
