package memory

import (
	"testing"

	"example.com/groupmembership/internal/store/storetest/batchtest"
	"example.com/groupmembership/membership"
)

// TestMemoryBatches runs the store contract's batches on the memory store;
// the durable and PostgreSQL stores run them too.
func TestMemoryBatches(t *testing.T) {
	batchtest.Contract(t, func(t *testing.T) membership.Store { return New() })
}
