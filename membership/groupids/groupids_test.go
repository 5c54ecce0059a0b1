package groupids

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrefixRangeEndsAfterEveryIDWithThePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		want   Range
	}{
		{"a", Range{Start: "a", End: "b"}},
		{"ab", Range{Start: "ab", End: "ac"}},
		{"a\xff", Range{Start: "a\xff", End: "b"}},
		{"\xff\xff", Range{Start: "\xff\xff"}},
		{"", Range{}},
		{"é", Range{Start: "é", End: "\xc3\xaa"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, PrefixRange(tt.prefix), "%q", tt.prefix)
	}
}

func TestRangeIntersect(t *testing.T) {
	tests := []struct {
		a, b, want Range
		ok         bool
	}{
		{Range{Start: "a", End: "c"}, Range{Start: "b", End: "d"}, Range{Start: "b", End: "c"}, true},
		{Range{Start: "a"}, Range{Start: "b", End: "d"}, Range{Start: "b", End: "d"}, true},
		{Range{Start: "a", End: "c"}, Range{Start: "b"}, Range{Start: "b", End: "c"}, true},
		{Range{}, Range{}, Range{}, true},
		{Range{Start: "a", End: "b"}, Range{Start: "b", End: "c"}, Range{}, false},
	}
	for _, tt := range tests {
		got, ok := tt.a.Intersect(tt.b)
		assert.Equal(t, tt.ok, ok, "%v ∩ %v", tt.a, tt.b)
		if ok {
			assert.Equal(t, tt.want, got, "%v ∩ %v", tt.a, tt.b)
		}
	}
}

func TestSetHoldsExactIDsPrefixesAndEverything(t *testing.T) {
	set := New([]string{"team-b", "ops", "team-a/x"}, []string{"team-a/", "team-"})
	for id, want := range map[string]bool{
		"team-b": true, "team-a/": true, "team-a/x": true, "team-a/x/y": true, "ops": true, "team-": true, "team-bb": true, "team-c": true,
		"team": false, "op": false, "opsx": false, "a": false, "zzz": false,
	} {
		assert.Equal(t, want, set.Contains(id), "%q", id)
	}
	assert.False(t, set.All())
	assert.Equal(t, []Range{{Start: "ops", End: "ops\x00"}, {Start: "team-", End: "team."}}, set.Ranges(), "sorted and disjoint: team-* holds the rest")

	narrow := New([]string{"team-b", "ops", "team-a/x"}, []string{"team-a/"})
	assert.False(t, narrow.Contains("team-bb"), "an exact id is no prefix")
	assert.False(t, narrow.Contains("team-a"), "nor is a prefix without its slash")
	assert.Equal(t, []Range{{Start: "ops", End: "ops\x00"}, {Start: "team-a/", End: "team-a0"}, {Start: "team-b", End: "team-b\x00"}}, narrow.Ranges())

	assert.True(t, New([]string{"x"}, []string{"team-a/", ""}).All())
	assert.True(t, All().Contains("anything"))
	var empty Set
	assert.False(t, empty.Contains("a"))
	assert.False(t, empty.All())
	starred := New([]string{"a*"}, []string{"b"})
	assert.True(t, starred.Contains("a*"), "an exact id may end in *")
	assert.False(t, starred.Contains("ab"))

	assert.Equal(t, narrow.Digest(), New([]string{"team-a/x", "ops", "team-b", "ops"}, []string{"team-a/"}).Digest(), "the same ids, however given")
	assert.NotEqual(t, narrow.Digest(), set.Digest())
	assert.Len(t, set.Digest(), 16)
}
