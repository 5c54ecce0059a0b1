package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Page is one page of a list: its items, and where the next page starts.
type Page[T any] struct {
	// Items are the page's, in the list's order.
	Items []T
	// Total is the size of the whole list (X-Total-Count): the group's
	// members, the user's groups, or the groups selected.
	Total int
	// Next is the After of the next page, as the service gives it (a uid
	// in decimal for members and a user's groups' pages, a group id for
	// Groups); "" when this page is the last.
	Next string
	// NextUID is Next as a uid, for a page of members: the After of
	// ListOptions for the next page; 0 when this page is the last.
	NextUID int64
	// ETag names the state listed (member lists, Groups, subgroups and
	// parents, and a user's groups with Transitive). A direct list's is
	// the group's: send it in IfMatch to write only while the group is
	// unchanged.
	ETag string
	// Revision is the revision of the state listed, for Groups
	// (X-Revision); 0 for the other lists.
	Revision Revision
}

// DefaultPageSize is the page size of the iterators (Members, UserGroups,
// Groups) when their options give none.
const DefaultPageSize = 1000

// ListOptions select a page of a group's members.
type ListOptions struct {
	// Limit is the most members of the page, 1 to 10000; 0 asks for all
	// of them after After in one reply (ListPage), or pages of
	// DefaultPageSize (Members).
	Limit int
	// After starts the page after this uid; 0 at the start.
	After int64
	// Transitive lists every user of the group or of any group below it,
	// each once; a member's Expires is when its last path into the group
	// ends. The page's ETag is then the group's transitive one, which
	// moves whenever anything below the group does: not one for IfMatch.
	Transitive bool
}

// ListPage returns one page of group's members, in ascending uid order,
// with the group's ETag. A group without members is an empty page, not an
// error. Page.NextUID is the After of the next page (0 after the last);
// Members follows the pages for you.
func (c *Client) ListPage(ctx context.Context, group string, opts ListOptions) (Page[Member], error) {
	if group == "" {
		return Page[Member]{}, ErrEmptyGroup
	}
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.After > 0 {
		q.Set("after", strconv.FormatInt(opts.After, 10))
	}
	if opts.Transitive {
		q.Set("transitive", "true")
	}
	p, err := getPage[Member](ctx, c, &request{method: http.MethodGet, path: groupPath(group), query: q, read: true, cache: true})
	if err == nil && p.Next != "" {
		if p.NextUID, err = strconv.ParseInt(p.Next, 10, 64); err != nil {
			return p, fmt.Errorf("membership: the next page's after %q is not a uid", p.Next)
		}
	}
	return p, err
}

// Members iterates over group's members in ascending uid order, a page of
// opts.Limit (DefaultPageSize when 0) at a time from opts.After, following
// the pages. An error ends the iteration: it is the last pair yielded.
// Members added or removed while it runs may or may not be seen; every
// member present throughout is seen once.
func (c *Client) Members(ctx context.Context, group string, opts ListOptions) iter.Seq2[Member, error] {
	if opts.Limit <= 0 {
		opts.Limit = DefaultPageSize
	}
	return pages(func(after string) (Page[Member], error) {
		o := opts
		if after != "" {
			uid, err := strconv.ParseInt(after, 10, 64)
			if err != nil {
				return Page[Member]{}, fmt.Errorf("membership: the next page's after %q is not a uid", after)
			}
			o.After = uid
		}
		return c.ListPage(ctx, group, o)
	})
}

// Member returns group's member uid, and true; or false when uid is not a
// member (the 404 not_member is not an error here).
func (c *Client) Member(ctx context.Context, group string, uid int64) (Member, bool, error) {
	if group == "" {
		return Member{}, false, ErrEmptyGroup
	}
	r := &request{method: http.MethodGet, path: groupPath(group) + "/" + strconv.FormatInt(uid, 10), read: true}
	rep, err := c.do(ctx, withRetry(r))
	if IsNotMember(err) {
		return Member{}, false, nil
	}
	if err != nil {
		return Member{}, false, err
	}
	var m Member
	if err := json.Unmarshal(rep.body, &m); err != nil {
		return Member{}, false, decodeError(r, err)
	}
	return m, true, nil
}

// CheckResult is what Check returns.
type CheckResult struct {
	// Results answer each check, in order: true for a member.
	Results []bool
	// Revision is the one state every answer is of.
	Revision Revision
}

