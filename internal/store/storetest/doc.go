// Package storetest holds what the tests of every membership.Store share:
// calls shaped as the Service makes them (Add, Keyed, Nest), reads that
// fail the test on an error (ListAll, AllChanges, Latest, Subgroups), and
// Follower, a client that rebuilds every list, direct and transitive, from
// lists and the change feed alone. The contract every store keeps is in
// its subpackages, one for each part, each with a Contract a store's tests
// run: memberstest (memberships, counts, nicknames, paging, the reverse
// index, whole-group writes, checks, Idempotency-Keys), feedtest
// (revisions and the change feed), batchtest (batches), expirytest
// (memberships that end by themselves), nestingtest (groups in groups) and
// directorytest (accounts and group attributes).
package storetest
