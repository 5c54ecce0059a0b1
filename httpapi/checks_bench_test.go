package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"example.com/groupmembership/httpapi"
	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/internal/store/storetest"
	"example.com/groupmembership/membership"
)

// BenchmarkCheck100 answers 100 membership checks, half of them members,
// over 100 groups of 1000 members: in one POST /check (check), and in 100
// GET /group-user/{groupID}/{uid} (single), through the whole handler
// (metrics on, access log off) as a client sees it, but for the network.
// ns/check compares the two.
func BenchmarkCheck100(b *testing.B) {
	const groups, members, pairs = 100, 1000, 100
	st := memory.New()
	for g := range groups {
		users := make([]membership.User, members)
		for i := range users {
			users[i] = membership.User{UID: membership.UID(2*i + 1)} // odd uids
		}
		if _, err := storetest.Add(context.Background(), st, "group-"+strconv.Itoa(g), users); err != nil {
			b.Fatal(err)
		}
	}
	h := httpapi.NewHandler(membership.NewService(st, membership.ServiceOptions{}), httpapi.Options{})
	rng := rand.New(rand.NewPCG(5, 6))
	var elems []string
	var singles []*http.Request
	for i := range pairs {
		group := "group-" + strconv.Itoa(rng.IntN(groups))
		uid := 2*rng.IntN(members) + 1 + i%2 // every other one not a member
		elems = append(elems, fmt.Sprintf(`{"group":%q,"uid":%d}`, group, uid))
		singles = append(singles, httptest.NewRequest("GET", "/group-user/"+group+"/"+strconv.Itoa(uid), nil))
	}
	body := `{"checks":[` + strings.Join(elems, ",") + `]}`
	if w := do(h, "POST", "/check", body, "application/json"); w.Code != http.StatusOK || strings.Count(w.Body.String(), "true") != pairs/2 {
		b.Fatalf("POST /check: %d %s", w.Code, w.Body)
	}

	b.Run("check", func(b *testing.B) {
		r := httptest.NewRequest("POST", "/check", nil)
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = int64(len(body))
		reader := strings.NewReader(body)
		w := &discardWriter{header: http.Header{}}
		for b.Loop() {
			reader.Reset(body)
			r.Body = io.NopCloser(reader)
			clear(w.header)
			h.ServeHTTP(w, r)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pairs, "ns/check")
	})
	b.Run("single", func(b *testing.B) {
		w := &discardWriter{header: http.Header{}}
		for b.Loop() {
			for _, r := range singles {
				clear(w.header)
				h.ServeHTTP(w, r)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pairs, "ns/check")
	})
}
