package scim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/scim/scimtest"
	"example.com/groupmembership/internal/store/durable"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

func TestSCIMOnMemory(t *testing.T) {
	scimtest.Run(t, func(*testing.T) scimtest.Store { return memory.New() })
}

// The SCIM routes on a data directory: every write goes through its log.
func TestSCIMOnADataDirectory(t *testing.T) {
	scimtest.Run(t, func(t *testing.T) scimtest.Store {
		d, err := durable.Open(t.TempDir(), durable.Options{ChangesKeep: membership.DefaultChangesKeep})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		return d
	})
}
