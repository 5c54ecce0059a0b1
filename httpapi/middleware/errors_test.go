package middleware

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/membership"
)

func TestErrorBodiesEscapeLikeTheLists(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, httptest.NewRequest("GET", "/", nil), membership.Errorf(membership.CodeInvalidUsers, `a <b> & "c" \ é`+"\n"))
	assert.Equal(t, `{"error":{"code":"invalid_users","message":"a <b> & \"c\" \\ é\n"}}`, w.Body.String())
	var decoded struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &decoded))
	assert.Equal(t, "a <b> & \"c\" \\ é\n", decoded.Error.Message)
}
