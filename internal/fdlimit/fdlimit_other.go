//go:build !unix

package fdlimit

// Raise returns an unknown limit: this platform has no limit of open
// descriptors to read or raise.
func Raise() (Limit, error) { return Limit{}, nil }
