package account_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
)

// An account's display name is its user's nickname: the bounds agree.
func TestTheDisplayNameIsBoundAsANickname(t *testing.T) {
	assert.Equal(t, membership.MaxNicknameBytes, account.MaxAttributeBytes)
}

// Two user names are the same when strings.EqualFold says so, and only
// then.
func TestFoldUserName(t *testing.T) {
	names := []string{"ann", "ANN", "Ann", "ann ", "ſ", "s", "S", "K", "k", "\u212a", "ǅ", "ǆ", "Ǆ", "straße", "STRASSE", "σ", "ς", "Σ", "ÅSA", "åsa", "\u212bsa"}
	for _, a := range names {
		for _, b := range names {
			assert.Equal(t, strings.EqualFold(a, b), account.FoldUserName(a) == account.FoldUserName(b), "%q and %q", a, b)
		}
	}
}

func TestCheck(t *testing.T) {
	long := strings.Repeat("a", account.MaxAttributeBytes)
	assert.NoError(t, account.Check(account.Account{UserName: long, ExternalID: long, DisplayName: long, GivenName: long, FamilyName: long, Email: long}))
	assert.NoError(t, account.Check(account.Account{UserName: "ann", DisplayName: "tab\there"}), "a nickname may hold a control character")
	for _, tt := range []struct {
		a    account.Account
		want string
	}{
		{account.Account{}, "userName is empty"},
		{account.Account{UserName: long + "a"}, "userName is 257 bytes, longer than 256"},
		{account.Account{UserName: "ann", Email: "a\nb"}, "emails value has control character U+000A at byte 1"},
		{account.Account{UserName: "ann", GivenName: "\xff"}, "name.givenName is not valid UTF-8"},
		{account.Account{UserName: "ann", DisplayName: long + "a"}, "displayName is 257 bytes"},
	} {
		err := account.Check(tt.a)
		if assert.Error(t, err, tt.want) {
			assert.Contains(t, err.Error(), tt.want)
		}
	}
	assert.NoError(t, account.CheckGroup(account.GroupAttributes{DisplayName: "Admins", ExternalID: long}))
	assert.EqualError(t, account.CheckGroup(account.GroupAttributes{ExternalID: "x"}), "displayName is empty")
	assert.EqualError(t, account.CheckGroup(account.GroupAttributes{DisplayName: "a\tb"}), "displayName has control character U+0009 at byte 1")
}

// Fields tells accounts apart, and is nil for none.
func TestFields(t *testing.T) {
	var none *account.Account
	assert.Nil(t, none.Fields())
	assert.Nil(t, (*account.GroupAttributes)(nil).Fields())
	a := account.Account{UserName: "ann", Active: true}
	b := a
	b.Active = false
	assert.NotEqual(t, a.Fields(), b.Fields())
	assert.Equal(t, []string{"Admins", "a1"}, (&account.GroupAttributes{DisplayName: "Admins", ExternalID: "a1"}).Fields())
}
