package httpapi

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"unsafe"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/httpapi/encode"
	"example.com/groupmembership/httpapi/lists"
	"example.com/groupmembership/httpapi/middleware"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/nestreads"
)

// handleChangeMembers serves POST, PUT and DELETE of /group-user/{groupID}:
// it decodes the users of the body (decode.ParseUsers) and has svc apply op
// to the group with them, as handleChangeList says.
func handleChangeMembers(svc *membership.Service, op membership.Op, maxBodyBytes int64, bodies *budget.Bytes) http.Handler {
	return handleChangeList(svc, op, "users", maxBodyBytes, bodies, func(groupID, list string, lease *budget.Lease) (membership.Write, error) {
		users, err := decodeUsers(list, svc.MaxUsers())
		if err == nil {
			err = holdDecoded(lease, users)
		}
		return decode.UsersWrite(op, groupID, users), err
	})
}

// handleChangeList serves a write of a list of the group's, its users or
// its subgroups, whose body carries the list as param: it reads the
// request's If-Match and If-None-Match (decode.WriteCondition) and
// Idempotency-Key, reads the body, has writeOf decode the list into the
// write (holding what it decoded against the request's lease), and has svc
// apply it. The reply carries the revision that reflects the change in
// X-Revision; its body is the count the change returns as a bare JSON
// number, or {"added":A,"removed":R} for a replace.
func handleChangeList(svc *membership.Service, op membership.Op, param string, maxBodyBytes int64, bodies *budget.Bytes,
	writeOf func(groupID, list string, lease *budget.Lease) (membership.Write, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cond, err := decode.WriteCondition(r, svc.Epoch())
		var key string
		if err == nil {
			key, err = decode.IdempotencyKey(r)
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		req, err := decode.ReadChangeRequest(w, r, param, maxBodyBytes, bodies)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		defer req.Lease.Release()
		change, err := writeOf(r.PathValue("groupID"), req.List, &req.Lease)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		change.If, change.Actor, change.Idem.Key = cond, req.ActingUID, key
		change.Principal = middleware.PrincipalName(r.Context())
		if key != "" {
			change.Conditions = decode.ConditionsText(r)
		}
		res, err := svc.Write(r.Context(), change)
		if err != nil {
			writeChangeError(w, r, svc, err)
			return
		}
		writeWritten(w, res.Revision, res.Replayed)
		if op == membership.OpReplace || op == membership.OpReplaceGroups {
			middleware.WriteJSON(w, http.StatusOK, encode.AppendReplaced(nil, res))
			return
		}
		middleware.WriteJSON(w, http.StatusOK, middleware.CountBody(w, res.Count))
	})
}

// writeRevision sets the X-Revision of a write's reply.
func writeRevision(w http.ResponseWriter, rev membership.Revision) {
	w.Header()["X-Revision"] = middleware.UintField(w, uint64(rev))
}

// handleDeleteGroup serves DELETE /groups/{groupID}: it removes every
// member of the group in one change, with the request's If-Match and
// If-None-Match as for the writes of /group-user. It takes no body: a
// DELETE that names users was meant for /group-user, and must not wipe the
// group; the acting uid, which the writes of /group-user take in their
// body, comes in the query, ?uid= (actorQuery). The reply is the number of
// members removed, a bare JSON number, with X-Revision.
func handleDeleteGroup(svc *membership.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		groupID := r.PathValue("groupID")
		actor, err := actorQuery(w, r)
		var cond membership.Precondition
		if err == nil {
			cond, err = decode.WriteCondition(r, svc.Epoch())
		}
		var key string
		if err == nil {
			key, err = decode.IdempotencyKey(r)
		}
		if err == nil {
			err = decode.RefuseBody(r, "DELETE /groups/{groupID} removes every member and takes no body: "+
				"to remove some users, DELETE /group-user/{groupID} with users")
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		write := membership.Write{Op: membership.OpDeleteGroup, GroupID: groupID, If: cond, Actor: actor,
			Principal: middleware.PrincipalName(r.Context()), Idem: membership.Idempotency{Key: key}}
		if key != "" {
			write.Conditions = decode.ConditionsText(r)
		}
		res, err := svc.Write(r.Context(), write)
		if err != nil {
			writeChangeError(w, r, svc, err)
			return
		}
		writeWritten(w, res.Revision, res.Replayed)
		middleware.WriteJSON(w, http.StatusOK, middleware.CountBody(w, res.Count))
	})
}

