package httpapi

import (
	"net/http"
	"net/url"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/scope"
)

// defaultGroupsLimit is the page of GET /groups without limit. Unlike a
// group's members, the groups are not sent all at once by default: the
// store holds every group still while it lists them, and there may be
// millions. The Link of each page leads to the next.
const defaultGroupsLimit = 1000

// groupsQuery is the query of GET /groups.
type groupsQuery struct {
	limit         int // 1 to MaxPageSize
	after, prefix string
}

// parseGroupsQuery reads limit, after and prefix (each a group id or the
// start of one, which svc.Groups checks).
//
// Errors: CodeInvalidQuery.
func parseGroupsQuery(r *http.Request) (groupsQuery, error) {
	q, err := decode.ParseQuery(r, "limit", "after", "prefix")
	if err != nil {
		return groupsQuery{}, err
	}
	limit, err := q.Limit()
	if err != nil {
		return groupsQuery{}, err
	}
	if limit == 0 {
		limit = defaultGroupsLimit
	}
	return groupsQuery{limit: limit, after: q["after"], prefix: q["prefix"]}, nil
}

// handleGroups serves GET and HEAD of /groups: the groups that have
// members, in byte order of their ids, as a JSON array of
// {"group":…,"members":…} objects: a page of limit groups (1 to 10000,
// defaultGroupsLimit without it) after the group id after, of those whose
// ids start with prefix, among those the request's scope may read.
// X-Total-Count is how many groups the prefix selects, and Link leads to
// the next page when more follow, as for member lists. The state listed
// is the store's at the revision in X-Revision, whose ETag (any change of
// the store moves it, and a scope's groups are in it: encode.ScopedETag)
// answers an If-None-Match with 304. The reply's memory is taken from
// replies.
func handleGroups(svc *membership.Service, replies *budget.Bytes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseGroupsQuery(r)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		// One more than the page, to know whether a next page exists.
		ask := membership.GroupsOptions{Prefix: q.prefix, After: q.after, Limit: q.limit + 1}
		var p pageReply[string]
		defer p.lease.Release()
		revision, err := svc.Groups(r.Context(), ask, encodePage(&p, replies, q.limit,
			func(g membership.GroupSize) string { return g.ID }, encode.GroupsJSONLen, encode.AppendGroups))
		if err == nil {
			err = p.busy
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		epoch, tag := svc.Epoch(), scope.Of(r.Context()).ReadTag()
		writeRevision(w, revision)
		if encode.AnswerNotModifiedScoped(w, r, epoch, revision, tag) {
			return
		}
		p.write(w, encode.ScopedETag(epoch, revision, tag), func(last string) string {
			next := nextLink("/groups", q.limit, last)
			if q.prefix != "" {
				next += "&prefix=" + url.QueryEscape(q.prefix)
			}
			return next
		})
	})
}