// Check answers many membership questions at once (at most the service's
// -max-checks, 1000 by default), every answer of one state. It is a read:
// retried as reads are.
func (c *Client) Check(ctx context.Context, checks []Check) (CheckResult, error) {
	return c.check(ctx, checks, false)
}

func (c *Client) check(ctx context.Context, checks []Check, transitive bool) (CheckResult, error) {
	if checks == nil {
		checks = []Check{}
	}
	body, err := json.Marshal(struct {
		Checks     []Check `json:"checks"`
		Transitive bool    `json:"transitive,omitempty"`
	}{checks, transitive})
	if err != nil {
		return CheckResult{}, fmt.Errorf("membership: POST /check: %w", err)
	}
	r := &request{method: http.MethodPost, path: "/check", body: body, contentType: "application/json", read: true}
	rep, err := c.do(ctx, withRetry(r))
	if err != nil {
		return CheckResult{}, err
	}
	var res struct {
		Results []bool `json:"results"`
	}
	if err := json.Unmarshal(rep.body, &res); err != nil {
		return CheckResult{}, decodeError(r, err)
	}
	if len(res.Results) != len(checks) {
		return CheckResult{}, decodeError(r, fmt.Errorf("%d results for %d checks", len(res.Results), len(checks)))
	}
	return CheckResult{Results: res.Results, Revision: revisionOf(rep.header)}, nil
}

// PageOptions select a page of a list of group ids.
type PageOptions struct {
	// Limit is the most items of the page, 1 to 10000; 0 takes the
	// service's default (all of a user's groups; 1000 groups for Groups),
	// or DefaultPageSize in the iterators.
	Limit int
	// After starts the page after this group id (in byte order).
	After string
	// Prefix selects the groups whose ids start with it (Groups only).
	Prefix string
	// Transitive lists through nesting (UserGroups, Subgroups, Parents):
	// every group the user is in directly or through nesting, every group
	// below, or every group above, each once.
	Transitive bool
}

func (o PageOptions) query(prefix bool) url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if prefix && o.Prefix != "" {
		q.Set("prefix", o.Prefix)
	}
	if !prefix && o.Transitive {
		q.Set("transitive", "true")
	}
	return q
}

// UserGroupsPage returns one page of the ids of the groups uid is in, in
// byte order.
func (c *Client) UserGroupsPage(ctx context.Context, uid int64, opts PageOptions) (Page[string], error) {
	r := &request{method: http.MethodGet, path: "/user-group/" + strconv.FormatInt(uid, 10), query: opts.query(false), read: true}
	return getPage[string](ctx, c, r)
}

// UserGroups iterates over the ids of the groups uid is in, in byte
// order, following the pages. An error ends the iteration.
func (c *Client) UserGroups(ctx context.Context, uid int64, opts PageOptions) iter.Seq2[string, error] {
	return groupPages(opts, func(o PageOptions) (Page[string], error) { return c.UserGroupsPage(ctx, uid, o) })
}

// GroupsPage returns one page of the groups that have members, in byte
// order of their ids, each with its size, and the revision listed.
func (c *Client) GroupsPage(ctx context.Context, opts PageOptions) (Page[GroupSize], error) {
	r := &request{method: http.MethodGet, path: "/groups", query: opts.query(true), read: true, cache: true}
	return getPage[GroupSize](ctx, c, r)
}

// Groups iterates over the groups that have members (those of
// opts.Prefix), in byte order of their ids, following the pages. An error
// ends the iteration.
func (c *Client) Groups(ctx context.Context, opts PageOptions) iter.Seq2[GroupSize, error] {
	return groupPages(opts, func(o PageOptions) (Page[GroupSize], error) { return c.GroupsPage(ctx, o) })
}

// getPage gets one page of a list.
func getPage[T any](ctx context.Context, c *Client, r *request) (Page[T], error) {
	rep, err := c.do(ctx, withRetry(r))
	if err != nil {
		return Page[T]{}, err
	}
	p := Page[T]{ETag: rep.header.Get("ETag"), Next: nextAfter(rep.header.Get("Link"))}
	p.Total, _ = strconv.Atoi(rep.header.Get("X-Total-Count"))
	if r.path == "/groups" {
		p.Revision = revisionOf(rep.header)
	}
	if err := json.Unmarshal(rep.body, &p.Items); err != nil {
		return Page[T]{}, decodeError(r, err)
	}
	return p, nil
}

