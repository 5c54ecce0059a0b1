package httpapi

import (
	"net/http"
	"strconv"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/nestreads"
	"example.com/groupmembership/membership/scope"
)

// Groups in groups. /group-group/{groupID} writes and lists a group's
// subgroups, /group-parents/{groupID} lists the groups it is in, and the
// reads of users take transitive=true for the answers through nesting.
// Each of these reads answers at the revision of the latest change of what
// it read (membership.Nesting), which is its ETag: it moves exactly when
// the answer can have changed. The direct list of subgroups alone takes
// the group's revision, which If-Match checks on a nesting write.

// handleChangeSubgroups serves POST, PUT and DELETE of
// /group-group/{groupID}: as handleChangeMembers, with groups in place of
// users (decode.ParseSubgroups). The reply is the count of subgroups the
// change added or removed, a bare JSON number (OpAddGroups,
// OpRemoveGroups), or {"added":A,"removed":R} (OpReplaceGroups), with
// X-Revision.
func handleChangeSubgroups(svc *membership.Service, op membership.Op, maxBodyBytes int64, bodies *budget.Bytes) http.Handler {
	return handleChangeList(svc, op, "groups", maxBodyBytes, bodies, func(groupID, list string, lease *budget.Lease) (membership.Write, error) {
		groups, err := decodeSubgroups(list, svc.MaxUsers())
		if err == nil {
			err = holdDecodedBytes(lease, decode.SubgroupsBytes(groups))
		}
		return membership.Write{Op: op, GroupID: groupID, Subgroups: groups}, err
	})
}

// decodeSubgroups decodes the groups parameter: the service validates
// them with the rest of the write.
//
// Errors: CodeMissingGroups, CodeInvalidGroups, CodeTooManyGroups.
func decodeSubgroups(groupsJSON string, maxGroups int) ([]membership.Subgroup, error) {
	if groupsJSON == "" {
		return nil, membership.Errorf(membership.CodeMissingGroups, `the groups parameter is missing or empty: send groups=["group id", ...]`)
	}
	return decode.ParseSubgroups(groupsJSON, maxGroups)
}

// transitiveQuery returns the transitive parameter of q: true for
// "true", false when absent or "false".
//
// Errors: CodeInvalidQuery.
func transitiveQuery(q decode.Query) (bool, error) {
	switch v, ok := q["transitive"]; {
	case !ok || v == "false":
		return false, nil
	case v == "true":
		return true, nil
	default:
		return false, membership.Errorf(membership.CodeInvalidQuery, "transitive %.40q is not true or false", v)
	}
}

// transitiveLink is what a Link to a next page adds to keep a transitive
// list transitive.
const transitiveLink = "&transitive=true"

// handleNested serves GET and HEAD of /group-group/{groupID} (the group's
// subgroups) and, with parents, of /group-parents/{groupID} (the groups it
// is in): a JSON array of {"group":…} objects in byte order of ids, each
// direct one with "expires" when its nesting ends, all of them or a page
// (?limit=N&after=GROUPID), with X-Total-Count, Link to the next page, and
// an ETag that answers If-None-Match with 304. With ?transitive=true, every
// group below (or above) it, each once, without expiries.
func handleNested(svc *membership.Service, nest *nestreads.Service, parents bool, replies *budget.Bytes) http.Handler {
	path, list := "/group-group/", nest.Subgroups
	if parents {
		path, list = "/group-parents/", nest.Parents
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		groupID := r.PathValue("groupID")
		opts, err := nestingListOptions(r)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		if err := membership.ValidateGroupID(groupID); err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		// The group's revision is read before the list, so that the ETag
		// is never newer than what it tags; the others are the list's own.
		groupRevision := !parents && !opts.Transitive
		epoch := svc.Epoch()
		// A principal that may not read every group is answered 304 only
		// once the list is read, and so checked: the revision checked no
		// group of it, and a list cached before a reload narrowed the
		// principal's scope must not be kept.
		checkFirst := !scope.Of(r.Context()).AllowsAll(scope.Read)
		var revision membership.Revision
		if groupRevision {
			if revision, err = svc.Revision(r.Context(), groupID); err != nil {
				middleware.WriteError(w, r, err)
				return
			}
			if !checkFirst && encode.AnswerNotModified(w, r, epoch, revision) {
				return
			}
		}
		ask := opts
		if opts.Limit > 0 {
			ask.Limit = opts.Limit + 1 // one more, to know whether a next page exists
		}
		var p pageReply[string]
		defer p.lease.Release()
		answered, err := list(r.Context(), groupID, ask, encodePage(&p, replies, opts.Limit,
			func(g membership.Nested) string { return g.GroupID }, encode.NestedJSONLen, encode.AppendNested))
		if err == nil {
			err = p.busy
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		if !groupRevision {
			revision = answered
		}
		if (checkFirst || !groupRevision) && encode.AnswerNotModified(w, r, epoch, revision) {
			return
		}
		p.write(w, encode.ETag(epoch, revision), func(last string) string {
			return nextLink(path+escapeGroupID(groupID), opts.Limit, last) + transitiveParam(opts.Transitive)
		})
	})
}

