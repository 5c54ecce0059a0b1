// Package nestreads answers the reads of groups in groups: a group's
// subgroups and parents, and every answer through nesting (a group's
// members, a member's record with its path, a user's groups, checks, and
// the revision a transitive list moves with). Its Service validates each
// read whole and holds it to the request's scope before the store sees it,
// as membership.Service does for every other request, over the reads of
// the same store (membership.Nesting); the writes of groups in groups go
// through membership.Service.Write and Batch.
//
// A transitive read needs read on the group it asks of and on every group
// below it, checked before the read and found unchanged after it
// (scope.go); a list of groups, read on each group it names.
package nestreads

import "example.com/groupmembership/membership"

// Service answers the reads of groups in groups of the store of a
// membership.Service.
type Service struct {
	svc   *membership.Service
	store membership.Nesting
}

// NewService returns the Service of the reads of groups in groups of svc's
// store.
func NewService(svc *membership.Service) *Service {
	return &Service{svc: svc, store: svc.Nesting()}
}
