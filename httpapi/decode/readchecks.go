package decode

import (
	"net/http"
	"unsafe"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

// ReadChecks reads and decodes the body of POST /check. The body's memory,
// and that of the decoded checks, are taken from bodies: the caller
// releases the lease once done with the checks, error or not.
//
// Errors: middleware.CodeUnsupportedMediaType, CodeBodyTooLarge, CodeInvalidBody,
// CodeInvalidChecks, CodeTooManyChecks, CodeUnavailable (bodies is spent).
func ReadChecks(r *http.Request, maxChecks int, maxBodyBytes int64, bodies *budget.Bytes) (CheckRequest, budget.Lease, error) {
	if err := requireJSON(r, "POST /check"); err != nil {
		return CheckRequest{}, budget.Lease{}, err
	}
	body, lease, err := ReadBody(r, maxBodyBytes, bodies)
	if err != nil {
		return CheckRequest{}, lease, err
	}
	// The body is never written again: the group ids may point into it.
	req, err := ParseChecks(unsafe.String(unsafe.SliceData(body), len(body)), maxChecks)
	if err != nil {
		return CheckRequest{}, lease, err
	}
	checks := req.Checks
	// The checks take memory of their own, and so does a group id with an
	// escape in it, decoded into a copy: taken with the body's at once, so
	// that a request alone is served whatever its size.
	size := int64(cap(checks)) * int64(unsafe.Sizeof(membership.Check{}))
	for _, c := range checks {
		if !within(body, c.GroupID) {
			size += int64(len(c.GroupID))
		}
	}
	if !lease.Resize(lease.Held() + size) {
		return CheckRequest{}, lease, BodiesBusy()
	}
	return req, lease, nil
}

// SubgroupsBytes is the memory of decoded subgroups: their slice and the
// ids, copied out of the body.
func SubgroupsBytes(groups []membership.Subgroup) int64 {
	n := int64(cap(groups)) * int64(unsafe.Sizeof(membership.Subgroup{}))
	for _, g := range groups {
		n += int64(len(g.GroupID))
	}
	return n
}