// pages iterates over the items of the pages get returns, from after "",
// following Next.
func pages[T any](get func(after string) (Page[T], error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		after := ""
		for {
			p, err := get(after)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range p.Items {
				if !yield(item, nil) {
					return
				}
			}
			if p.Next == "" || len(p.Items) == 0 {
				return
			}
			after = p.Next
		}
	}
}

// groupPages iterates over the items of a list of groups' pages, which
// page returns, a page of opts.Limit (DefaultPageSize when 0) at a time
// from opts.After, following Next.
func groupPages[T any](opts PageOptions, page func(PageOptions) (Page[T], error)) iter.Seq2[T, error] {
	if opts.Limit <= 0 {
		opts.Limit = DefaultPageSize
	}
	return pages(func(after string) (Page[T], error) {
		o := opts
		if after != "" {
			o.After = after
		}
		return page(o)
	})
}

// nextAfter returns the after parameter of a Link to the next page; ""
// when there is none.
func nextAfter(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return ""
		}
		return u.Query().Get("after")
	}
	return ""
}

// revisionOf returns a reply's X-Revision; 0 without one.
func revisionOf(h http.Header) Revision {
	rev, _ := strconv.ParseUint(h.Get("X-Revision"), 10, 64)
	return Revision(rev)
}

// withRetry marks a read r as retryable.
func withRetry(r *request) *request {
	r.retry = true
	return r
}

// ChangesOptions select the changes of one Changes call.
type ChangesOptions struct {
	// After is the revision the changes follow: those after it are
	// returned, oldest first.
	After Revision
	// Limit is the most changes of the reply, 1 to 10000; 0 takes the
	// service's default, 1000.
	Limit int
	// Wait, when positive (up to 60 s), long-polls: with no change after
	// After, the reply comes as soon as one does, or is empty when Wait
	// has passed.
	Wait time.Duration
}

// ChangesPage is the reply of Changes.
type ChangesPage struct {
	// Changes are in revision order.
	Changes []Change
	// Latest is the latest revision of the store (X-Revision).
	Latest Revision
	// Epoch is the store's epoch (X-Epoch): a follower that sees another
	// epoch than it noted lists again (see EpochChangedError).
	Epoch string
	// RetryAfter, when set, says that the poll was answered at once,
	// empty, because the service had as many polls waiting as it lets
	// wait: wait that long before asking again.
	RetryAfter time.Duration
}

// Changes returns the changes after opts.After, oldest first: one call of
// GET /changes. A revision the feed no longer keeps (or never gave out)
// is a 410 (IsChangesGone), whose Error's OldestRevision is the oldest it
// keeps. Follow calls it in a loop.
func (c *Client) Changes(ctx context.Context, opts ChangesOptions) (ChangesPage, error) {
	return c.changes(ctx, opts, 0)
}

// changes is Changes, with at most attempts (0: the policy's).
func (c *Client) changes(ctx context.Context, opts ChangesOptions, attempts int) (ChangesPage, error) {
	q := url.Values{}
	if opts.After > 0 {
		q.Set("after", strconv.FormatUint(uint64(opts.After), 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Wait > 0 {
		q.Set("wait", opts.Wait.String())
	}
	r := &request{method: http.MethodGet, path: "/changes", query: q, retry: true, maxAttempts: attempts}
	rep, err := c.do(ctx, r)
	if err != nil {
		return ChangesPage{}, err
	}
	page := ChangesPage{Latest: revisionOf(rep.header), Epoch: rep.header.Get("X-Epoch"),
		RetryAfter: parseRetryAfter(rep.header.Get("Retry-After"), time.Now())}
	if err := json.Unmarshal(rep.body, &page.Changes); err != nil {
		return ChangesPage{}, decodeError(r, err)
	}
	return page, nil
}

// Backup writes a backup of the whole state to w, as the service streams
// it (the file that `membership -restore` reads), and returns the revision
// it holds and the bytes written. It needs the token when the service has
// one. An attempt is retried only before any of the backup is written to
// w: a backup cut off mid-way is an error, and w then holds part of one.
func (c *Client) Backup(ctx context.Context, w io.Writer) (Revision, int64, error) {
	r := &request{method: http.MethodGet, path: "/backup", retry: true}
	resp, err := c.send(ctx, r)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return 0, n, fmt.Errorf("membership: GET /backup: copying the backup: %w", err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return 0, n, fmt.Errorf("membership: GET /backup: %d bytes of %d: %w", n, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	return revisionOf(resp.Header), n, nil
}
