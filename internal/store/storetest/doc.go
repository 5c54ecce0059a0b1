// Package storetest is the contract every membership.Store must keep, as
// tests any store's package can run: Contract (memberships, counts,
// nicknames, paging, the reverse index) and RevisionsAndFeed (revisions
// and the change feed, followers included). The helpers it uses (ListAll,
// AllChanges, Count, Follower) are there for a store's own tests too.
package storetest
