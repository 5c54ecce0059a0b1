package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logOf returns a log holding the payloads.
func logOf(t *testing.T, payloads ...string) []byte {
	t.Helper()
	b := Header(7, 9)
	for _, p := range payloads {
		var err error
		b, err = Append(b, func(b []byte) []byte { return append(b, p...) })
		require.NoError(t, err)
	}
	return b
}

func readAll(data []byte) ([]string, Result, error) {
	var got []string
	res, err := Read(data, func(p []byte) error {
		got = append(got, string(p))
		return nil
	})
	return got, res, err
}

func TestAppendAndRead(t *testing.T) {
	data := logOf(t, "one", "two", "three")
	got, res, err := readAll(data)
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two", "three"}, got)
	assert.Equal(t, Result{LogHeader: LogHeader{Version: Version, StartRevision: 7, DirID: 9, Size: HeaderSize}, Records: 3, End: int64(len(data))}, res)
}

// Every way a crash can cut the last record short is a torn write: the
// records before it are read, and Torn says how much to cut.
func TestReadTellsATornTail(t *testing.T) {
	whole := logOf(t, "one", "two")
	last := len(logOf(t, "one"))
	for cut := last + 1; cut < len(whole); cut++ {
		got, res, err := readAll(whole[:cut])
		require.NoError(t, err, "cut at %d", cut)
		assert.Equal(t, []string{"one"}, got, "cut at %d", cut)
		assert.Equal(t, int64(last), res.End)
		assert.Equal(t, int64(cut-last), res.Torn)
	}
	// Some filesystems leave zeros where a crash did not write.
	got, res, err := readAll(append(logOf(t, "one"), make([]byte, 40)...))
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, got)
	assert.Equal(t, int64(40), res.Torn)
}

// A complete record that does not check out is damage, even the last one:
// every single flipped byte of it is caught, and none is taken for a torn
// write.
func TestReadTellsDamageFromATornWrite(t *testing.T) {
	whole := logOf(t, "one", "second record")
	last := len(logOf(t, "one"))
	for i := last; i < len(whole); i++ {
		for _, bit := range []byte{0x01, 0x80} {
			data := bytes.Clone(whole)
			data[i] ^= bit
			got, res, err := readAll(data)
			var damage *Damage
			require.ErrorAs(t, err, &damage, "byte %d flipped (%#x)", i, bit)
			assert.Equal(t, int64(last), damage.Offset)
			assert.Equal(t, []string{"one"}, got)
			assert.Zero(t, res.Torn)
		}
	}
}

// A length over MaxPayload is damage: it is never allocated.
func TestReadRefusesAnImpossibleLength(t *testing.T) {
	data := Header(0, 1)
	h := make([]byte, 12)
	binary.LittleEndian.PutUint32(h, MaxPayload+1)
	binary.LittleEndian.PutUint32(h[8:], crc32.Checksum(h[:8], castagnoli))
	_, _, err := readAll(append(data, h...))
	var damage *Damage
	require.ErrorAs(t, err, &damage)
	assert.Contains(t, damage.Error(), "length")
}

// The writer refuses what the reader would refuse: no record written is
// unreadable.
func TestAppendRefusesWhatCannotBeRead(t *testing.T) {
	b := Header(0, 1)
	_, err := Append(b, func(b []byte) []byte { return append(b, make([]byte, MaxPayload+1)...) })
	assert.ErrorIs(t, err, ErrTooLarge)
	got, err := Append(b, func(b []byte) []byte { return b })
	assert.ErrorIs(t, err, ErrTooLarge, "an empty payload")
	assert.Equal(t, Header(0, 1), got, "nothing appended")

	big, err := Append(b, func(b []byte) []byte { return append(b, make([]byte, MaxPayload)...) })
	require.NoError(t, err)
	_, res, err := readAll(big)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Records, "the largest record is read back")
}

// v1frame frames a payload as version 1 did: length and checksum only.
func v1frame(payload string) []byte {
	h := make([]byte, 8)
	binary.LittleEndian.PutUint32(h, uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum([]byte(payload), castagnoli))
	return append(h, payload...)
}

func TestReadsVersion1(t *testing.T) {
	data := []byte(Magic + "\x01\x00\x00\x00")
	data = append(append(data, v1frame("one")...), v1frame("two")...)
	got, res, err := readAll(data)
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two"}, got)
	assert.Equal(t, 1, res.Version)

	_, res, err = readAll(data[:len(data)-1])
	require.NoError(t, err, "a short last frame is torn")
	assert.Equal(t, int64(len(data)-(8+3)), res.End)
	assert.Equal(t, int64(8+3-1), res.Torn)

	damaged := bytes.Clone(data)
	damaged[len(damaged)-1] ^= 1
	_, _, err = readAll(damaged)
	var damage *Damage
	assert.ErrorAs(t, err, &damage, "a whole last frame with a bad checksum is damage")
}

func TestReadHeader(t *testing.T) {
	for _, tt := range []struct {
		data    []byte
		wantErr string
	}{
		{[]byte("GMWL\x07\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"), ""},
		{[]byte("GMWL\x06\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"), ""},
		{[]byte("GMWL\x05\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"), ""},
		{[]byte("GMWL\x04\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"), ""},
		{[]byte("GMWL\x03\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"), ""},
		{[]byte("GMWL\x02\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"), ""},
		{[]byte("GMWL\x02\x00\x00\x00\x09"), "cut short"},
		{[]byte("GMWL\x01\x00\x00\x00"), ""},
		{[]byte("GMWL\x63\x00\x00\x00"), "log format version 99"},
		{[]byte("XXXX\x02\x00\x00\x00"), "bad magic"},
		{[]byte("GMW"), "bad magic"},
	} {
		t.Run(fmt.Sprintf("%q", tt.data), func(t *testing.T) {
			_, err := ReadHeader(tt.data)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestReadStopsAtTheCallersError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	res, err := Read(logOf(t, "a", "b", "c"), func([]byte) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, res.Records, "the record that failed is not counted")
	assert.Equal(t, int64(HeaderSize+12+1), res.End, "End is where the failing record starts")
}
