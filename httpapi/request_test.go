package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzParseChangeForm checks parseChangeForm against url.ParseQuery: the same
// bodies accepted, the same values read.
func FuzzParseChangeForm(f *testing.F) {
	for _, seed := range []string{
		"users=[1,2]", "users=%5B1%5D&uid=7", "uid=1&users=[1]&x=y", "users=[1]&users=[2]", "users=%zz",
		"a;b=1&users=[1]", "=&&users=", "users=a+b%20c", "x=%", "users", "&&&",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		users, uid, err := parseChangeForm(body)
		form, wantErr := url.ParseQuery(body)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("parseChangeForm(%q) accepted what url.ParseQuery rejects: %v", body, wantErr)
			}
			return
		}
		if len(form["users"]) > 1 || len(form["uid"]) > 1 {
			if err == nil {
				t.Fatalf("parseChangeForm(%q) accepted a repeated parameter", body)
			}
			return
		}
		if err != nil {
			t.Fatalf("parseChangeForm(%q) rejected what url.ParseQuery accepts: %v", body, err)
		}
		if users != form.Get("users") || uid != form.Get("uid") {
			t.Fatalf("parseChangeForm(%q) = %q, %q; url.ParseQuery reads %q, %q", body, users, uid, form.Get("users"), form.Get("uid"))
		}
	})
}

func TestReadBodyShorterThanItsContentLength(t *testing.T) {
	r := httptest.NewRequest("POST", "/group-user/g", strings.NewReader("users=[1]"))
	r.ContentLength = 100 // the client promised more than it sent
	_, err := readBody(httptest.NewRecorder(), r, 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the body")
}

func TestObservedWriterHelpersIgnoreOtherWriters(t *testing.T) {
	// Outside observe, there is nothing to record into; that must not panic.
	var w http.ResponseWriter = httptest.NewRecorder()
	assert.NotPanics(t, func() {
		setActingUID(w, 7)
		recordInternalError(w, assert.AnError)
	})
}
