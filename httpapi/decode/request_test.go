package decode

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/membership"
)

func TestReadBodyShorterThanItsContentLength(t *testing.T) {
	r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader("users=[1]"))
	r.ContentLength = 100 // the client promised more than it sent
	bodies := budget.New(1 << 20)
	_, _, err := ReadBody(r, 1000, bodies)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the body")
	assert.Zero(t, bodies.Used(), "a failed read gives its memory back")
}

// A body's memory follows the bytes that arrived, never the Content-Length
// the client announced: a slow client that announced a mebibyte and sent ten
// bytes holds the first small buffer only.
func TestReadBodyMemoryFollowsTheBytesReceived(t *testing.T) {
	pr, pw := io.Pipe()
	r := httptest.NewRequest("POST", "/group-user/g", pr)
	r.ContentLength = 1 << 20
	bodies := budget.New(64 << 20)
	type read struct {
		body  []byte
		lease budget.Lease
		err   error
	}
	done := make(chan read, 1)
	go func() {
		body, lease, err := ReadBody(r, 1<<20, bodies)
		done <- read{body, lease, err}
	}()
	_, err := pw.Write([]byte("users=[1,2"))
	require.NoError(t, err) // the pipe returns once ReadBody has taken the bytes
	assert.Equal(t, int64(firstBodyBuffer), bodies.Used(), "ten bytes received: one small buffer held")

	rest := bytes.Repeat([]byte(",3"), (1<<20-10)/2)
	go func() {
		_, _ = pw.Write(rest)
		pw.Close()
	}()
	got := <-done
	require.NoError(t, got.err)
	assert.Len(t, got.body, 10+len(rest))
	assert.Equal(t, int64(cap(got.body)), bodies.Used(), "what the body holds is taken")
	assert.Equal(t, int64(cap(got.body)), got.lease.Held())
	assert.LessOrEqual(t, cap(got.body), 1<<20+1)
	got.lease.Release()
	assert.Zero(t, bodies.Used())
}

// Past the budget of all bodies, a new body is refused at once, before any
// of it is read; a body that outgrows what is left is refused too.
func TestReadBodyRefusedWhenTheBudgetIsSpent(t *testing.T) {
	bodies := budget.New(4096)
	others, ok := bodies.Take(4096) // other bodies hold it all
	require.True(t, ok)
	r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader("users=[1]"))
	_, _, err := ReadBody(r, 1000, bodies)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	others.Release()

	others, ok = bodies.Take(4096 - firstBodyBuffer) // room for the first buffer only
	require.True(t, ok)
	r = httptest.NewRequest("POST", "/group-user/g", strings.NewReader(strings.Repeat("x", 2000)))
	_, _, err = ReadBody(r, 1<<20, bodies)
	assert.Equal(t, membership.CodeUnavailable, membership.ErrorCode(err))
	assert.Equal(t, int64(4096-firstBodyBuffer), bodies.Used(), "the refused body gave back what it held")
}

func TestReadBodyTooLargeWithoutContentLength(t *testing.T) {
	bodies := budget.New(1 << 20)
	r := httptest.NewRequest("POST", "/group-user/g", io.MultiReader(strings.NewReader(strings.Repeat("x", 5000))))
	r.ContentLength = -1 // chunked: the size is known only at the end
	_, _, err := ReadBody(r, 4000, bodies)
	assert.Equal(t, membership.CodeBodyTooLarge, membership.ErrorCode(err))
	assert.Zero(t, bodies.Used())

	r = httptest.NewRequest("POST", "/group-user/g", io.MultiReader(strings.NewReader(strings.Repeat("x", 4000))))
	r.ContentLength = -1
	body, lease, err := ReadBody(r, 4000, bodies)
	require.NoError(t, err)
	assert.Len(t, body, 4000, "exactly the limit is accepted")
	lease.Release()
	assert.Zero(t, bodies.Used())
}

// The users text decoded into a copy (an escaped form value, a JSON body)
// is counted with the body; a plain form value points into the body and is
// not counted twice.
func TestReadChangeRequestCountsDecodedCopies(t *testing.T) {
	for _, tt := range []struct {
		name, contentType, body string
		copied                  bool
	}{
		{"plain form", "", "users=[1,2]", false},
		{"escaped form", "", "users=%5B1%2C2%5D", true},
		{"JSON", "application/json", `{"users":[1,2]}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bodies := budget.New(1 << 20)
			r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			req, err := ReadChangeRequest(httptest.NewRecorder(), r, "users", 1000, bodies)
			require.NoError(t, err)
			assert.Equal(t, "[1,2]", req.List)
			want := int64(len(tt.body) + 1) // the buffer: Content-Length + 1
			if tt.copied {
				want += int64(len(req.List))
			}
			assert.Equal(t, want, req.Lease.Held())
			assert.Equal(t, want, bodies.Used())
			req.Lease.Release()
			assert.Zero(t, bodies.Used())
		})
	}
}
