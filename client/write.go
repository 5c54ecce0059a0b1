package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// WriteOption configures one write: its conditions, its Idempotency-Key,
// its acting user.
type WriteOption func(*writeOptions)

type writeOptions struct {
	ifMatch     []string
	ifNoneMatch bool
	key         string
	noKey       bool
	actor       int64
}

// IfMatch applies the write only while the group's ETag is one of etags
// (as a list's Page.ETag, or a 412's Error.ETag, gave it): otherwise the
// write fails with 412 precondition_failed (IsPreconditionFailed) and
// nothing is changed. IfMatch("*") applies it while the group has
// members or subgroups. Not for RemoveUserEverywhere, nor Batch (give
// each change its IfMatch).
func IfMatch(etags ...string) WriteOption {
	return func(o *writeOptions) { o.ifMatch = append(o.ifMatch, etags...) }
}

// IfGroupEmpty applies the write only while the group has no members and
// no subgroups (If-None-Match: *): a Replace with it creates the group,
// and fails with 412 when someone else did first.
func IfGroupEmpty() WriteOption {
	return func(o *writeOptions) { o.ifNoneMatch = true }
}

// WithIdempotencyKey sends the write with key as its Idempotency-Key, in
// place of the one the client makes: 1 to 255 printable ASCII characters,
// used for this write only (a retry of it after the process restarted,
// say). The service applies a key once, and answers a repeat with the
// first reply (WriteResult.Replayed).
func WithIdempotencyKey(key string) WriteOption {
	return func(o *writeOptions) { o.key, o.noKey = key, false }
}

// WithoutIdempotencyKey sends the write without an Idempotency-Key. It
// is then never retried: without a key, a retry of a write whose reply
// was lost could apply it twice.
func WithoutIdempotencyKey() WriteOption {
	return func(o *writeOptions) { o.key, o.noKey = "", true }
}

// WithActor names the acting user of the write: the change carries it as
// its actor in the feed, and the service logs it; it plays no part in the
// result.
func WithActor(uid int64) WriteOption {
	return func(o *writeOptions) { o.actor = uid }
}

// WriteResult is what a write returns.
type WriteResult struct {
	// Revision is the revision of the write's change (X-Revision); for a
	// write that changed nothing, the group's current one.
	Revision Revision
	// Count is the write's number: the users newly added (Add, Replace),
	// removed (Remove), the members removed (DeleteGroup), the groups
	// the user left (RemoveUserEverywhere), or the subgroups newly nested
	// (AddSubgroups, ReplaceSubgroups) or removed (RemoveSubgroups).
	Count int
	// Removed is, for Replace, the members the group lost; for
	// ReplaceSubgroups, the subgroups.
	Removed int
	// ETag is the reply's ETag, when it has one (the service sends none
	// with a write's success today: read the group for its new ETag).
	ETag string
	// Replayed says that the reply is the first one of an earlier request
	// with the same Idempotency-Key (Idempotent-Replayed: true): this
	// request applied nothing.
	Replayed bool
	// IdempotencyKey is the key the write was sent with; "" for none. It
	// is set with an error too: when the error leaves unknown whether the
	// write was applied (its reply lost, the context ended), send it again
	// with WithIdempotencyKey(IdempotencyKey), which applies it at most
	// once.
	IdempotencyKey string
}

// usersBody is the JSON body of the writes of /group-user.
type usersBody struct {
	Users []User `json:"users"`
	UID   int64  `json:"uid,omitempty"`
}

// Add adds users to group, creating it if needed, and sets the nicknames
// and expiries they give. Count is how many were not members before.
func (c *Client) Add(ctx context.Context, group string, users []User, opts ...WriteOption) (WriteResult, error) {
	return c.writeUsers(ctx, http.MethodPost, group, users, opts)
}

// Replace makes users the whole membership of group, in one change:
// members not in users are removed. Count is how many were added, Removed
// how many removed. An empty users empties the group. With IfMatch, it is
// the way to sync a group with a list of your own without losing a
// concurrent change (see the package's tour).
func (c *Client) Replace(ctx context.Context, group string, users []User, opts ...WriteOption) (WriteResult, error) {
	if users == nil {
		users = []User{}
	}
	return c.writeUsers(ctx, http.MethodPut, group, users, opts)
}

