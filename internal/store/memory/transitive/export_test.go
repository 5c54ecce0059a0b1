package transitive

import "example.com/groupmembership/membership"

// Hooks for the tests of package transitive_test, which read the kept
// merges of a memory.Store's Reader.

// DefaultMergedBudget is defaultMergedBudget.
const DefaultMergedBudget = defaultMergedBudget

// MergedBytes is mergedBytes.
var MergedBytes = mergedBytes

// SetMergedBudget sets the bytes r's kept merges may hold.
func SetMergedBudget(r *Reader, budget int64) { r.merged.budget = budget }

// MergedHitsAndMisses returns how many reads of r used a kept merge and
// how many found none that fit.
func MergedHitsAndMisses(r *Reader) (int64, int64) {
	return r.merged.hits.Load(), r.merged.misses.Load()
}

// MergedEntries returns how many merges r keeps and their bytes.
func MergedEntries(r *Reader) (int, int64) {
	r.merged.mu.Lock()
	defer r.merged.mu.Unlock()
	return len(r.merged.entries), r.merged.bytes
}

// MergedEntry returns the uids and ends of groupID's kept merge, false
// when it has none.
func MergedEntry(r *Reader, groupID string) (uids []membership.UID, ends []int64, ok bool) {
	r.merged.mu.Lock()
	defer r.merged.mu.Unlock()
	e := r.merged.entries[groupID]
	if e == nil {
		return nil, nil, false
	}
	return e.uids, e.ends, true
}

// SetClosureKept has r call fn each time it keeps a closure it made, with
// the nesting held.
func SetClosureKept(r *Reader, fn func()) { r.closureKept = fn }
