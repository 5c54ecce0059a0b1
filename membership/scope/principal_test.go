package scope_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership/scope"
)

func TestValidatePrincipal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantMsg string // "" when the name is valid
	}{
		{"plain", "sync-job", ""},
		{"every kind of byte", "Ops_2.team-a@example.com:8443", ""},
		{"the single token's", "token", ""},
		{"64 bytes", strings.Repeat("p", 64), ""},
		{"empty", "", "of 0 bytes"},
		{"65 bytes", strings.Repeat("p", 65), "of 65 bytes: it must be 1 to 64"},
		{"a space", "sync job", "byte 0x20 at 4"},
		{"a quote", `a"b`, "byte 0x22 at 1"},
		{"an equals sign", "a=b", "byte 0x3d at 1"},
		{"a newline", "a\n", "byte 0x0a at 1"},
		{"not ASCII", "équipe", "byte 0xc3 at 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := scope.ValidatePrincipal(tt.in)
			if tt.wantMsg == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}
