// Package scim is the SCIM 2.0 service provider (RFC 7643, RFC 7644) under
// /scim/v2: the routes that identity providers (Okta, Microsoft Entra ID)
// call to create, read, replace, patch and delete users and groups. A
// SCIM user is one of the service's users with an account
// (account.Account), its id the uid in decimal; a SCIM group is one of
// the service's groups, its id the group id, its members the group's
// direct members. Every write goes through membership.Service, so it is a
// change of the feed, logged and applied as any other.
//
// The package reads SCIM's requests and writes its replies through
// package wire (its JSON, errors, queries and filters), and makes of each
// request the writes and reads of membership.Service and
// directory.Service; the domain validates. Its files: routes and what they need (scim.go), what writes
// share (write.go), users (users.go, userwrite.go, userpatch.go), groups
// (groups.go, groupwrite.go, grouppatch.go), and discovery
// (discovery.go).
package scim

import (
	"net/http"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"

	"example.com/groupmembership/httpapi/scim/wire"
)

// Prefix is the path every SCIM route starts with: the base URL an
// identity provider is given ends with it.
const Prefix = "/scim/v2"

// Deps are what the SCIM handlers need: Service makes every write and
// reads the memberships, Directory reads the accounts and the groups'
// attributes. Both are nil while the service loads: the handlers are
// built then, but not called.
type Deps struct {
	Service   *membership.Service
	Directory *directory.Service
	// MaxBodyBytes bounds a request's body; Bodies is the memory request
	// bodies share, Replies the memory replies share.
	MaxBodyBytes int64
	Bodies       *budget.Bytes
	Replies      *budget.Bytes
}

// services are Deps' services, as the handlers' functions take them.
type services struct {
	*membership.Service
	dir *directory.Service
}

// services returns d's services.
func (d Deps) services() services { return services{d.Service, d.Directory} }

// Route is one method on one path of the SCIM API.
type Route struct {
	Method  string
	Path    string
	Handler http.Handler
}

// Routes returns the SCIM API surface: discovery, then Users and Groups.
func Routes(d Deps) []Route {
	return []Route{
		{"GET", Prefix + "/ServiceProviderConfig", handleDocument(serviceProviderConfig)},
		{"GET", Prefix + "/ResourceTypes", handleResourceTypes()},
		{"GET", Prefix + "/ResourceTypes/{name}", handleResourceType()},
		{"GET", Prefix + "/Schemas", handleSchemas()},
		{"GET", Prefix + "/Schemas/{id}", handleSchema()},
		{"GET", Prefix + "/Users", handleListUsers(d)},
		{"POST", Prefix + "/Users", handleCreateUser(d)},
		{"GET", Prefix + "/Users/{id}", handleGetUser(d)},
		{"PUT", Prefix + "/Users/{id}", handleReplaceUser(d)},
		{"PATCH", Prefix + "/Users/{id}", handlePatchUser(d)},
		{"DELETE", Prefix + "/Users/{id}", handleDeleteUser(d)},
		{"GET", Prefix + "/Groups", handleListGroups(d)},
		{"POST", Prefix + "/Groups", handleCreateGroup(d)},
		{"GET", Prefix + "/Groups/{id}", handleGetGroup(d)},
		{"PUT", Prefix + "/Groups/{id}", handleReplaceGroup(d)},
		{"PATCH", Prefix + "/Groups/{id}", handlePatchGroup(d)},
		{"DELETE", Prefix + "/Groups/{id}", handleDeleteGroup(d)},
	}
}

// MethodNotAllowed answers a method the path does not serve, as a SCIM
// error, with the Allow header.
func MethodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		wire.WriteError(w, r, wire.Errorf(http.StatusMethodNotAllowed, "", "the method %s is not allowed here: %s are", r.Method, allow))
	})
}

// NotFound answers a path under Prefix that is no SCIM route, as a SCIM
// error.
func NotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, r, wire.Errorf(http.StatusNotFound, "", "there is no SCIM resource at %.100q", r.URL.Path))
	})
}
