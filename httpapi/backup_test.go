package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// Backups: HEAD takes no copy; GET is one at a time, and spaced by nine
// times the copy's time, so that a client asking in a loop cannot starve
// writes: without the spacing, a HEAD loop cuts writes twentyfold at a
// million memberships.
func TestBackupsAreSpacedAndHEADTakesNoCopy(t *testing.T) {
	st := memory.New()
	svc := membership.NewService(st, membership.ServiceOptions{MaxUsers: 10})
	_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: "g", Users: []membership.User{{UID: 1}}})
	require.NoError(t, err)
	clock := time.Unix(1000, 0)
	copies := 0
	backup := func() Backup {
		copies++
		clock = clock.Add(time.Second) // the copy takes a second
		return st.Backup()
	}
	b := &backups{now: func() time.Time { return clock }}
	h := handleBackup(svc, backup, b)
	do := func(method string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, "/backup", nil))
		return w
	}

	w := do("HEAD")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "1", w.Header().Get("X-Revision"))
	assert.Zero(t, copies, "HEAD takes no copy")

	w = do("GET")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "1", w.Header().Get("X-Revision"))
	assert.Equal(t, 1, copies)
	assert.NotEmpty(t, w.Body.Bytes())

	clock = clock.Add(8 * time.Second)
	w = do("GET")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "9 s must pass after a copy of 1 s")
	assert.Contains(t, w.Body.String(), "backups are spaced")
	assert.Equal(t, 1, copies)

	clock = clock.Add(time.Second)
	assert.Equal(t, http.StatusOK, do("GET").Code)
	assert.Equal(t, 2, copies)

	b.mu.Lock() // a backup being sent
	clock = clock.Add(time.Minute)
	w = do("GET")
	b.mu.Unlock()
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), "one at a time")
}
