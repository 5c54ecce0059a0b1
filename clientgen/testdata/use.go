// This file is compiled with the client oapi-codegen generates from
// httpapi/openapi.json (make clients): it does not build when a field the
// document types comes out with another type.

package membershipclient

import "errors"

var (
	_ int64     = UID(0)
	_ int64     = Count(0)
	_ int64     = Change{}.Rev
	_ ChangeOp  = Change{}.Op
	_ *UID      = Change{}.Actor
	_ *[]UID    = Change{}.Uids
	_ int64     = Replaced{}.Added
	_ *int64    = BatchResult{}.Removed
	_ int64     = GroupSize{}.Members
	_ *int64    = ChangesParams{}.After
	_ *UID      = ListMembersParams{}.After
	_ ErrorCode = Error{}.Error.Code
	_ *int64    = Error{}.Error.OldestRevision
	_ string    = Member{}.Nickname
)

// exampleUsers builds users=[1,"2",[3],[4,"Bob"],{"uid":5,"ttl":"4h"}], one
// element of each form, from typed values.
func exampleUsers() (Users, error) {
	var errs []error
	uid := func(n UID) UIDOrString {
		var u UIDOrString
		errs = append(errs, u.FromUID(n))
		return u
	}
	var text UIDOrString
	var pairUID, pairNickname User_2_Item
	errs = append(errs, text.FromUIDOrString1("2"), pairUID.FromUIDOrString(uid(4)), pairNickname.FromNickname("Bob"))
	ttl := TTL("4h")
	var number, numberText, single, pair, object User
	errs = append(errs,
		number.FromUIDOrString(uid(1)),
		numberText.FromUIDOrString(text),
		single.FromUser1(User1{uid(3)}),
		pair.FromUser2(User2{pairUID, pairNickname}),
		object.FromUser3(User3{Uid: uid(5), Ttl: &ttl}),
	)
	return Users{number, numberText, single, pair, object}, errors.Join(errs...)
}
