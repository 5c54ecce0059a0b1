package scim

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"time"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/directory"

	"example.com/groupmembership/httpapi/scim/wire"
)

// timeLayout is the layout of meta's times: RFC 3339 in UTC, to the
// millisecond, as the service's other routes write times.
const timeLayout = "2006-01-02T15:04:05.000Z"

// baseURL returns the URL the SCIM routes of r's service start with, as r
// reached it: https when r came over TLS.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + Prefix
}

// version returns the entity tag of revision rev: a resource's
// meta.version and its ETag.
func version(svc services, rev membership.Revision) string {
	return encode.ETag(svc.Epoch(), rev)[0]
}

// meta returns a resource's meta. A time that is zero is left out.
func meta(kind, location, version string, created, modified time.Time) wire.Object {
	m := wire.Obj("resourceType", kind)
	if !created.IsZero() {
		m = m.With("created", created.UTC().Format(timeLayout))
	}
	if !modified.IsZero() {
		m = m.With("lastModified", modified.UTC().Format(timeLayout))
	}
	return m.With("location", location, "version", version)
}

// userObject returns u as a SCIM User: its email is the primary work
// address; an attribute that is "" is left out.
func userObject(r *http.Request, svc services, u directory.UserRecord) wire.Object {
	id := strconv.FormatInt(int64(u.UID), 10)
	a := u.Account
	o := wire.Obj("schemas", []string{wire.UserSchema}, "id", id)
	if a.ExternalID != "" {
		o = o.With("externalId", a.ExternalID)
	}
	o = o.With("userName", a.UserName)
	if a.GivenName != "" || a.FamilyName != "" {
		name := wire.Obj()
		if a.GivenName != "" {
			name = name.With("givenName", a.GivenName)
		}
		if a.FamilyName != "" {
			name = name.With("familyName", a.FamilyName)
		}
		o = o.With("name", name)
	}
	if a.DisplayName != "" {
		o = o.With("displayName", a.DisplayName)
	}
	if a.Email != "" {
		o = o.With("emails", []wire.Object{wire.Obj("value", a.Email, "type", "work", "primary", true)})
	}
	o = o.With("active", a.Active)
	return o.With("meta", meta(wire.UserResource, baseURL(r)+"/Users/"+id, version(svc, u.Revision), u.Created, u.Modified))
}

// accountOf reads a User's attributes from doc, a POST's or a PUT's body,
// into an account. Attributes the service does not keep (title, phone
// numbers, the enterprise extension, …) are ignored; id, meta and groups
// are read-only, and ignored too. active, when missing, is true: a user
// is created active, and a PUT that leaves it out keeps it so.
func accountOf(doc map[string]json.RawMessage) (account.Account, error) {
	a := account.Account{Active: true}
	for name, raw := range doc {
		if err := setUserAttribute(&a, wire.AttributePath(name, wire.UserResource), raw); err != nil {
			return a, err
		}
	}
	if a.UserName == "" {
		return a, wire.BadRequest(wire.InvalidValue, "userName is required")
	}
	return a, nil
}

// setUserAttribute sets the attribute path (folded) of a to raw, as an
// add or a replace does; an attribute the service does not keep is
// ignored.
func setUserAttribute(a *account.Account, path string, raw json.RawMessage) error {
	var err error
	switch path {
	case "username":
		a.UserName, err = wire.StringOf(raw, "userName")
	case "externalid":
		a.ExternalID, err = wire.StringOf(raw, "externalId")
	case "displayname":
		a.DisplayName, err = wire.StringOf(raw, "displayName")
	case "name.givenname":
		a.GivenName, err = wire.StringOf(raw, "name.givenName")
	case "name.familyname":
		a.FamilyName, err = wire.StringOf(raw, "name.familyName")
	case "active":
		a.Active, err = wire.BoolOf(raw, "active")
	case "name":
		err = setName(a, raw)
	case "emails":
		a.Email, err = primaryEmail(raw)
	case `emails[type eq "work"].value`, "emails.value":
		a.Email, err = wire.StringOf(raw, "emails value")
	}
	return err
}

// setName sets a's given and family names from the complex attribute
// name: those it names, leaving the other (RFC 7644 3.5.2.1 and 3.5.2.3:
// an add or a replace of a complex attribute leaves the sub-attributes
// it does not name unchanged; a POST or a PUT starts from none). Its
// other sub-attributes are ignored.
func setName(a *account.Account, raw json.RawMessage) error {
	if wire.IsNull(raw) {
		a.GivenName, a.FamilyName = "", ""
		return nil
	}
	name, err := wire.ObjectValue(raw, "name")
	if err != nil {
		return err
	}
	for sub, v := range name {
		if err := setUserAttribute(a, "name."+sub, v); err != nil {
			return err
		}
	}
	return nil
}

// primaryEmail returns the address of emails the service keeps: the
// primary one, else the first of type work, else the first.
func primaryEmail(raw json.RawMessage) (string, error) {
	emails, err := wire.ArrayOf(raw, "emails")
	if err != nil {
		return "", err
	}
	best, rank := "", -1
	for _, e := range emails {
		o, err := wire.ObjectValue(e, "an element of emails")
		if err != nil {
			return "", err
		}
		value, err := wire.StringOf(o["value"], "an email's value")
		if err != nil || value == "" {
			return "", wire.BadRequest(wire.InvalidValue, "an element of emails has no value")
		}
		r := 0
		if t, _ := wire.StringOf(o["type"], "type"); t == "work" {
			r = 1
		}
		if p, ok := o["primary"]; ok {
			if primary, err := wire.BoolOf(p, "primary"); err == nil && primary {
				r = 2
			}
		}
		if r > rank {
			best, rank = value, r
		}
	}
	return best, nil
}

