package client

import (
	"encoding/json"
	"time"
)

// Revision is a number of the store-wide sequence every change takes: 1,
// 2, 3, … A write returns the revision of its change in WriteResult, and
// a read can ask for a state at least that new (see WithReadYourWrites).
type Revision uint64

// User is an element of users in a write (Add, Replace, and the add and
// replace changes of a Batch): a uid, and optionally a nickname and an
// expiry. Make one with NewUser, or as a literal.
//
// A field left at its zero value is not sent: a member keeps the nickname
// and the expiry it has, and a new member has neither.
type User struct {
	// UID is the user, from 1 to 9223372036854775807.
	UID int64
	// Nickname, when not nil, sets the user's nickname, in every group
	// (a nickname belongs to the user). A pointer to "" sets it empty.
	Nickname *string
	// Expiry, when set, sets when the membership ends: ExpiresAt,
	// ExpiresAfter, or Permanent.
	Expiry Expiry
}

// NewUser returns the user uid, with no nickname and no expiry given.
func NewUser(uid int64) User { return User{UID: uid} }

// Users returns the users of uids, with no nickname and no expiry given.
func Users(uids ...int64) []User {
	users := make([]User, len(uids))
	for i, uid := range uids {
		users[i] = NewUser(uid)
	}
	return users
}

// WithNickname returns u with its nickname set to nickname.
func (u User) WithNickname(nickname string) User {
	u.Nickname = &nickname
	return u
}

// WithExpiry returns u with its expiry set to e.
func (u User) WithExpiry(e Expiry) User {
	u.Expiry = e
	return u
}

// Expiry says when a membership ends: at a time, some time after the
// write, or never. The zero Expiry gives none, and the membership keeps
// the one it has.
type Expiry struct {
	kind expiryKind
	at   time.Time
	ttl  time.Duration
}

type expiryKind uint8

const (
	expiryNone expiryKind = iota
	expiryAt
	expiryTTL
	expiryPermanent
)

// ExpiresAt ends the membership at t ("expires" in the service's terms).
// The service keeps it to the millisecond, and refuses a time that is not
// after its clock, or more than 3660 days ahead.
func ExpiresAt(t time.Time) Expiry { return Expiry{kind: expiryAt, at: t} }

// ExpiresAfter ends the membership d after the write is committed ("ttl"
// in the service's terms), from 1ms to 87840h.
func ExpiresAfter(d time.Duration) Expiry { return Expiry{kind: expiryTTL, ttl: d} }

// Permanent makes the membership permanent: an expiry it had is gone
// ("expires": null).
func Permanent() Expiry { return Expiry{kind: expiryPermanent} }

// IsZero reports whether e gives no expiry.
func (e Expiry) IsZero() bool { return e.kind == expiryNone }

// String describes e, for messages.
func (e Expiry) String() string {
	switch e.kind {
	case expiryAt:
		return "expires " + e.at.UTC().Format(time.RFC3339Nano)
	case expiryTTL:
		return "ttl " + e.ttl.String()
	case expiryPermanent:
		return "permanent"
	}
	return "none given"
}

// userJSON is the object form of an element of users.
type userJSON struct {
	UID      int64           `json:"uid"`
	Nickname *string         `json:"nickname,omitempty"`
	Expires  json.RawMessage `json:"expires,omitempty"`
	TTL      string          `json:"ttl,omitempty"`
}

