package storetest

import "example.com/groupmembership/membership"

// UserRange returns n users with consecutive uids from from on.
func UserRange(from, n int) []membership.User {
	users := make([]membership.User, n)
	for i := range users {
		users[i] = membership.User{UID: membership.UID(from + i)}
	}
	return users
}

// UIDsOf returns the uids of users, in order.
func UIDsOf(users []membership.User) []membership.UID {
	uids := make([]membership.UID, len(users))
	for i, u := range users {
		uids[i] = u.UID
	}
	return uids
}

// MemberUIDs returns the uids of members, in order, nil for none.
func MemberUIDs(members []membership.Member) []membership.UID {
	var uids []membership.UID
	for _, m := range members {
		uids = append(uids, m.UID)
	}
	return uids
}

// UsersOf returns users of uids, in order, without a nickname or an
// expiry.
func UsersOf(uids ...membership.UID) []membership.User {
	users := make([]membership.User, len(uids))
	for i, uid := range uids {
		users[i] = membership.User{UID: uid}
	}
	return users
}

// Nicknamed returns the user uid with the nickname name ("" clears it).
func Nicknamed(uid membership.UID, name string) membership.User {
	return membership.User{UID: uid, Nickname: name, HasNickname: true}
}