// userID parses the id of a User path: a uid in decimal. Any other is no
// user: 404.
func userID(r *http.Request) (membership.UID, error) {
	uid, ok := decode.ParseUID(r.PathValue("id"))
	if !ok {
		return 0, wire.Errorf(http.StatusNotFound, "", "no User has the id %.40q: a User's id is its uid", r.PathValue("id"))
	}
	return uid, nil
}

// handleGetUser answers GET /Users/{id}.
func handleGetUser(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := wire.ParseResource(r, wire.UserResource)
		var uid membership.UID
		if err == nil {
			uid, err = userID(r)
		}
		var u directory.UserRecord
		if err == nil {
			u, err = d.Directory.User(r.Context(), uid)
		}
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		writeUser(w, r, d.services(), http.StatusOK, u, sel)
	})
}

// writeUser answers u, with its ETag.
func writeUser(w http.ResponseWriter, r *http.Request, svc services, status int, u directory.UserRecord, sel wire.Selection) {
	o := userObject(r, svc, u)
	w.Header()["Etag"] = encode.ETag(svc.Epoch(), u.Revision)
	if status == http.StatusCreated {
		loc, _ := o.Get("meta")
		l, _ := loc.(wire.Object).Get("location")
		w.Header().Set("Location", l.(string))
	}
	wire.WriteJSON(w, status, sel.Apply(o))
}

// handleListUsers answers GET /Users, filtered and paged.
func handleListUsers(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := wire.ParseList(r, wire.UserResource)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		total, users, err := listUsers(r.Context(), d.services(), q)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		resources := make([]wire.Object, len(users))
		for i, u := range users {
			resources[i] = q.Sel.Apply(userObject(r, d.services(), u))
		}
		writeList(w, q, total, resources)
	})
}

// writeList answers a page of resources, of total in all.
func writeList(w http.ResponseWriter, q wire.List, total int, resources []wire.Object) {
	wire.WriteJSON(w, http.StatusOK, wire.Obj(
		"schemas", []string{wire.ListSchema},
		"totalResults", total,
		"startIndex", q.StartIndex,
		"itemsPerPage", len(resources),
		"Resources", resources,
	))
}

// listUsers returns how many accounts q's filter selects and the page q
// asks for. A filter on id reads one account; on userName or externalId,
// the store's index; a filter of several comparisons reads the accounts
// of its first indexed one (at most MaxResults of them, or tooMany) and
// keeps those the others select.
func listUsers(ctx context.Context, svc services, q wire.List) (int, []directory.UserRecord, error) {
	offset := q.StartIndex - 1
	if id, ok := q.Filter.Value("id"); ok {
		var found []directory.UserRecord
		if uid, ok := decode.ParseUID(id); ok {
			if u, err := svc.dir.User(ctx, uid); err == nil {
				found = append(found, u)
			} else if membership.ErrorCode(err) != membership.CodeUnknownUser {
				return 0, nil, err
			}
		}
		return pageOf(keepUsers(found, q.Filter), offset, q.Count)
	}
	query := directory.UserQuery{Offset: offset, Limit: max(q.Count, 1)}
	query.UserName, _ = q.Filter.Value("username")
	if query.UserName == "" {
		query.ExternalID, _ = q.Filter.Value("externalid")
	}
	if len(q.Filter) > 1 {
		query.Offset, query.Limit = 0, wire.MaxResults+1
	}
	total, users, err := readUsers(ctx, svc, query)
	if err != nil || len(q.Filter) <= 1 {
		return total, users[:min(len(users), q.Count)], err
	}
	if total > wire.MaxResults {
		return 0, nil, wire.BadRequest(wire.TooMany, "the filter's first comparison selects %d users, more than %d: narrow it", total, wire.MaxResults)
	}
	return pageOf(keepUsers(users, q.Filter), offset, q.Count)
}

// readUsers reads the accounts query selects.
func readUsers(ctx context.Context, svc services, query directory.UserQuery) (int, []directory.UserRecord, error) {
	var total int
	var users []directory.UserRecord
	err := svc.dir.Users(ctx, query, func(n int, page iter.Seq[directory.UserRecord]) {
		total, users = n, slices.Collect(page)
	})
	return total, users, err
}

// keepUsers returns the users f selects, in the memory of users.
func keepUsers(users []directory.UserRecord, f wire.Filter) []directory.UserRecord {
	return slices.DeleteFunc(users, func(u directory.UserRecord) bool { return !userMatches(u, f) })
}

// userMatches reports whether every comparison of f holds for u: userName
// compared case-insensitively, as RFC 7643 says of it, the others exactly.
func userMatches(u directory.UserRecord, f wire.Filter) bool {
	for _, c := range f {
		var ok bool
		switch c.Attr {
		case "id":
			ok = strconv.FormatInt(int64(u.UID), 10) == c.Value
		case "username":
			ok = account.FoldUserName(u.Account.UserName) == account.FoldUserName(c.Value)
		case "externalid":
			ok = u.Account.ExternalID == c.Value
		}
		if !ok {
			return false
		}
	}
	return true
}

// pageOf returns how many of all there are, and the page from offset of at
// most count.
func pageOf[T any](all []T, offset, count int) (int, []T, error) {
	if offset >= len(all) {
		return len(all), nil, nil
	}
	return len(all), all[offset:min(len(all), offset+count)], nil
}
