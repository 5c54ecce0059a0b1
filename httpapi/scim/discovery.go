package scim

import (
	"net/http"

	"example.com/groupmembership/httpapi/scim/wire"
)

// Discovery (RFC 7644 4): what the service supports, its resource types
// and their schemas, as far as the service keeps them.

// serviceProviderConfig returns the ServiceProviderConfig: patch and
// filters yes (maxResults, MaxResults), ETags yes, bulk, sort and password
// changes no, and the bearer token.
func serviceProviderConfig(base string) wire.Object {
	return wire.Obj(
		"schemas", []string{"urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"},
		"patch", wire.Obj("supported", true),
		"bulk", wire.Obj("supported", false, "maxOperations", 0, "maxPayloadSize", 0),
		"filter", wire.Obj("supported", true, "maxResults", wire.MaxResults),
		"changePassword", wire.Obj("supported", false),
		"sort", wire.Obj("supported", false),
		"etag", wire.Obj("supported", true),
		"authenticationSchemes", []wire.Object{
			wire.Obj(
				"type", "oauthbearertoken",
				"name", "Bearer token",
				"description", "The service's token (-token-file), sent as Authorization: Bearer <token>",
				"primary", true,
			),
		},
		"meta", wire.Obj("resourceType", "ServiceProviderConfig", "location", base+"/ServiceProviderConfig"),
	)
}

// handleDocument answers GET of the document doc returns for the
// service's base URL.
func handleDocument(doc func(base string) wire.Object) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := noParameters(r); err != nil {
			wire.WriteError(w, r, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, doc(baseURL(r)))
	})
}

// noParameters refuses a query string on a route that takes none.
func noParameters(r *http.Request) error {
	if r.URL.RawQuery != "" {
		return wire.BadRequest(wire.InvalidValue, "this route takes no query parameters")
	}
	return nil
}

// resourceType returns the ResourceType of kind.
func resourceType(base, kind string) wire.Object {
	return wire.Obj(
		"schemas", []string{"urn:ietf:params:scim:schemas:core:2.0:ResourceType"},
		"id", kind,
		"name", kind,
		"endpoint", "/"+kind+"s",
		"description", map[string]string{wire.UserResource: "A user of the service: its id is its uid", wire.GroupResource: "A group of the service: its id is its group id"}[kind],
		"schema", wire.SchemaOf(kind),
		"meta", wire.Obj("resourceType", "ResourceType", "location", base+"/ResourceTypes/"+kind),
	)
}

// handleResourceTypes answers GET /ResourceTypes: User and Group, as a
// list.
func handleResourceTypes() http.Handler {
	return handleList(func(base string) []wire.Object {
		return []wire.Object{resourceType(base, wire.UserResource), resourceType(base, wire.GroupResource)}
	})
}

// handleResourceType answers GET /ResourceTypes/{name}.
func handleResourceType() http.Handler {
	return handleOne("name", func(base, name string) wire.Object {
		if name != wire.UserResource && name != wire.GroupResource {
			return nil
		}
		return resourceType(base, name)
	})
}

// handleSchemas answers GET /Schemas: the User and Group schemas, as a
// list.
func handleSchemas() http.Handler {
	return handleList(func(base string) []wire.Object { return []wire.Object{userSchemaObject(base), groupSchemaObject(base)} })
}

// handleSchema answers GET /Schemas/{id}.
func handleSchema() http.Handler {
	return handleOne("id", func(base, id string) wire.Object {
		switch id {
		case wire.UserSchema:
			return userSchemaObject(base)
		case wire.GroupSchema:
			return groupSchemaObject(base)
		}
		return nil
	})
}

// handleList answers GET of the whole list of resources list returns.
func handleList(list func(base string) []wire.Object) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := noParameters(r); err != nil {
			wire.WriteError(w, r, err)
			return
		}
		resources := list(baseURL(r))
		writeList(w, wire.List{StartIndex: 1}, len(resources), resources)
	})
}

// handleOne answers GET of the resource one returns for the path value
// name, 404 when it returns none.
func handleOne(name string, one func(base, value string) wire.Object) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := noParameters(r); err != nil {
			wire.WriteError(w, r, err)
			return
		}
		o := one(baseURL(r), r.PathValue(name))
		if o == nil {
			wire.WriteError(w, r, wire.Errorf(http.StatusNotFound, "", "there is no %.100q here", r.PathValue(name)))
			return
		}
		wire.WriteJSON(w, http.StatusOK, o)
	})
}

// attribute describes an attribute of a schema, with RFC 7643 7's
// characteristics.
func attribute(name, typ, description string, required, caseExact bool, mutable, unique string, subs ...wire.Object) wire.Object {
	a := wire.Obj(
		"name", name,
		"type", typ,
		"multiValued", typ == "complex" && name != "name",
		"description", description,
		"required", required,
	)
	if typ == "string" {
		a = a.With("caseExact", caseExact)
	}
	if len(subs) > 0 {
		a = a.With("subAttributes", subs)
	}
	return a.With("mutability", mutable, "returned", "default", "uniqueness", unique)
}

// userSchemaObject returns the User schema, as far as the service keeps
// it.
func userSchemaObject(base string) wire.Object {
	return wire.Obj(
		"schemas", []string{"urn:ietf:params:scim:schemas:core:2.0:Schema"},
		"id", wire.UserSchema,
		"name", "User",
		"description", "A user of the service, provisioned: its id is its uid",
		"attributes", []wire.Object{
			attribute("userName", "string", "Unique, compared case-insensitively", true, false, "readWrite", "server"),
			attribute("name", "complex", "The user's name", false, false, "readWrite", "none",
				attribute("givenName", "string", "The given name", false, false, "readWrite", "none"),
				attribute("familyName", "string", "The family name", false, false, "readWrite", "none")),
			attribute("displayName", "string", "The user's nickname on every route", false, false, "readWrite", "none"),
			attribute("emails", "complex", "The primary work address: one", false, false, "readWrite", "none",
				attribute("value", "string", "The address", false, false, "readWrite", "none"),
				attribute("type", "string", "work", false, false, "readWrite", "none"),
				attribute("primary", "boolean", "true", false, false, "readWrite", "none")),
			attribute("active", "boolean", "false removes the user from every group and keeps it out of them", false, false, "readWrite", "none"),
		},
		"meta", wire.Obj("resourceType", "Schema", "location", base+"/Schemas/"+wire.UserSchema),
	)
}

// groupSchemaObject returns the Group schema, as far as the service keeps
// it.
func groupSchemaObject(base string) wire.Object {
	return wire.Obj(
		"schemas", []string{"urn:ietf:params:scim:schemas:core:2.0:Schema"},
		"id", wire.GroupSchema,
		"name", "Group",
		"description", "A group of the service: its id is its group id",
		"attributes", []wire.Object{
			attribute("displayName", "string", "The group's name, compared exactly; its id when it was not given one", true, true, "readWrite", "none"),
			attribute("members", "complex", "The group's direct members, users", false, false, "readWrite", "none",
				attribute("value", "string", "A member's uid", false, false, "immutable", "none"),
				attribute("display", "string", "A member's nickname", false, false, "readOnly", "none")),
		},
		"meta", wire.Obj("resourceType", "Schema", "location", base+"/Schemas/"+wire.GroupSchema),
	)
}