// handleRemoveUser serves DELETE /user-group/{uid}: it removes the user
// from every group in one change, and forgets their nickname. It takes no
// body, and no If-Match or If-None-Match (decode.RefuseConditions); the acting
// uid comes in the query, ?uid= (actorQuery). The reply is the number of
// groups the user left, a bare JSON number, with X-Revision.
func handleRemoveUser(svc *membership.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, err := pathUID(r)
		var actor membership.UID
		if err == nil {
			actor, err = actorQuery(w, r)
		}
		if err == nil {
			err = decode.RefuseConditions(r, "removing a user from every group has no one group whose ETag it could compare")
		}
		var key string
		if err == nil {
			key, err = decode.IdempotencyKey(r)
		}
		if err == nil {
			err = decode.RefuseBody(r, "DELETE /user-group/{uid} removes the user from every group and takes no body")
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		res, err := svc.Write(r.Context(), membership.Write{Op: membership.OpRemoveUser, UIDs: []membership.UID{uid}, Actor: actor,
			Principal: middleware.PrincipalName(r.Context()), Idem: membership.Idempotency{Key: key}})
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		writeWritten(w, res.Revision, res.Replayed)
		middleware.WriteJSON(w, http.StatusOK, middleware.CountBody(w, res.Count))
	})
}

// actorQuery returns the acting uid of a write that takes no body, from
// its query, ?uid=, 0 when absent: the uid the writes with a body take in
// it. The change carries it as its actor; it plays no part in the result.
//
// Errors: CodeInvalidQuery (another parameter), CodeInvalidUID.
func actorQuery(w http.ResponseWriter, r *http.Request) (membership.UID, error) {
	q, err := decode.ParseQuery(r, "uid")
	if err != nil {
		return 0, err
	}
	v, ok := q["uid"]
	if !ok {
		return 0, nil
	}
	uid, ok := decode.ParseUID(v)
	if !ok {
		return 0, membership.Errorf(membership.CodeInvalidUID, "the uid parameter %.40q is not %s", v, membership.UIDRange)
	}
	middleware.SetActingUID(w, uid)
	return uid, nil
}

// holdDecoded makes the body's lease hold the memory of the decoded users
// too, for as long as the change is applied. Both are taken at once, so
// that a change alone is served whatever its size, as a body alone is.
//
// Errors: CodeUnavailable.
func holdDecoded(lease *budget.Lease, users []membership.User) error {
	return holdDecodedBytes(lease, int64(cap(users))*int64(unsafe.Sizeof(membership.User{})))
}

// holdDecodedBytes is holdDecoded for n bytes of whatever was decoded.
func holdDecodedBytes(lease *budget.Lease, n int64) error {
	if !lease.Resize(lease.Held() + n) {
		return decode.BodiesBusy()
	}
	return nil
}

// decodeUsers decodes the users parameter: the service validates them with
// the rest of the write.
//
// Errors: CodeMissingUsers, CodeInvalidUsers, CodeTooManyUsers.
func decodeUsers(usersJSON string, maxUsers int) ([]membership.User, error) {
	if usersJSON == "" {
		return nil, membership.Errorf(membership.CodeMissingUsers, "the users parameter is missing or empty: send users=[uid, ...]")
	}
	return decode.ParseUsers(usersJSON, maxUsers)
}

