package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// Groups in groups: a group may hold other groups, its subgroups, and a
// user of a subgroup at any depth is a transitive member of every group
// above it. The service refuses, when it is written, a nesting that would
// make a cycle (ErrorCode CodeCycle), a chain deeper than its -max-depth
// (CodeTooDeep) or a group below more groups than its -max-ancestors
// (CodeTooManyAncestors).

// subgroupsBody is the JSON body of the writes of /group-group.
type subgroupsBody struct {
	Groups []Subgroup `json:"groups"`
	UID    int64      `json:"uid,omitempty"`
}

// AddSubgroups nests groups in group, and sets the expiries they give.
// Count is how many were not subgroups before. It takes the options of
// Add: IfMatch (group's ETag, which covers its members and its
// subgroups), IfGroupEmpty, the Idempotency-Key options and WithActor.
func (c *Client) AddSubgroups(ctx context.Context, group string, groups []Subgroup, opts ...WriteOption) (WriteResult, error) {
	return c.writeSubgroups(ctx, http.MethodPost, group, groups, opts)
}

// ReplaceSubgroups makes groups the whole set of group's subgroups, in
// one change. Count is how many were added, Removed how many removed.
func (c *Client) ReplaceSubgroups(ctx context.Context, group string, groups []Subgroup, opts ...WriteOption) (WriteResult, error) {
	return c.writeSubgroups(ctx, http.MethodPut, group, groups, opts)
}

// RemoveSubgroups makes the groups ids no longer subgroups of group.
// Count is how many were.
func (c *Client) RemoveSubgroups(ctx context.Context, group string, ids []string, opts ...WriteOption) (WriteResult, error) {
	return c.writeSubgroups(ctx, http.MethodDelete, group, Subgroups(ids...), opts)
}

func (c *Client) writeSubgroups(ctx context.Context, method, group string, groups []Subgroup, opts []WriteOption) (WriteResult, error) {
	if group == "" {
		return WriteResult{}, ErrEmptyGroup
	}
	if groups == nil {
		groups = []Subgroup{}
	}
	return c.writeList(ctx, method, subgroupsPath(group), "groups", opts, func(actor int64) any { return subgroupsBody{Groups: groups, UID: actor} })
}

// subgroupsPath returns the escaped path of group's subgroups.
func subgroupsPath(group string) string { return "/group-group/" + escapeGroup(group) }

// SubgroupsPage returns one page of the groups nested directly in group,
// in byte order of ids, each with its nesting's expiry, and group's ETag;
// with opts.Transitive, of every group below it, and the ETag of group's
// transitive answers. Page.Next is the After of the next page.
func (c *Client) SubgroupsPage(ctx context.Context, group string, opts PageOptions) (Page[NestedGroup], error) {
	return c.nestedPage(ctx, subgroupsPath(group), group, opts)
}

// Subgroups iterates over group's subgroups (every group below it, with
// opts.Transitive), following the pages. An error ends the iteration.
func (c *Client) Subgroups(ctx context.Context, group string, opts PageOptions) iter.Seq2[NestedGroup, error] {
	return groupPages(opts, func(o PageOptions) (Page[NestedGroup], error) { return c.SubgroupsPage(ctx, group, o) })
}

// ParentsPage returns one page of the groups group is nested in directly,
// in byte order of ids, each with its nesting's expiry; with
// opts.Transitive, of every group above it. Its ETag is the revision of
// the latest change of the group's nestings in its parents (with
// opts.Transitive, of the set of groups above it).
func (c *Client) ParentsPage(ctx context.Context, group string, opts PageOptions) (Page[NestedGroup], error) {
	return c.nestedPage(ctx, "/group-parents/"+escapeGroup(group), group, opts)
}

// Parents iterates over the groups group is in (every group above it,
// with opts.Transitive), following the pages. An error ends the iteration.
func (c *Client) Parents(ctx context.Context, group string, opts PageOptions) iter.Seq2[NestedGroup, error] {
	return groupPages(opts, func(o PageOptions) (Page[NestedGroup], error) { return c.ParentsPage(ctx, group, o) })
}

func (c *Client) nestedPage(ctx context.Context, path, group string, opts PageOptions) (Page[NestedGroup], error) {
	if group == "" {
		return Page[NestedGroup]{}, ErrEmptyGroup
	}
	return getPage[NestedGroup](ctx, c, &request{method: http.MethodGet, path: path, query: opts.query(false), read: true, cache: true})
}

// TransitiveMember returns uid's record as a member of group or of any
// group below it, with via, a shortest path of group ids from group down
// to the one that holds uid directly ([group] for a direct member), and
// true; or false when uid is not a transitive member.
func (c *Client) TransitiveMember(ctx context.Context, group string, uid int64) (m Member, via []string, ok bool, err error) {
	if group == "" {
		return Member{}, nil, false, ErrEmptyGroup
	}
	r := &request{method: http.MethodGet, path: groupPath(group) + "/" + strconv.FormatInt(uid, 10),
		query: url.Values{"transitive": {"true"}}, read: true}
	rep, err := c.do(ctx, withRetry(r))
	if IsNotMember(err) {
		return Member{}, nil, false, nil
	}
	if err != nil {
		return Member{}, nil, false, err
	}
	var record struct {
		Member
		Via []string `json:"via"`
	}
	if err := json.Unmarshal(rep.body, &record); err != nil {
		return Member{}, nil, false, decodeError(r, err)
	}
	if len(record.Via) == 0 {
		return Member{}, nil, false, decodeError(r, fmt.Errorf("the record has no via"))
	}
	return record.Member, record.Via, true, nil
}

// CheckTransitive is Check, every answer counting the users of the
// group's subgroups, at any depth, as members.
func (c *Client) CheckTransitive(ctx context.Context, checks []Check) (CheckResult, error) {
	return c.check(ctx, checks, true)
}
