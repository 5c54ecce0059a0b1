package memory

import (
	"testing"

	"example.com/groupmembership/internal/store/storetest"
)

// TestMemoryBatches runs the store contract's batches on the memory store.
// (Every store runs them once all of them take batches.)
func TestMemoryBatches(t *testing.T) {
	storetest.Batches(t, func(t *testing.T) storetest.BatchStore { return New() })
}
