package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/internal/budget"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/nestreads"
)

// The whole list of a user's groups takes its sorting memory from the
// replies budget before it is built: while other replies hold the budget it
// is refused; alone it is sent, whatever its size; a page needs no sorting
// memory.
func TestUserGroupsTakeTheirSortingFromTheBudget(t *testing.T) {
	svc := membership.NewService(memory.New(), membership.ServiceOptions{MaxUsers: 10})
	for i := range 200 {
		_, err := svc.Write(context.Background(), membership.Write{Op: membership.OpAdd, GroupID: fmt.Sprintf("g%03d", i), Users: usersOf("[7]")})
		require.NoError(t, err)
	}
	replies := budget.New(1000)
	h := handleUserGroups(svc, nestreads.NewService(svc), replies)
	get := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.SetPathValue("uid", "7")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	w := get("/user-group/7")
	require.Equal(t, http.StatusOK, w.Code, "alone, a list over the whole budget is sent")
	assert.Equal(t, "200", w.Header().Get("X-Total-Count"))
	assert.Zero(t, replies.Used(), "and its memory given back")

	another, ok := replies.Take(10) // another reply being sent
	require.True(t, ok)
	w = get("/user-group/7")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, int64(10), replies.Used(), "the refused list took nothing")
	w = get("/user-group/7?limit=5&after=g100")
	require.Equal(t, http.StatusOK, w.Code, "a page is small")
	assert.JSONEq(t, `["g101","g102","g103","g104","g105"]`, w.Body.String())
	another.Release()
	assert.Zero(t, replies.Used())
}

// usersOf decodes users JSON, for tests that build requests as text.
func usersOf(usersJSON string) []membership.User {
	users, err := decode.ParseUsers(usersJSON, 1<<20)
	if err != nil {
		panic(err)
	}
	return users
}
