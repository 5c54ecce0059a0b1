// Package account is what an identity provider keeps of a user (its
// Account) and of a group (its GroupAttributes), as SCIM writes them:
// their bounds, and how user names compare. The ops set_user and set_group
// of package membership carry them; package membership/directory reads
// them and says what they do.
package account

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxAttributeBytes is the longest attribute of an account or a group
// (user name, external id, names, email, display name), in bytes of UTF-8.
// An account's display name is its user's nickname, whose bound
// (membership.MaxNicknameBytes) is the same.
const MaxAttributeBytes = 256

// Account is what an identity provider keeps of a user. A user is in the
// directory (provisioned) while it has one.
type Account struct {
	// UserName is unique among accounts, compared case-insensitively
	// (FoldUserName); never empty.
	UserName   string
	ExternalID string
	// DisplayName is the user's nickname, everywhere else: setting one
	// sets the other.
	DisplayName string
	GivenName   string
	FamilyName  string
	// Email is the primary work address.
	Email string
	// Active false deactivates the user: it is in no group while its
	// account is inactive (see package membership/directory).
	Active bool
}

// GroupAttributes are what an identity provider keeps of a group besides
// its members.
type GroupAttributes struct {
	// DisplayName is the group's name; never empty. A group without
	// attributes has its id for one. It need not be unique, and renaming
	// changes neither the group's id nor its members.
	DisplayName string
	ExternalID  string
}

// Fields returns a's attributes as strings, in a fixed order, Active as
// "true" or "false": what tells two accounts apart, for a fingerprint. A
// nil account has none.
func (a *Account) Fields() []string {
	if a == nil {
		return nil
	}
	active := "false"
	if a.Active {
		active = "true"
	}
	return []string{a.UserName, a.ExternalID, a.DisplayName, a.GivenName, a.FamilyName, a.Email, active}
}

// Fields returns a's attributes as strings, as Account.Fields does.
func (a *GroupAttributes) Fields() []string {
	if a == nil {
		return nil
	}
	return []string{a.DisplayName, a.ExternalID}
}

// FoldUserName returns name as user names are compared: two names are the
// same when their folds are equal. Each letter is the smallest of the
// letters Unicode's simple case folding makes equal to it, so that
// FoldUserName(a) == FoldUserName(b) exactly when strings.EqualFold(a, b).
func FoldUserName(name string) string {
	var b strings.Builder
	for _, r := range name {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune returns the smallest rune of r's simple folding orbit.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// checkAttribute returns an error, naming the attribute, unless s is at
// most MaxAttributeBytes bytes of valid UTF-8, without control characters
// unless controls, and, when required, not empty.
func checkAttribute(name, s string, required, controls bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%s is empty", name)
	case len(s) > MaxAttributeBytes:
		return fmt.Errorf("%s is %d bytes, longer than %d", name, len(s), MaxAttributeBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	for i, r := range s {
		if unicode.IsControl(r) && !controls {
			return fmt.Errorf("%s has control character %U at byte %d", name, r, i)
		}
	}
	return nil
}

// Check returns an error, naming the attribute, unless a's attributes are
// valid: a user name, and every attribute within its bound. The display
// name, a nickname, may hold control characters, as every nickname may.
func Check(a Account) error {
	for _, f := range []struct {
		name, value        string
		required, controls bool
	}{
		{"userName", a.UserName, true, false},
		{"externalId", a.ExternalID, false, false},
		{"displayName", a.DisplayName, false, true},
		{"name.givenName", a.GivenName, false, false},
		{"name.familyName", a.FamilyName, false, false},
		{"emails value", a.Email, false, false},
	} {
		if err := checkAttribute(f.name, f.value, f.required, f.controls); err != nil {
			return err
		}
	}
	return nil
}

// CheckGroup returns an error, naming the attribute, unless a's
// attributes are valid: a display name, and both within their bound.
func CheckGroup(a GroupAttributes) error {
	if err := checkAttribute("displayName", a.DisplayName, true, false); err != nil {
		return err
	}
	return checkAttribute("externalId", a.ExternalID, false, false)
}