// handleListMembers serves GET and HEAD: the group's members as a JSON array
// of {"uid":…,"nickname":…} objects in ascending uid order, all of them or a
// page (?limit=N&after=UID), with the group's size in X-Total-Count and, when
// more members follow a page, a Link to the next. The group's revision is the
// ETag, and a request whose If-None-Match holds it is answered 304 Not
// Modified. The whole list, and every suffix of it (after without limit),
// is sent from one encoding per revision that all its readers share. With
// ?transitive=true, the users of the group's subgroups at any depth too
// (listTransitiveMembers).
func handleListMembers(svc *membership.Service, nest *nestreads.Service, l *lists.EncodedLists) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		groupID := r.PathValue("groupID")
		opts, transitive, err := listOptions(r)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		if transitive {
			listTransitiveMembers(w, r, svc.Epoch(), nest, l.Replies, opts)
			return
		}
		shared := opts.Limit == 0
		conditional := len(r.Header["If-None-Match"]) > 0
		if shared || conditional {
			revision, err := svc.Revision(r.Context(), groupID)
			if err != nil {
				middleware.WriteError(w, r, err)
				return
			}
			if conditional && encode.NoneMatch(r, svc.Epoch(), revision) {
				encode.WriteNotModified(w, svc.Epoch(), revision)
				return
			}
			if shared {
				writeWholeList(w, r, svc, l, groupID, revision, opts.After)
				return
			}
		}
		// A page: ask for one more than the page, to know whether a next
		// page exists.
		ask := opts
		ask.Limit = opts.Limit + 1
		var p pageReply[membership.UID]
		defer p.lease.Release()
		revision, err := svc.ListMembers(r.Context(), groupID, ask, encodeMembersPage(&p, l.Replies, opts.Limit))
		if err == nil {
			err = p.busy
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		p.write(w, encode.ETag(svc.Epoch(), revision), func(last membership.UID) string {
			return nextLink("/group-user/"+escapeGroupID(groupID), opts.Limit, strconv.FormatInt(int64(last), 10))
		})
	})
}

// encodeMembersPage is encodePage for a list of members, keyed by uid.
func encodeMembersPage(p *pageReply[membership.UID], replies *budget.Bytes, limit int) membership.ListFunc {
	return encodePage(p, replies, limit,
		func(m membership.Member) membership.UID { return m.UID },
		func(page iter.Seq[membership.Member]) int { size, _ := encode.MembersJSONLen(page); return size },
		func(b []byte, page iter.Seq[membership.Member]) []byte { return encode.AppendMembers(b, page, nil) })
}

// userGroupsFunc is a read of a user's groups: membership.Service's
// UserGroups, or nestreads.Service's TransitiveUserGroups.
type userGroupsFunc func(context.Context, membership.UID, membership.GroupListOptions, membership.GroupListFunc) (membership.Revision, error)

// takeSortingWork takes from replies the memory that sorting all of a
// user's groups (after after) takes, which grows with them, and returns its
// lease. A page of one tells how many there are, at no such cost.
//
// Errors: the store's, and CodeUnavailable when replies is spent.
func takeSortingWork(ctx context.Context, userGroups userGroupsFunc, uid membership.UID, opts membership.GroupListOptions, replies *budget.Bytes) (budget.Lease, error) {
	var n int
	opts.Limit = 1
	if _, err := userGroups(ctx, uid, opts, func(total int, _ iter.Seq[string]) {
		n = total
	}); err != nil {
		return budget.Lease{}, err
	}
	work, ok := replies.Take(int64(n) * int64(unsafe.Sizeof("")))
	if !ok {
		return work, lists.ErrRepliesBusy()
	}
	return work, nil
}

// writeWholeList answers the group's whole list at revision, or its suffix
// after the uid after (0: none), from the one encoding all its readers
// share.
func writeWholeList(w http.ResponseWriter, r *http.Request, svc *membership.Service, l *lists.EncodedLists, groupID string, revision membership.Revision, after membership.UID) {
	e, err := l.Whole(r.Context(), svc, groupID, revision)
	if err != nil {
		middleware.WriteError(w, r, err)
		return
	}
	defer l.Release(e)
	w.Header()["X-Total-Count"] = e.TotalField
	w.Header()["Etag"] = e.ETag
	if after == 0 {
		middleware.WriteJSONOfLength(w, http.StatusOK, e.LengthField, nil, e.Body)
		return
	}
	head, rest := e.Suffix(after)
	middleware.WriteJSONParts(w, http.StatusOK, head, rest)
}

// pageOf yields the first limit items of items (all of them when limit is
// 0), which the store was asked for one more of than the page: it sets *more
// when items has another, and *last to the key of the last item yielded, for
// the Link to the next page.
func pageOf[T, K any](items iter.Seq[T], limit int, key func(T) K, more *bool, last *K) iter.Seq[T] {
	return func(yield func(T) bool) {
		n := 0
		for item := range items {
			if limit > 0 && n == limit {
				*more = true
				return
			}
			n++
			*last = key(item)
			if !yield(item) {
				return
			}
		}
	}
}

// pageReply is a page of a list as a reply: its body, whose memory lease
// holds from the replies budget until it is written, the list's total,
// and whether another page follows the page's last item.
type pageReply[K any] struct {
	body  []byte
	lease budget.Lease
	total int
	more  bool
	last  K
	busy  error // the budget's refusal of the body
}