// Remove removes the users uids from group. Count is how many were
// members.
func (c *Client) Remove(ctx context.Context, group string, uids []int64, opts ...WriteOption) (WriteResult, error) {
	return c.writeUsers(ctx, http.MethodDelete, group, Users(uids...), opts)
}

func (c *Client) writeUsers(ctx context.Context, method, group string, users []User, opts []WriteOption) (WriteResult, error) {
	if group == "" {
		return WriteResult{}, ErrEmptyGroup
	}
	return c.writeList(ctx, method, groupPath(group), "users", opts, func(actor int64) any { return usersBody{Users: users, UID: actor} })
}

// writeList sends the write of a list, of users or of groups (what), to
// path: its JSON body is body's, with the acting uid.
func (c *Client) writeList(ctx context.Context, method, path, what string, opts []WriteOption, body func(actor int64) any) (WriteResult, error) {
	o := writeOpts(opts)
	b, err := json.Marshal(body(o.actor))
	if err != nil {
		return WriteResult{}, fmt.Errorf("membership: %s %s: encoding the %s: %w", method, path, what, err)
	}
	r := &request{method: method, path: path, body: b, contentType: "application/json"}
	o.apply(r)
	return c.writeCounts(ctx, r, method == http.MethodPut)
}

// writeCounts sends the write r, whose reply is a count, or with replaced
// {"added":A,"removed":R}.
func (c *Client) writeCounts(ctx context.Context, r *request, replaced bool) (WriteResult, error) {
	res, rep, err := c.doWrite(ctx, r)
	if err != nil {
		return res, err
	}
	if replaced {
		var counts Counts
		err = json.Unmarshal(rep.body, &counts)
		res.Count, res.Removed = counts.Added, counts.Removed
	} else {
		err = json.Unmarshal(rep.body, &res.Count)
	}
	if err != nil {
		return res, decodeError(r, err)
	}
	return res, nil
}

// DeleteGroup removes every member of group, in one change. Count is how
// many. It takes IfMatch and IfGroupEmpty as the other writes to a group.
func (c *Client) DeleteGroup(ctx context.Context, group string, opts ...WriteOption) (WriteResult, error) {
	if group == "" {
		return WriteResult{}, ErrEmptyGroup
	}
	return c.writeNoBody(ctx, "/groups/"+escapeGroup(group), opts)
}

// RemoveUserEverywhere removes the user uid from every group, in one
// change, and the service forgets their nickname. Count is how many groups
// they left. It takes no condition.
func (c *Client) RemoveUserEverywhere(ctx context.Context, uid int64, opts ...WriteOption) (WriteResult, error) {
	return c.writeNoBody(ctx, "/user-group/"+strconv.FormatInt(uid, 10), opts)
}

func (c *Client) writeNoBody(ctx context.Context, path string, opts []WriteOption) (WriteResult, error) {
	o := writeOpts(opts)
	r := &request{method: http.MethodDelete, path: path}
	if o.actor != 0 {
		r.query = url.Values{"uid": {strconv.FormatInt(o.actor, 10)}}
	}
	o.apply(r)
	res, rep, err := c.doWrite(ctx, r)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(rep.body, &res.Count); err != nil {
		return res, decodeError(r, err)
	}
	return res, nil
}

// BatchResult is what a Batch returns.
type BatchResult struct {
	// Results are the counts of each change, in order: Added for an add
	// (of users or groups), Removed for a remove or a delete_group, both
	// for a replace.
	Results []Counts
	// Revision, Replayed and IdempotencyKey are as a WriteResult's.
	Revision       Revision
	Replayed       bool
	IdempotencyKey string
}

// batchBody is the JSON body of POST /batch.
type batchBody struct {
	Changes []BatchChange `json:"changes"`
	UID     int64         `json:"uid,omitempty"`
}

