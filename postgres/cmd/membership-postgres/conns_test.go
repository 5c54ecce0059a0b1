package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/postgres/internal/pgtest"
)

// TestConnectionBudgetOnPostgres holds three times -max-conns idle
// keep-alive connections against an instance: the longest idle are closed to
// make room, every request is answered, writes reach the database, and the
// start log says what the budget leaves aside for the database's
// connections.
func TestConnectionBudgetOnPostgres(t *testing.T) {
	p := start(t, pgtest.NewDatabase(t), "-max-conns", "16", "-log-format", "json")
	var budget struct {
		MaxConns            int `json:"max_conns"`
		ReservedDescriptors int `json:"reserved_descriptors"`
	}
	for _, line := range p.logs.Lines() {
		if strings.Contains(line, `"msg":"connection budget"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &budget))
		}
	}
	assert.Equal(t, 16, budget.MaxConns)
	assert.Equal(t, 16+64+65+64, budget.ReservedDescriptors, "its own, those being closed and refused, the database's")

	addr := strings.TrimPrefix(p.base, "http://")
	for i := range 48 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "connection %d", i)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "connection %d", i)
	}
	assert.NotZero(t, add(p.base, "g", 7), "a write reaches the database")
	resp, err := client.Get(p.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `membership_connections_limit{listener="api"} 16`)
	assert.NotContains(t, string(body), `membership_connections_closed_idle_total{listener="api"} 0`+"\n")
}
