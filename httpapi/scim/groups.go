package scim

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/lists"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/directory"

	"example.com/groupmembership/httpapi/scim/wire"
)

// MaxListedMembers bounds the members one reply lists, over all its
// groups: a group past it is read with excludedAttributes=members, and its
// members paged from /group-user/{groupID}.
const MaxListedMembers = membership.MaxPageSize

// escapeID escapes a group id for a path segment ("." and ".." too, which
// a client would resolve away).
func escapeID(id string) string {
	if id == "." || id == ".." {
		return strings.Repeat("%2E", len(id))
	}
	return url.PathEscape(id)
}

// groupObject returns g as a SCIM Group, with members when they were read
// (not nil): each a uid, and its nickname as display when it has one.
func groupObject(r *http.Request, svc services, g directory.GroupRecord, members []membership.Member) wire.Object {
	o := wire.Obj("schemas", []string{wire.GroupSchema}, "id", g.ID)
	if g.Attributes.ExternalID != "" {
		o = o.With("externalId", g.Attributes.ExternalID)
	}
	o = o.With("displayName", g.Attributes.DisplayName)
	if members != nil {
		list := make([]wire.Object, len(members))
		for i, m := range members {
			list[i] = wire.Obj("value", strconv.FormatInt(int64(m.UID), 10))
			if m.Nickname != "" {
				list[i] = list[i].With("display", m.Nickname)
			}
		}
		o = o.With("members", list)
	}
	return o.With("meta", meta(wire.GroupResource, baseURL(r)+"/Groups/"+escapeID(g.ID), version(svc, g.Revision), g.Created, g.Modified))
}

// groupID returns the group id of a Group path; one that is not a valid
// group id names no group: 404.
func groupID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if membership.ValidateGroupID(id) != nil {
		return "", wire.Errorf(http.StatusNotFound, "", "no Group has the id %.60q", id)
	}
	return id, nil
}

// readGroup returns the group's record and, withMembers, its direct
// members, of one revision; more than most members are tooMany.
func readGroup(ctx context.Context, svc services, id string, withMembers bool, most int) (directory.GroupRecord, []membership.Member, error) {
	if !withMembers {
		g, err := svc.dir.Group(ctx, id, nil)
		return g, nil, err
	}
	members := []membership.Member{}
	over := 0
	g, err := svc.dir.Group(ctx, id, func(total int, page iter.Seq[membership.Member]) {
		if total > most {
			over = total
			return
		}
		members = slices.AppendSeq(members, page)
	})
	if err == nil && over > 0 {
		err = wire.BadRequest(wire.TooMany, "group %q has %d members, more than the %d a reply lists: read it with excludedAttributes=members, "+
			"and its members from GET /group-user/{groupID}, which pages them", id, over, most)
	}
	return g, members, err
}

// repliesLease takes the memory of a reply listing members from the
// replies budget, about what their JSON takes.
func repliesLease(d Deps, members []membership.Member) (func(), error) {
	size := int64(1024)
	for _, m := range members {
		size += 64 + 2*int64(len(m.Nickname))
	}
	lease, ok := d.Replies.Take(size)
	if !ok {
		return nil, lists.ErrRepliesBusy()
	}
	return lease.Release, nil
}

// handleGetGroup answers GET /Groups/{id}.
func handleGetGroup(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := wire.ParseResource(r, wire.GroupResource)
		var id string
		if err == nil {
			id, err = groupID(r)
		}
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		writeGroup(w, r, d, http.StatusOK, id, sel)
	})
}

// writeGroup reads the group id and answers it, with its ETag.
func writeGroup(w http.ResponseWriter, r *http.Request, d Deps, status int, id string, sel wire.Selection) {
	g, members, err := readGroup(r.Context(), d.services(), id, sel.Wants("members"), MaxListedMembers)
	var release func()
	if err == nil {
		release, err = repliesLease(d, members)
	}
	if err != nil {
		wire.WriteError(w, r, err)
		return
	}
	defer release()
	o := groupObject(r, d.services(), g, members)
	w.Header()["Etag"] = encode.ETag(d.Service.Epoch(), g.Revision)
	if status == http.StatusCreated {
		w.Header().Set("Location", baseURL(r)+"/Groups/"+escapeID(g.ID))
	}
	wire.WriteJSON(w, status, sel.Apply(o))
}

// handleListGroups answers GET /Groups, filtered and paged.
func handleListGroups(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := wire.ParseList(r, wire.GroupResource)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		total, groups, err := listGroups(r.Context(), d.services(), q)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		resources, release, err := groupResources(r, d, groups, q.Sel)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		defer release()
		writeList(w, q, total, resources)
	})
}

