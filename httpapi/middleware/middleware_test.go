package middleware

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"example.com/groupmembership/membership/groupids"
	"example.com/groupmembership/membership/scope"
)

func TestObservedWriterHelpersIgnoreOtherWriters(t *testing.T) {
	// Outside Observe, there is nothing to record into; that must not panic.
	var w http.ResponseWriter = httptest.NewRecorder()
	assert.NotPanics(t, func() {
		SetActingUID(w, 7)
		RecordInternalError(w, assert.AnError)
	})
	assert.Equal(t, []string{"18446744073709551615"}, UintField(w, math.MaxUint64))
	assert.Equal(t, "42", string(CountBody(w, 42)))
}

// The numbers a reply is made of are made in the writer's scratch while it
// has room, each left as it was by those made after it, and in memory of
// their own after that; a header value made there takes an Add without
// writing over its neighbour.
func TestObservedWriterScratch(t *testing.T) {
	o := &observedWriter{ResponseWriter: httptest.NewRecorder()}
	id := newRequestIDs().next(o)
	assert.True(t, wellFormedRequestID(id), id)
	idText := strings.Clone(id)
	var fields [][]string
	var bodies [][]byte
	for i := range 6 {
		fields = append(fields, UintField(o, math.MaxUint64-uint64(i)))
		bodies = append(bodies, CountBody(o, 1000+i))
	}
	for i := range 6 {
		assert.Equal(t, []string{strconv.FormatUint(math.MaxUint64-uint64(i), 10)}, fields[i], "field %d", i)
		assert.Equal(t, strconv.Itoa(1000+i), string(bodies[i]), "body %d", i)
	}
	assert.Equal(t, len(o.fields), int(o.fieldsUsed), "the fields made in the scratch")
	assert.Greater(t, int(o.scratchUsed), len(o.scratch)-20, "the scratch is full")
	h := http.Header{"A": fields[0], "B": fields[1]}
	h.Add("A", "more")
	assert.Equal(t, []string{"18446744073709551615", "more"}, h["A"])
	assert.Equal(t, []string{"18446744073709551614"}, h["B"])
	assert.Equal(t, idText, id, "the id is left as it was")
}

func TestPrincipalNameOfAScopeOrANameAlone(t *testing.T) {
	ctx := context.Background()
	assert.Empty(t, PrincipalName(ctx))
	assert.Equal(t, "dashboard", PrincipalName(WithPrincipal(ctx, "dashboard")))
	s := scope.New("sync-job", scope.Write, groupids.All())
	assert.Equal(t, "sync-job", PrincipalName(scope.With(ctx, s)))
}
