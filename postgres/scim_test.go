package postgres

import (
	"testing"

	"example.com/groupmembership/httpapi/scim/scimtest"
	"example.com/groupmembership/membership"
)

// The SCIM routes on PostgreSQL: every write goes through the log.
func TestSCIMOnPostgres(t *testing.T) {
	scimtest.Run(t, func(t *testing.T) scimtest.Store { return openTest(t, membership.DefaultChangesKeep) })
}

// The SCIM routes with writes on one instance and reads on another.
func TestSCIMOnTwoInstances(t *testing.T) {
	scimtest.Run(t, func(t *testing.T) scimtest.Store { return openPair(t) })
}
