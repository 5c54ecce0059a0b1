package writecodec

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestEachPartReadsBackAsWritten(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	users := []membership.User{{UID: 1}, {UID: 9223372036854775807, Nickname: "Zoë\x00", HasNickname: true}, {UID: 3, HasNickname: true},
		{UID: 4, Expiry: membership.Expiry{Set: true, At: at}}, {UID: 5, Nickname: "e", HasNickname: true, Expiry: membership.Expiry{Set: true}}}
	uids := []membership.UID{5, 1, 5}
	cond := membership.Precondition{Revisions: []membership.Revision{0, 7}, Exists: true}
	b := AppendString(nil, "group")
	b = AppendUsers(b, users)
	b = AppendUIDs(b, uids)
	b = AppendPrecondition(b, cond)
	b = AppendUsers(b, nil)

	r := bytes.NewReader(b)
	s, err := ReadString(r)
	require.NoError(t, err)
	assert.Equal(t, "group", s)
	gotUsers, err := ReadUsers(r)
	require.NoError(t, err)
	assert.Equal(t, users, gotUsers)
	gotUIDs, err := ReadUIDs(r)
	require.NoError(t, err)
	assert.Equal(t, uids, gotUIDs)
	gotCond, err := ReadPrecondition(r)
	require.NoError(t, err)
	assert.Equal(t, cond, gotCond)
	none, err := ReadUsers(r)
	require.NoError(t, err)
	assert.Nil(t, none)
	assert.Zero(t, r.Len())
}

func TestWhatIsNeverWrittenIsRefused(t *testing.T) {
	for name, c := range map[string]struct {
		data []byte
		read func(*bytes.Reader) error
	}{
		"a uid of 0":                     {[]byte{1, 0}, func(r *bytes.Reader) error { _, err := ReadUIDs(r); return err }},
		"a uid past MaxInt64":            {append([]byte{1}, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), func(r *bytes.Reader) error { _, err := ReadUIDs(r); return err }},
		"a count past the end":           {[]byte{5, 1}, func(r *bytes.Reader) error { _, err := ReadUIDs(r); return err }},
		"a user flag of 4":               {[]byte{1, 1, 4}, func(r *bytes.Reader) error { _, err := ReadUsers(r); return err }},
		"a string cut short":             {[]byte{3, 'a'}, func(r *bytes.Reader) error { _, err := ReadString(r); return err }},
		"unknown precondition flags":     {[]byte{4, 0}, func(r *bytes.Reader) error { _, err := ReadPrecondition(r); return err }},
		"a precondition of nothing":      {[]byte{0, 0}, func(r *bytes.Reader) error { _, err := ReadPrecondition(r); return err }},
		"a precondition's revisions cut": {[]byte{0, 2, 1}, func(r *bytes.Reader) error { _, err := ReadPrecondition(r); return err }},
	} {
		assert.Error(t, c.read(bytes.NewReader(c.data)), name)
	}
}

func TestATTLIsNeverLogged(t *testing.T) {
	assert.Panics(t, func() {
		AppendUsers(nil, []membership.User{{UID: 1, Expiry: membership.Expiry{Set: true, TTL: time.Hour}}})
	})
}

func TestSubgroupsReadBackAsWritten(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	groups := []membership.Subgroup{{GroupID: "backend"}, {GroupID: "ü/x", Expiry: membership.Expiry{Set: true, At: at}},
		{GroupID: "p", Expiry: membership.Expiry{Set: true}}}
	b := AppendSubgroups(nil, groups)
	assert.Equal(t, []byte{3, 7, 'b', 'a', 'c', 'k', 'e', 'n', 'd', 0}, b[:10], "the id, then flags 0")
	b = AppendSubgroups(b, nil)
	r := bytes.NewReader(b)
	got, err := ReadSubgroups(r)
	require.NoError(t, err)
	assert.Equal(t, groups, got)
	none, err := ReadSubgroups(r)
	require.NoError(t, err)
	assert.Nil(t, none)
	assert.Zero(t, r.Len())
}

func TestSubgroupsNeverWrittenAreRefused(t *testing.T) {
	for name, data := range map[string][]byte{
		"an empty group id":         {1, 0, 0},
		"a group id with a newline": {1, 1, '\n', 0},
		"a subgroup flag of 2":      {1, 1, 'g', 2},
		"an expiry cut short":       {1, 1, 'g', 1, 0x80},
		"an expiry past MaxInt64":   {1, 1, 'g', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"no flags":                  {1, 1, 'g'},
		"a count past the end":      {3, 1, 'g', 0},
	} {
		_, err := ReadSubgroups(bytes.NewReader(data))
		assert.Error(t, err, name)
	}
	assert.Panics(t, func() {
		AppendSubgroups(nil, []membership.Subgroup{{GroupID: "g", Expiry: membership.Expiry{Set: true, TTL: time.Hour}}})
	})
}
