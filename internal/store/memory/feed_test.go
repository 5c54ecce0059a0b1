package memory

import (
	"testing"

	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

func TestMemoryRevisionsAndFeed(t *testing.T) {
	storetest.RevisionsAndFeed(t, func(_ *testing.T, keep int) membership.Store {
		return NewWith(Options{ChangesKeep: keep})
	})
}
