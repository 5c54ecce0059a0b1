// Package client is a Go client of the group membership service: a typed
// method for every route, errors as values, safe retries, read-your-writes
// across instances, cached lists and a follower of the change feed.
// It uses the standard library only.
//
// # Make a client
//
// A Client is made once, from the service's base URL, and shared: it is
// safe for concurrent use.
//
//	c, err := client.New("http://localhost:8080",
//		client.WithToken(os.Getenv("MEMBERSHIP_TOKEN")), // when the service has one
//	)
//
// Every method takes a context first: its deadline or cancellation bounds
// the call, retries included. A service that serves HTTPS (-tls-cert) is
// asked at an https:// URL: WithTLSConfig gives the roots that trust its
// certificate (the system's by default), and the client's own certificate
// for a service that asks for one (-tls-client-ca).
//
// # Add, remove, list
//
//	res, err := c.Add(ctx, "admins", []client.User{
//		client.NewUser(1),
//		client.NewUser(2).WithNickname("Bob"),
//		client.NewUser(3).WithExpiry(client.ExpiresAfter(4 * time.Hour)),
//	})
//	// res.Count: the users newly added; res.Revision: the change's revision.
//	_, err = c.Remove(ctx, "admins", []int64{2})
//
//	for m, err := range c.Members(ctx, "admins", client.ListOptions{}) {
//		if err != nil {
//			return err // the last pair: the iteration ends
//		}
//		fmt.Println(m.UID, m.Nickname)
//	}
//
// Members follows the pages for you; ListPage reads one, with the group's
// ETag and size. A membership can end by itself: ExpiresAt, ExpiresAfter,
// or Permanent to take an expiry away. Member asks about one user, Check
// about many at once; UserGroups lists a user's groups, Groups the groups.
// Replace, DeleteGroup, RemoveUserEverywhere and Batch write a whole group,
// a user everywhere, or many groups at once.
//
// # Groups in groups
//
// A group may hold groups: AddSubgroups, ReplaceSubgroups and
// RemoveSubgroups write a group's subgroups (a Subgroup may end by itself,
// as a membership does), Subgroups and Parents list them, and the reads of
// users take Transitive (ListOptions, PageOptions) for the members of the
// subgroups too, at any depth. TransitiveMember says through which groups
// a user is a member; CheckTransitive checks as Check does, through
// nesting. A nesting that would make a cycle, a chain deeper than the
// service's -max-depth or a group below more than its -max-ancestors
// groups fails with IsCycle, IsTooDeep or IsTooManyAncestors, and changes
// nothing.
//
//	_, err = c.AddSubgroups(ctx, "engineering", client.Subgroups("backend", "frontend"))
//	m, via, ok, err := c.TransitiveMember(ctx, "engineering", 7)
//	// via: ["engineering", "backend"] when user 7 is in backend.
//
// # Sync a group with PUT and If-Match
//
// To make a group what a list of yours says without losing a change made
// by someone else meanwhile: read the group's ETag, decide, and replace it
// only while the ETag holds. A 412 means the group changed: read again.
//
//	for {
//		page, err := c.ListPage(ctx, "admins", client.ListOptions{})
//		if err != nil {
//			return err
//		}
//		_, err = c.Replace(ctx, "admins", want(page.Items), client.IfMatch(page.ETag))
//		if client.IsPreconditionFailed(err) {
//			continue // someone else changed it: decide again
//		}
//		return err
//	}
//
// # Follow the feed
//
// Follow iterates over every change after a revision, for ever, with long
// polls. To keep a copy of the groups: note where the feed is (Latest),
// list the groups, then apply each change after it.
//
//	for {
//		pos, err := c.Latest(ctx)
//		if err != nil {
//			return err
//		}
//		// ... list the groups you keep, afresh ...
//		for ch, err := range c.Follow(ctx, pos.Revision, client.FromEpoch(pos.Epoch)) {
//			if client.NeedsResync(err) {
//				// Changes were lost (410 changes_gone, or a new epoch
//				// after a restart or a restore): list again, follow again.
//				break
//			}
//			if err != nil {
//				return err
//			}
//			apply(ch)
//		}
//	}
//
// Follow rides out transient failures by itself (a restart, a 503) and
// never skips a change silently: what it cannot recover from ends the
// iteration with an error.
//
// # Read your writes
//
// Behind a load balancer, a read may reach an instance that has not yet
// applied the write just made on another. WithReadYourWrites makes the
// client send the revision of its last write in X-Min-Revision on its
// reads, and the instance waits until it has it:
//
//	c, err := client.New(url, client.WithReadYourWrites())
//	if err != nil {
//		return err
//	}
//	if _, err := c.Add(ctx, "admins", client.Users(7)); err != nil {
//		return err
//	}
//	m, ok, err := c.Member(ctx, "admins", 7) // ok, on any instance
//
// # Errors
//
// An error reply of the service is an *Error, with its status, code,
// message, the index of the offending element, and Retry-After; test it
// with errors.As, or with the helpers: IsNotFound, IsNotMember,
// IsPreconditionFailed, IsUnauthorized, IsInvalid, IsTooLarge,
// IsUnavailable, IsInFlight, IsKeyReused, IsChangesGone, NeedsResync.
// Other errors (a connection refused, a context cancelled) are returned
// wrapped: errors.Is(err, context.DeadlineExceeded) works.
//
//	_, err := c.Add(ctx, "admins", []client.User{{UID: 0}})
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeInvalidUsers {
//		fmt.Println("users element", e.Index, "is wrong:", e.Message)
//	}
//
// # Retries
//
// A 503 with Retry-After, a connection error, and a 409
// idempotency_key_in_flight are retried, with exponential backoff and full
// jitter, at most 4 attempts within 5 s by default (RetryPolicy,
// WithRetry), honouring Retry-After and the context. Reads are always
// retried. A write is retried only because the client sends it with an
// Idempotency-Key, a random one per call: the service applies a key at
// most once, so a retry of a write whose reply was lost is answered with
// the first reply (WriteResult.Replayed), never applied twice. Give your
// own key with WithIdempotencyKey (to retry across restarts of your
// program); WithoutIdempotencyKey sends none, and the write is then never
// retried.
//
// # Lists and the cache
//
// Member lists and Groups are asked for with the ETag of the last reply
// for the same URL (If-None-Match); a 304 is served from a cache bounded
// in bytes (WithListCacheBytes, 4 MiB by default).
//
// # Tests
//
// Package example.com/groupmembership/membershiptest runs the real
// service in the test's process, with a ready Client: see its NewServer.
package client