// nestingListOptions reads limit, after (a group id, which the service
// checks) and transitive from a list of groups' query.
//
// Errors: CodeInvalidQuery.
func nestingListOptions(r *http.Request) (membership.NestingListOptions, error) {
	q, limit, transitive, err := pageQuery(r)
	if err != nil {
		return membership.NestingListOptions{}, err
	}
	return membership.NestingListOptions{After: q["after"], Limit: limit, Transitive: transitive}, nil
}

// listTransitiveMembers answers GET /group-user/{groupID}?transitive=true:
// as a page of the direct list, of every user of the group or of a group
// below it, each once, with the revision the list answers at as the ETag.
// A request whose If-None-Match holds the group's transitive revision (the
// revision the list would answer at) is answered 304 before the list is
// read. The whole list is not shared as the direct one is: it is encoded
// for each reply, within the replies budget.
func listTransitiveMembers(w http.ResponseWriter, r *http.Request, epoch uint64, nest *nestreads.Service, replies *budget.Bytes, opts membership.ListOptions) {
	groupID := r.PathValue("groupID")
	revision, err := nest.TransitiveRevision(r.Context(), groupID)
	if err != nil {
		middleware.WriteError(w, r, err)
		return
	}
	if encode.AnswerNotModified(w, r, epoch, revision) {
		return
	}
	ask := opts
	if opts.Limit > 0 {
		ask.Limit = opts.Limit + 1
	}
	var p pageReply[membership.UID]
	defer p.lease.Release()
	revision, err = nest.ListTransitiveMembers(r.Context(), groupID, ask, encodeMembersPage(&p, replies, opts.Limit))
	if err == nil {
		err = p.busy
	}
	if err != nil {
		middleware.WriteError(w, r, err)
		return
	}
	if encode.AnswerNotModified(w, r, epoch, revision) {
		return
	}
	p.write(w, encode.ETag(epoch, revision), func(last membership.UID) string {
		return nextLink("/group-user/"+escapeGroupID(groupID), opts.Limit, strconv.FormatInt(int64(last), 10)) + transitiveLink
	})
}

// transitiveMember answers GET /group-user/{groupID}/{uid}?transitive=true:
// the member's record with "via", a shortest path of groups from the group
// down to one that holds the user directly, or 404 not_member. Both carry
// the ETag of the revision they answer at (that of the latest change of
// the nestings below the group, and of the user's groups, ends and
// nickname); the record's answers If-None-Match with 304. The 404 is
// answered whole whatever If-None-Match says, as RFC 9110 has it for an
// answer other than 2xx: a client waiting for the user to become a member
// compares its ETag.
func transitiveMember(w http.ResponseWriter, r *http.Request, epoch uint64, nest *nestreads.Service, uid membership.UID) {
	groupID := r.PathValue("groupID")
	m, via, revision, err := nest.TransitiveMember(r.Context(), groupID, uid)
	if err != nil {
		if membership.ErrorCode(err) == membership.CodeNotMember {
			w.Header()["Etag"] = encode.ETag(epoch, revision)
		}
		middleware.WriteError(w, r, err)
		return
	}
	if encode.AnswerNotModified(w, r, epoch, revision) {
		return
	}
	w.Header()["Etag"] = encode.ETag(epoch, revision)
	b := encode.AppendMemberJSON(nil, m)
	b = append(b[:len(b)-1], encode.ViaPrefix...) // over the }
	for i, id := range via {
		if i > 0 {
			b = append(b, ',')
		}
		b = encode.AppendJSONString(b, id)
	}
	middleware.WriteJSON(w, http.StatusOK, append(b, "]}"...))
}