// groupResources returns the page of groups as resources, each with its
// members when sel wants them: MaxListedMembers at most in all.
func groupResources(r *http.Request, d Deps, groups []directory.GroupRecord, sel wire.Selection) ([]wire.Object, func(), error) {
	withMembers := sel.Wants("members")
	var all []membership.Member
	resources := make([]wire.Object, len(groups))
	for i, g := range groups {
		var members []membership.Member
		if withMembers {
			var err error
			if g, members, err = readGroup(r.Context(), d.services(), g.ID, true, MaxListedMembers-len(all)); err != nil {
				if membership.ErrorCode(err) == membership.CodeUnknownGroup {
					continue // deleted since it was listed
				}
				return nil, nil, err
			}
			all = append(all, members...)
		}
		resources[i] = sel.Apply(groupObject(r, d.services(), g, members))
	}
	release, err := repliesLease(d, all)
	return slices.DeleteFunc(resources, func(o wire.Object) bool { return o == nil }), release, err
}

// listGroups returns how many groups q's filter selects and the page q
// asks for, as listUsers does for users: id reads one group; displayName
// and externalId, the store's index; members, the user's groups.
func listGroups(ctx context.Context, svc services, q wire.List) (int, []directory.GroupRecord, error) {
	offset := q.StartIndex - 1
	if len(q.Filter) == 0 || len(q.Filter) == 1 && q.Filter[0].Attr != "id" && q.Filter[0].Attr != "members" {
		query := directory.GroupQuery{Offset: offset, Limit: max(q.Count, 1)}
		query.DisplayName, _ = q.Filter.Value("displayname")
		query.ExternalID, _ = q.Filter.Value("externalid")
		total, groups, err := readGroups(ctx, svc, query)
		return total, groups[:min(len(groups), q.Count)], err
	}
	candidates, err := groupCandidates(ctx, svc, q.Filter)
	if err != nil {
		return 0, nil, err
	}
	var found []directory.GroupRecord
	for _, g := range candidates {
		ok, err := groupMatches(ctx, svc, g, q.Filter)
		if err != nil {
			return 0, nil, err
		}
		if ok {
			found = append(found, g)
		}
	}
	return pageOf(found, offset, q.Count)
}

// groupCandidates returns the groups of f's most selective comparison:
// the group of its id, those of its displayName or externalId, or the
// groups of its member; at most MaxResults, or tooMany.
func groupCandidates(ctx context.Context, svc services, f wire.Filter) ([]directory.GroupRecord, error) {
	if id, ok := f.Value("id"); ok {
		g, err := svc.dir.Group(ctx, id, nil)
		if code := membership.ErrorCode(err); code == membership.CodeUnknownGroup || code == membership.CodeInvalidGroupID {
			return nil, nil
		}
		return []directory.GroupRecord{g}, err
	}
	query := directory.GroupQuery{Limit: wire.MaxResults + 1}
	query.DisplayName, _ = f.Value("displayname")
	if query.DisplayName == "" {
		query.ExternalID, _ = f.Value("externalid")
	}
	var total int
	var groups []directory.GroupRecord
	var err error
	if query.DisplayName != "" || query.ExternalID != "" {
		total, groups, err = readGroups(ctx, svc, query)
	} else {
		total, groups, err = groupsOfMember(ctx, svc, f)
	}
	if err == nil && total > wire.MaxResults {
		err = wire.BadRequest(wire.TooMany, "the filter's first comparison selects %d groups, more than %d: narrow it", total, wire.MaxResults)
	}
	return groups, err
}

// groupsOfMember returns the groups whose direct member f's members
// comparison names.
func groupsOfMember(ctx context.Context, svc services, f wire.Filter) (int, []directory.GroupRecord, error) {
	value, _ := f.Value("members")
	uid, ok := decode.ParseUID(value)
	if !ok {
		return 0, nil, nil // no group has that member
	}
	var total int
	var ids []string
	_, err := svc.UserGroups(ctx, uid, membership.GroupListOptions{Limit: wire.MaxResults + 1}, func(n int, page iter.Seq[string]) {
		total, ids = n, slices.Collect(page)
	})
	var groups []directory.GroupRecord
	for _, id := range ids {
		g, err := svc.dir.Group(ctx, id, nil)
		if err == nil {
			groups = append(groups, g)
		} else if membership.ErrorCode(err) != membership.CodeUnknownGroup {
			return 0, nil, err
		}
	}
	return total, groups, err
}

// readGroups reads the groups query selects.
func readGroups(ctx context.Context, svc services, query directory.GroupQuery) (int, []directory.GroupRecord, error) {
	var total int
	var groups []directory.GroupRecord
	err := svc.dir.GroupRecords(ctx, query, func(n int, page iter.Seq[directory.GroupRecord]) {
		total, groups = n, slices.Collect(page)
	})
	return total, groups, err
}

// groupMatches reports whether every comparison of f holds for g: a
// members comparison asks the store whether the uid is a direct member.
func groupMatches(ctx context.Context, svc services, g directory.GroupRecord, f wire.Filter) (bool, error) {
	for _, c := range f {
		ok := true
		switch c.Attr {
		case "id":
			ok = g.ID == c.Value
		case "displayname":
			ok = g.Attributes.DisplayName == c.Value
		case "externalid":
			ok = g.Attributes.ExternalID == c.Value
		case "members":
			var uid membership.UID
			if uid, ok = decode.ParseUID(c.Value); ok {
				_, err := svc.Member(ctx, g.ID, uid)
				if ok = membership.ErrorCode(err) != membership.CodeNotMember; ok && err != nil {
					return false, err
				}
			}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