// encodePage returns the function a list read calls with its total and
// its items: it takes the page of limit items (all of them for 0) and
// encodes it into p's body within replies, measured by size and written
// by appendTo.
func encodePage[T, K any](p *pageReply[K], replies *budget.Bytes, limit int, key func(T) K,
	size func(iter.Seq[T]) int, appendTo func([]byte, iter.Seq[T]) []byte) func(int, iter.Seq[T]) {
	return func(total int, items iter.Seq[T]) {
		p.total = total
		page := pageOf(items, limit, key, &p.more, &p.last)
		p.body, p.lease, p.busy = lists.EncodeBounded(replies, size(page), func(b []byte) []byte { return appendTo(b, page) })
	}
}

// write writes p with X-Total-Count, the ETag etag (none when nil) and,
// when another page follows, a Link to next(the page's last key).
func (p *pageReply[K]) write(w http.ResponseWriter, etag []string, next func(last K) string) {
	w.Header()["X-Total-Count"] = []string{strconv.Itoa(p.total)}
	if etag != nil {
		w.Header()["Etag"] = etag
	}
	if p.more {
		setLink(w, next(p.last))
	}
	middleware.WriteJSON(w, http.StatusOK, p.body)
}

// nextLink returns the URL of the next page of the list at path: limit
// items after after (escaped here).
func nextLink(path string, limit int, after string) string {
	return path + "?limit=" + strconv.Itoa(limit) + "&after=" + url.QueryEscape(after)
}

// setLink sets the Link header to the next page, at url.
func setLink(w http.ResponseWriter, target string) {
	w.Header()["Link"] = []string{"<" + target + `>; rel="next"`}
}

// listOptions reads limit, after (a uid) and transitive from a member
// list's query.
//
// Errors: CodeInvalidQuery.
func listOptions(r *http.Request) (opts membership.ListOptions, transitive bool, err error) {
	q, limit, transitive, err := pageQuery(r)
	if err != nil {
		return membership.ListOptions{}, false, err
	}
	after, ok := q["after"]
	if !ok {
		return membership.ListOptions{Limit: limit}, transitive, nil
	}
	uid, ok := decode.ParseUID(after)
	if !ok {
		return membership.ListOptions{}, false, membership.Errorf(membership.CodeInvalidQuery,
			"after %.40q is not a uid (%s)", after, membership.UIDRange)
	}
	return membership.ListOptions{After: uid, Limit: limit}, transitive, nil
}

// pageQuery reads the query of a list that takes limit, after and
// transitive: the limit (0 when absent), and transitive; after is left in
// q, for the list to read.
//
// Errors: CodeInvalidQuery.
func pageQuery(r *http.Request) (q decode.Query, limit int, transitive bool, err error) {
	q, err = decode.ParseQuery(r, "limit", "after", "transitive")
	if err == nil {
		limit, err = q.Limit()
	}
	if err == nil {
		transitive, err = transitiveQuery(q)
	}
	return q, limit, transitive, err
}

// pathUID returns the {uid} of the request's path.
//
// Errors: CodeInvalidUID.
func pathUID(r *http.Request) (membership.UID, error) {
	uid, ok := decode.ParseUID(r.PathValue("uid"))
	if !ok {
		return 0, membership.Errorf(membership.CodeInvalidUID,
			"%.40q is not a uid (%s)", r.PathValue("uid"), membership.UIDRange)
	}
	return uid, nil
}

