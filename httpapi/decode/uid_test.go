package decode

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership"
)

func TestParseUID(t *testing.T) {
	tests := []struct {
		in     string
		want   membership.UID
		wantOK bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"9223372036854775808", 0, false},
		{"99999999999999999999", 0, false},
		{"0", 0, false},
		{"07", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{" 1", 0, false},
		{"", 0, false},
		{"abc", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseUID(tt.in)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
