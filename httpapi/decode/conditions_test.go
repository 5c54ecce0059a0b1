package decode

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/membership"
)

func TestParseEntityTags(t *testing.T) {
	tests := []struct {
		name     string
		fields   []string
		wantStar bool
		wantTags []entityTag
		wantErr  bool
	}{
		{"star", []string{"*"}, true, nil, false},
		{"star with spaces", []string{" * "}, true, nil, false},
		{"one tag", []string{`"a"`}, false, []entityTag{{opaque: "a"}}, false},
		{"a weak tag", []string{`W/"a"`}, false, []entityTag{{weak: true, opaque: "a"}}, false},
		{"an empty tag", []string{`""`}, false, []entityTag{{opaque: ""}}, false},
		{"a list with empty elements and tabs", []string{",\t\"a\" ,, W/\"b\",\t"}, false, []entityTag{{opaque: "a"}, {weak: true, opaque: "b"}}, false},
		{"fields are one list", []string{`"a"`, `"b"`}, false, []entityTag{{opaque: "a"}, {opaque: "b"}}, false},
		{"obs-text and punctuation", []string{"\"\xe9!#~/\""}, false, []entityTag{{opaque: "\xe9!#~/"}}, false},
		{"empty", []string{""}, false, nil, true},
		{"only commas", []string{" , ,"}, false, nil, true},
		{"unterminated", []string{`"abc`}, false, nil, true},
		{"unquoted", []string{`abc`}, false, nil, true},
		{"a weak star", []string{`W/*`}, false, nil, true},
		{"W/ alone", []string{`W/`}, false, nil, true},
		{"no comma between", []string{`"a""b"`}, false, nil, true},
		{"a space inside", []string{`"a b"`}, false, nil, true},
		{"a DEL inside", []string{"\"a\x7f\""}, false, nil, true},
		{"star among tags", []string{`*, "a"`}, false, nil, true},
		{"star in a second field", []string{`"a"`, `*`}, false, nil, true},
		{"two stars", []string{`*, *`}, false, nil, true},
		{"something after a tag", []string{`"a"x`}, false, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			star, tags, err := parseEntityTags("If-Match", tt.fields)
			if tt.wantErr {
				assert.Equal(t, middleware.CodeInvalidHeader, membership.ErrorCode(err), "%v", err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tt.wantStar, star)
			assert.Equal(t, tt.wantTags, tags)
		})
	}
}

func TestWriteCondition(t *testing.T) {
	const epoch = 0x8c1f2ab04d9e3f67
	tests := []struct {
		name                 string
		ifMatch, ifNoneMatch string // "" sends none
		want                 membership.Precondition
		wantNever            bool
		wantErr              bool
	}{
		{"none", "", "", membership.Precondition{}, false, false},
		{"star", "*", "", membership.Precondition{Exists: true}, false, false},
		{"ours", `"8c1f2ab04d9e3f67-7"`, "", membership.Precondition{Revisions: []membership.Revision{7}}, false, false},
		{"revision 0", `"8c1f2ab04d9e3f67-0"`, "", membership.Precondition{Revisions: []membership.Revision{0}}, false, false},
		{"several, some not ours", `"8c1f2ab04d9e3f67-7", W/"8c1f2ab04d9e3f67-8", "0000000000000000-9", "8c1f2ab04d9e3f67-10"`, "",
			membership.Precondition{Revisions: []membership.Revision{7, 10}}, false, false},
		{"none ours", `W/"8c1f2ab04d9e3f67-7", "8C1F2AB04D9E3F67-7", "8c1f2ab04d9e3f67-07", "8c1f2ab04d9e3f67-", "8c1f2ab04d9e3f67-x", "x"`, "",
			membership.Precondition{}, true, false},
		{"a revision past 64 bits", `"8c1f2ab04d9e3f67-18446744073709551616"`, "", membership.Precondition{}, true, false},
		{"if-none-match star", "", "*", membership.Precondition{Empty: true}, false, false},
		{"both", `"8c1f2ab04d9e3f67-7"`, "*", membership.Precondition{Revisions: []membership.Revision{7}, Empty: true}, false, false},
		{"if-none-match with tags", "", `"8c1f2ab04d9e3f67-7"`, membership.Precondition{}, false, true},
		{"malformed if-match", `"7`, "", membership.Precondition{}, false, true},
		{"64 tags", strings.TrimSuffix(strings.Repeat(`"8c1f2ab04d9e3f67-7", `, 64), ", "), "",
			membership.Precondition{Revisions: slices.Repeat([]membership.Revision{7}, 64)}, false, false},
		{"65 tags", strings.TrimSuffix(strings.Repeat(`"x", `, 65), ", "), "", membership.Precondition{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("PUT", "/group-user/g", nil)
			if tt.ifMatch != "" {
				r.Header.Set("If-Match", tt.ifMatch)
			}
			if tt.ifNoneMatch != "" {
				r.Header.Set("If-None-Match", tt.ifNoneMatch)
			}
			cond, err := WriteCondition(r, epoch)
			if tt.wantErr {
				assert.Equal(t, middleware.CodeInvalidHeader, membership.ErrorCode(err), "%v", err)
				return
			}
			assert.NoError(t, err)
			// A condition that can never hold is one no state meets.
			never := slices.Equal(membership.NeverHolds(membership.Precondition{}).Revisions, cond.Revisions)
			if never {
				cond.Revisions = nil
			}
			assert.Equal(t, tt.want, cond)
			assert.Equal(t, tt.wantNever, never)
		})
	}
}