// handleUserGroups serves GET and HEAD of /user-group/{uid}: the ids of the
// groups the user is in, as a JSON array of strings in byte order, all of
// them or a page (?limit=N&after=GROUPID), with X-Total-Count and Link as for
// member lists. With ?transitive=true, the groups above those too, each
// once, with the revision the list answers at as the ETag (that of the
// latest change of the user's groups and of the groups above them), which
// answers If-None-Match with 304.
func handleUserGroups(svc *membership.Service, nest *nestreads.Service, replies *budget.Bytes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, limit, ask, transitive, err := userGroupsQuery(r)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		userGroups := userGroupsFunc(svc.UserGroups)
		if transitive {
			userGroups = nest.TransitiveUserGroups
		}
		var work budget.Lease // taken from replies for the sorting
		defer work.Release()
		if limit > 0 {
			ask.Limit = limit + 1 // one more, to know whether a next page exists
		} else if work, err = takeSortingWork(r.Context(), userGroups, uid, ask, replies); err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		var p pageReply[string]
		defer p.lease.Release()
		revision, err := userGroups(r.Context(), uid, ask, func(n int, ids iter.Seq[string]) {
			p.total = n
			page := slices.Collect(pageOf(ids, limit, func(id string) string { return id }, &p.more, &p.last))
			// The body takes over from the sorting's memory, so that a list
			// larger than the whole budget is still sent when alone.
			work.Release()
			p.body, p.lease, p.busy = lists.EncodeBounded(replies, encode.StringsJSONLen(page), func(b []byte) []byte { return encode.AppendStrings(b, page) })
		})
		if err == nil {
			err = p.busy
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		var etagField []string
		if transitive {
			if encode.AnswerNotModified(w, r, svc.Epoch(), revision) {
				return
			}
			etagField = encode.ETag(svc.Epoch(), revision)
		}
		p.write(w, etagField, func(last string) string {
			return nextLink("/user-group/"+strconv.FormatInt(int64(uid), 10), limit, last) + transitiveParam(transitive)
		})
	})
}

// userGroupsQuery reads the uid, limit, after and transitive of a
// /user-group/{uid} request.
//
// Errors: CodeInvalidUID, CodeInvalidQuery.
func userGroupsQuery(r *http.Request) (uid membership.UID, limit int, opts membership.GroupListOptions, transitive bool, err error) {
	uid, err = pathUID(r)
	if err != nil {
		return 0, 0, membership.GroupListOptions{}, false, err
	}
	q, limit, transitive, err := pageQuery(r)
	return uid, limit, membership.GroupListOptions{After: q["after"]}, transitive, err
}

// transitiveParam returns what a next page's link adds for a transitive
// list: transitiveLink, or nothing.
func transitiveParam(transitive bool) string {
	if transitive {
		return transitiveLink
	}
	return ""
}

// handleMember serves GET and HEAD of /group-user/{groupID}/{uid}: the
// member's record, or 404 not_member. With ?transitive=true, the record of
// a member through nesting too, with "via" (transitiveMember).
func handleMember(svc *membership.Service, nest *nestreads.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, err := pathUID(r)
		var q decode.Query
		if err == nil {
			q, err = decode.ParseQuery(r, "transitive")
		}
		var transitive bool
		if err == nil {
			transitive, err = transitiveQuery(q)
		}
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		if transitive {
			transitiveMember(w, r, svc.Epoch(), nest, uid)
			return
		}
		m, err := svc.Member(r.Context(), r.PathValue("groupID"), uid)
		if err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		middleware.WriteJSON(w, http.StatusOK, encode.AppendMemberJSON(nil, m))
	})
}

// handleReadyz answers 200 while the service takes traffic, writes
// included; otherwise 503 unavailable, with the reason as the message: it is
// shutting down, or the store cannot take changes (see StoreExtras.Writable).
// A spent budget of request bodies or replies does not make it unready:
// clients cause that, and an instance taken out of a load balancer for it
// would let a few of them take every instance out.
func handleReadyz(d shared) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.loading() {
			middleware.WriteError(w, r, errStarting)
			return
		}
		if !d.opts.Ready() {
			middleware.WriteError(w, r, membership.Errorf(membership.CodeUnavailable, "the service is shutting down"))
			return
		}
		if err := d.store.Writable(); err != nil {
			middleware.WriteError(w, r, err)
			return
		}
		middleware.WriteJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
	})
}

// errStarting answers what needs the data while it loads.
var errStarting = membership.Errorf(middleware.CodeStarting, "the service is starting: its data is loading; try again in a moment (/readyz says when it is ready)")

// handleStarting answers a data route while the data loads.
func handleStarting(writeError middleware.ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, errStarting)
	})
}

func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		middleware.WriteJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	})
}

// handleMethodNotAllowed answers 405 with the Allow header set to allow.
func handleMethodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		middleware.WriteError(w, r, membership.Errorf(middleware.CodeMethodNotAllowed,
			"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.EscapedPath(), allow))
	})
}

func handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		middleware.WriteError(w, r, membership.Errorf(middleware.CodeNotFound, "no route for %s %s; GET /openapi.json describes every route", r.Method, r.URL.EscapedPath()))
	})
}
