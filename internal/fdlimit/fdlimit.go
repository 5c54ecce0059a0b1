// Package fdlimit reads, and raises where it can, how many file descriptors
// the process may hold open: the budget that its connections, its data
// directory and its own workings share.
package fdlimit

// Limit is the process's limit of open file descriptors.
type Limit struct {
	// Soft is the limit in force, after Raise; Hard, how far the process
	// may raise it. Known is false where the platform has no such limit to
	// read (Windows): then both are 0.
	Soft, Hard uint64
	Known      bool
}
