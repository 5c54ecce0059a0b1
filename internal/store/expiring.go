package store

import (
	"time"

	"example.com/groupmembership/membership"
)

// Expiring is a store whose memberships and nestings may end by themselves
// (see membership.OpExpire, OpExpireGroups): it tells which expiries are
// due, as writes of OpExpire and OpExpireGroups that its Write applies,
// and takes back those a caller could not apply. Every store of this service is one; the expirer (package expiry)
// drives it.
type Expiring interface {
	membership.Store
	// DueExpiries returns the expiries due at now, at most max
	// memberships, as OpExpire writes with AsOf now, and the nestings
	// due, as OpExpireGroups writes with AsOf now; they are not due
	// again unless given back.
	DueExpiries(now time.Time, max int) []Due
	// RequeueExpiries gives back expiries of DueExpiries not applied.
	RequeueExpiries(due []Due)
	// NextExpiry returns when the earliest expiry is due, false when none
	// is.
	NextExpiry() (time.Time, bool)
	// ExpiryCount returns how many memberships have an expiry.
	ExpiryCount() int64
	// ExpiryWakeup returns a channel told when an expiry is set that comes
	// before every other, so that an expirer waiting for the earliest
	// looks again.
	ExpiryWakeup() <-chan struct{}
}

// Due is expiries due: the write that applies them, and the earliest of
// them, from which their lag is counted.
type Due struct {
	Write    membership.Write
	Earliest time.Time
}