// MarshalJSON encodes u as the service reads it: a bare uid when it gives
// nothing else, an object otherwise.
func (u User) MarshalJSON() ([]byte, error) {
	if u.Nickname == nil && u.Expiry.IsZero() {
		return json.Marshal(u.UID)
	}
	j := userJSON{UID: u.UID, Nickname: u.Nickname}
	// A ttl is sent as it is, below 1ms too: the service answers one out
	// of bounds with a 400 that names the element, as for any other.
	var err error
	if j.Expires, j.TTL, err = u.Expiry.fields(); err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// Member is a member of a group, as lists and Member give it.
type Member struct {
	UID      int64  `json:"uid"`
	Nickname string `json:"nickname"`
	// Expires is when the membership ends; nil for one that does not end
	// by itself.
	Expires *time.Time `json:"expires,omitempty"`
}

// GroupSize is a group and its number of members, as Groups lists them.
type GroupSize struct {
	Group   string `json:"group"`
	Members int    `json:"members"`
	// Subgroups is how many groups are nested directly in it.
	Subgroups int `json:"subgroups,omitempty"`
}

// Check asks whether UID is a member of Group: one question of
// Client.Check.
type Check struct {
	Group string `json:"group"`
	UID   int64  `json:"uid"`
}

// Op is what a change did, in the feed, or what a batch change does.
type Op string

// The ops of changes. OpAdd, OpRemove, OpReplace, OpDeleteGroup,
// OpAddGroups, OpRemoveGroups and OpReplaceGroups are also the ops of
// BatchChange.
const (
	OpAdd         Op = "add"
	OpRemove      Op = "remove"
	OpReplace     Op = "replace"
	OpDeleteGroup Op = "delete_group"
	OpRemoveUser  Op = "remove_user"
	OpExpire      Op = "expire"
	OpBatch       Op = "batch"
	// The ops of groups in groups: their changes name, in Groups, the
	// subgroups of Group they altered.
	OpAddGroups     Op = "add_groups"
	OpRemoveGroups  Op = "remove_groups"
	OpReplaceGroups Op = "replace_groups"
	OpExpireGroups  Op = "expire_groups"
	// The ops of the directory (the SCIM routes): set_user and
	// delete_user name their user in UIDs and no Group; set_group names
	// its Group. OpSetGroup is an op of BatchChange too.
	OpSetUser    Op = "set_user"
	OpDeleteUser Op = "delete_user"
	OpSetGroup   Op = "set_group"
)

// Change is one change of the feed (Changes, Follow). See the reference's
// "Following changes" for how to apply each op to a copy of the groups.
type Change struct {
	// Revision is the change's; zero for the changes inside a batch.
	Revision Revision `json:"rev,omitempty"`
	Op       Op       `json:"op"`
	// Time is when the change was committed; zero inside a batch, or for
	// a change logged before changes had times.
	Time time.Time `json:"-"`
	// Actor is the acting user the request named (WithActor); 0 for none.
	Actor int64 `json:"actor,omitempty"`
	// Principal is who made the change, as the service authenticated the
	// request (the name of its credential, "token" for the service's
	// single token; never the credential); "" for none: a request with no
	// credential, or the service's own change.
	Principal string `json:"principal,omitempty"`
	// Group is the group changed; empty for remove_user, set_user,
	// delete_user and batch.
	Group string `json:"group,omitempty"`
	// UIDs are the users whose membership changed (for replace, the
	// group's whole new membership; for remove_user, set_user and
	// delete_user, the one user).
	UIDs []int64 `json:"uids,omitempty"`
	// Nicknames are the nicknames set (on an add or replace), or cleared
	// ("" for a user the change left in no group).
	Nicknames []Nickname `json:"nicknames,omitempty"`
	// Expiries are the expiries an add or a replace set; Expires nil for
	// a membership made permanent.
	Expiries []MemberExpiry `json:"expiries,omitempty"`
	// Groups are, for the nesting ops, the subgroups of Group the change
	// altered: for add_groups and replace_groups each nesting as it is
	// now (Expires nil: it does not end; for replace_groups, the whole new
	// set), for remove_groups and expire_groups those it ended.
	Groups []NestedGroup `json:"groups,omitempty"`
	// Account is, for set_user, the user's account as set: an inactive
	// one (Active false) left every group.
	Account *Account `json:"account,omitempty"`
	// Attributes are, for set_group, the group's attributes as set.
	Attributes *GroupAttributes `json:"attributes,omitempty"`
	// Changes are the changes of a batch, in order, under its Revision.
	Changes []Change `json:"changes,omitempty"`
}

// Account is a user's account as a set_user change sends it; DisplayName
// is the user's nickname.
type Account struct {
	UserName    string `json:"userName"`
	ExternalID  string `json:"externalId"`
	DisplayName string `json:"displayName"`
	GivenName   string `json:"givenName"`
	FamilyName  string `json:"familyName"`
	Email       string `json:"email"`
	Active      bool   `json:"active"`
}

// GroupAttributes are a group's attributes as a set_group change sends
// them.
type GroupAttributes struct {
	DisplayName string `json:"displayName"`
	ExternalID  string `json:"externalId"`
}

// changeJSON is Change with its time as the feed sends it.
type changeJSON struct {
	changeFields
	Time *time.Time `json:"time,omitempty"`
}

type changeFields Change

// UnmarshalJSON decodes a change of the feed.
func (c *Change) UnmarshalJSON(b []byte) error {
	var j changeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Change(j.changeFields)
	if j.Time != nil {
		c.Time = *j.Time
	}
	return nil
}

// Nickname is a nickname a change set or cleared.
type Nickname struct {
	UID      int64  `json:"uid"`
	Nickname string `json:"nickname"`
}

// MemberExpiry is an expiry a change set: Expires nil for none.
type MemberExpiry struct {
	UID     int64      `json:"uid"`
	Expires *time.Time `json:"expires"`
}

// BatchChange is one write of a Batch.
type BatchChange struct {
	// Op is OpAdd, OpRemove, OpReplace, OpDeleteGroup, OpAddGroups,
	// OpRemoveGroups or OpReplaceGroups.
	Op Op
	// Group is the group written to.
	Group string
	// Users are the users of an add, a remove or a replace; a remove
	// sends only their uids, and a delete_group none.
	Users []User
	// Groups are the subgroups of an add_groups, a remove_groups or a
	// replace_groups; a remove_groups sends only their ids.
	Groups []Subgroup
	// IfMatch, when set, applies the whole batch only while the group's
	// ETag is this one (or, for "*", while the group has members).
	IfMatch string
}

// batchChangeJSON is a BatchChange as the service reads it.
type batchChangeJSON struct {
	Op      Op          `json:"op"`
	Group   string      `json:"group"`
	Users   *[]User     `json:"users,omitempty"`
	Groups  *[]Subgroup `json:"groups,omitempty"`
	IfMatch string      `json:"if_match,omitempty"`
}

// MarshalJSON encodes c as the service reads it.
func (c BatchChange) MarshalJSON() ([]byte, error) {
	j := batchChangeJSON{Op: c.Op, Group: c.Group, IfMatch: c.IfMatch}
	switch c.Op {
	case OpDeleteGroup:
	case OpAddGroups, OpReplaceGroups:
		groups := c.Groups
		if groups == nil {
			groups = []Subgroup{}
		}
		j.Groups = &groups
	case OpRemoveGroups:
		ids := make([]Subgroup, len(c.Groups))
		for i, g := range c.Groups {
			ids[i] = NewSubgroup(g.Group)
		}
		j.Groups = &ids
	case OpRemove:
		uids := make([]User, len(c.Users))
		for i, u := range c.Users {
			uids[i] = NewUser(u.UID)
		}
		j.Users = &uids
	default:
		users := c.Users
		if users == nil {
			users = []User{}
		}
		j.Users = &users
	}
	return json.Marshal(j)
}

// Counts are what one change of a batch did.
type Counts struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
}