// Batch applies changes to many groups in order, all or nothing, as one
// change with one revision. A change's IfMatch that does not hold fails
// the whole batch with 412 (the Error's Index names the change). It takes
// the Idempotency-Key options and WithActor; conditions go on each change.
func (c *Client) Batch(ctx context.Context, changes []BatchChange, opts ...WriteOption) (BatchResult, error) {
	o := writeOpts(opts)
	if changes == nil {
		changes = []BatchChange{}
	}
	body, err := json.Marshal(batchBody{Changes: changes, UID: o.actor})
	if err != nil {
		return BatchResult{}, fmt.Errorf("membership: POST /batch: encoding the changes: %w", err)
	}
	r := &request{method: http.MethodPost, path: "/batch", body: body, contentType: "application/json"}
	o.apply(r)
	w, rep, err := c.doWrite(ctx, r)
	if err != nil {
		return BatchResult{IdempotencyKey: w.IdempotencyKey}, err
	}
	res := BatchResult{Revision: w.Revision, Replayed: w.Replayed, IdempotencyKey: w.IdempotencyKey}
	var results struct {
		Results []Counts `json:"results"`
	}
	if err := json.Unmarshal(rep.body, &results); err != nil {
		return res, decodeError(r, err)
	}
	res.Results = results.Results
	return res, nil
}

func writeOpts(opts []WriteOption) writeOptions {
	var o writeOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// apply sets r's conditions and key, and makes it retryable with a key.
func (o writeOptions) apply(r *request) {
	r.header = http.Header{}
	if len(o.ifMatch) > 0 {
		r.header.Set("If-Match", strings.Join(o.ifMatch, ", "))
	}
	if o.ifNoneMatch {
		r.header.Set("If-None-Match", "*")
	}
	key := o.key
	if key == "" && !o.noKey {
		key = newIdempotencyKey()
	}
	if key != "" {
		r.header.Set("Idempotency-Key", key)
		r.retry = true
	}
}

// doWrite sends the write r, and returns what every write's reply says,
// and the reply. With an error it returns the key r was sent with, so
// that a caller who cannot tell whether the write was applied can send it
// again with WithIdempotencyKey, applied at most once.
func (c *Client) doWrite(ctx context.Context, r *request) (WriteResult, reply, error) {
	rep, err := c.do(ctx, r)
	if err != nil {
		return WriteResult{IdempotencyKey: r.header.Get("Idempotency-Key")}, reply{}, err
	}
	res, err := c.written(r, rep)
	return res, rep, err
}

// written returns what every write's reply says, and notes its revision
// for WithReadYourWrites.
func (c *Client) written(r *request, rep reply) (WriteResult, error) {
	key := r.header.Get("Idempotency-Key")
	rev, err := strconv.ParseUint(rep.header.Get("X-Revision"), 10, 64)
	if err != nil || rev > math.MaxInt64 {
		// Every write's reply of the service has one: this one is not
		// the service's (a proxy's, say), and says nothing applied.
		return WriteResult{IdempotencyKey: key}, decodeError(r, fmt.Errorf("the reply has no valid X-Revision (%q)", rep.header.Get("X-Revision")))
	}
	c.noteWrite(Revision(rev))
	return WriteResult{
		Revision:       Revision(rev),
		ETag:           rep.header.Get("ETag"),
		Replayed:       rep.header.Get("Idempotent-Replayed") == "true",
		IdempotencyKey: key,
	}, nil
}

// decodeError is the error of a reply whose body is not what the route
// answers.
func decodeError(r *request, err error) error {
	return fmt.Errorf("membership: %s %s: the reply is not what the route answers: %w", r.method, r.path, err)
}

// groupPath returns the escaped path of group's members.
func groupPath(group string) string { return "/group-user/" + escapeGroup(group) }

// ErrEmptyGroup is the error of a call that names the group "": no route
// of the service takes it, so the client sends nothing.
var ErrEmptyGroup = errors.New("membership: the group id is empty")

// escapeGroup escapes a group id for a path segment: "/" included, and
// "." and "..", which a path would lose, as %2E.
func escapeGroup(group string) string {
	if group == "." || group == ".." {
		return strings.Repeat("%2E", len(group))
	}
	return url.PathEscape(group)
}
