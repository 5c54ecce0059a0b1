package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// TestMemoryBatches runs the store contract's batches on the memory store;
// the durable and PostgreSQL stores run them too.
func TestMemoryBatches(t *testing.T) {
	storetest.Batches(t, func(t *testing.T) membership.Store { return New() })
}

// The feed's byte budget counts a batch's changes: a batch costs at least
// what its changes would cost alone.
func TestBatchChangeCostCountsItsChanges(t *testing.T) {
	subs := []membership.Change{
		{Op: membership.OpAdd, GroupID: "g", UIDs: make([]membership.UID, 1000), Nicknames: []membership.Member{{UID: 1, Nickname: "Ann"}}},
		{Op: membership.OpDeleteGroup, GroupID: "h"},
	}
	batch := changeCost(membership.Change{Op: membership.OpBatch, Changes: subs})
	assert.GreaterOrEqual(t, batch, changeCost(membership.Change{})+changeCost(subs[0])+changeCost(subs[1]))
}
