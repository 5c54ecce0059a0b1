package wire

// The kinds of resources, and the URNs of their core schemas and of the
// list and patch messages.
const (
	UserResource  = "User"
	GroupResource = "Group"
	UserSchema    = "urn:ietf:params:scim:schemas:core:2.0:User"
	GroupSchema   = "urn:ietf:params:scim:schemas:core:2.0:Group"
	ListSchema    = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
	PatchSchema   = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
)

// SchemaOf returns the URN of kind's core schema.
func SchemaOf(kind string) string {
	if kind == UserResource {
		return UserSchema
	}
	return GroupSchema
}