// Subgroup is an element of groups in a nesting write (AddSubgroups,
// ReplaceSubgroups, and the add_groups and replace_groups changes of a
// Batch): a group to nest, and optionally when the nesting ends. Make one
// with NewSubgroup, or as a literal.
type Subgroup struct {
	// Group is the group's id.
	Group string
	// Expiry, when set, sets when the nesting ends: ExpiresAt,
	// ExpiresAfter, or Permanent. Without one, a nesting keeps the expiry
	// it has, and a new one has none.
	Expiry Expiry
}

// NewSubgroup returns the subgroup group, with no expiry given.
func NewSubgroup(group string) Subgroup { return Subgroup{Group: group} }

// Subgroups returns the subgroups of groups, with no expiry given.
func Subgroups(groups ...string) []Subgroup {
	out := make([]Subgroup, len(groups))
	for i, g := range groups {
		out[i] = NewSubgroup(g)
	}
	return out
}

// WithExpiry returns g with its expiry set to e.
func (g Subgroup) WithExpiry(e Expiry) Subgroup {
	g.Expiry = e
	return g
}

// subgroupJSON is the object form of an element of groups.
type subgroupJSON struct {
	Group   string          `json:"group"`
	Expires json.RawMessage `json:"expires,omitempty"`
	TTL     string          `json:"ttl,omitempty"`
}

// MarshalJSON encodes g as the service reads it: a bare group id when it
// gives no expiry, an object otherwise.
func (g Subgroup) MarshalJSON() ([]byte, error) {
	if g.Expiry.IsZero() {
		return json.Marshal(g.Group)
	}
	j := subgroupJSON{Group: g.Group}
	var err error
	j.Expires, j.TTL, err = g.Expiry.fields()
	if err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

// fields returns e as an element object's "expires" and "ttl".
func (e Expiry) fields() (expires json.RawMessage, ttl string, err error) {
	switch e.kind {
	case expiryAt:
		expires, err = json.Marshal(e.at.UTC().Format(time.RFC3339Nano))
	case expiryTTL:
		ttl = e.ttl.String()
	case expiryPermanent:
		expires = json.RawMessage("null")
	}
	return expires, ttl, err
}

// NestedGroup is a group as the lists of subgroups and parents give it,
// and as a nesting change names it.
type NestedGroup struct {
	Group string `json:"group"`
	// Expires is when a direct nesting ends; nil for one that does not
	// end by itself, and in transitive lists.
	Expires *time.Time `json:"expires,omitempty"`
}
