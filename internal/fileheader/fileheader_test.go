package fileheader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	k := Kind{Magic: "TEST", Name: "test file", Version: 3}
	b := k.Append([]byte{})
	assert.Equal(t, []byte("TEST\x03\x00\x00\x00"), b)
	assert.Len(t, b, Size)
	v, err := k.Read(append(b, "body"...))
	require.NoError(t, err)
	assert.Equal(t, uint32(3), v)
}

func TestHeaderRefusals(t *testing.T) {
	k := Kind{Magic: "TEST", Name: "test file", Version: 3}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", "", "not a membership test file: bad magic word"},
		{"short", "TEST\x01\x00", "not a membership test file: bad magic word"},
		{"another kind", "GMWL\x01\x00\x00\x00", "not a membership test file: bad magic word"},
		{"version 0", "TEST\x00\x00\x00\x00", "test file format version 0, this build reads versions 1 to 3"},
		{"a newer version", "TEST\x04\x00\x00\x00", "test file format version 4, this build reads versions 1 to 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.Read([]byte(tc.data))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
	for v := byte(1); v <= 3; v++ {
		got, err := k.Read([]byte{'T', 'E', 'S', 'T', v, 0, 0, 0})
		require.NoError(t, err)
		assert.Equal(t, uint32(v), got)
	}
}
