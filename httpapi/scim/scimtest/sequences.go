package scimtest

import (
	"context"
	"embed"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/groupmembership/httpapi/decode"
	"example.com/groupmembership/membership"
)

// sequences are the request sequences of the identity providers, each a
// JSON file: its steps, each a request, the status it gets, what its
// reply holds (want), the id it names to save for the steps after
// ({name} in their paths and bodies), and the service's state after it.
//
//go:embed testdata/*.json
var sequences embed.FS

type sequence struct {
	Source string `json:"source"`
	Steps  []step `json:"steps"`
}

type step struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
	Save   string          `json:"save"`
	Want   map[string]any  `json:"want"`
	State  struct {
		// Users are accounts by id: null for none.
		Users map[string]*struct {
			UserName    string `json:"userName"`
			DisplayName string `json:"displayName"`
			Active      bool   `json:"active"`
		} `json:"users"`
		// Groups are groups by id, as the service's own routes show them:
		// null for none.
		Groups map[string]*struct {
			DisplayName string   `json:"displayName"`
			Members     []string `json:"members"`
			Displays    []string `json:"displays"`
		} `json:"groups"`
	} `json:"state"`
}

// testSequences replays the sequences, comparing the service's state
// after each step with the one the file says.
func testSequences(t *testing.T, newStore NewStore) {
	for _, name := range []string{"okta", "entra"} {
		t.Run(name, func(t *testing.T) {
			data, err := sequences.ReadFile("testdata/" + name + ".json")
			require.NoError(t, err)
			var seq sequence
			require.NoError(t, json.Unmarshal(data, &seq))
			s := newServer(t, newStore)
			saved := map[string]string{}
			expandWith := func(text string, escape func(string) string) string {
				for k, v := range saved {
					text = strings.ReplaceAll(text, "{"+k+"}", escape(v))
				}
				return text
			}
			expand := func(text string) string { return expandWith(text, func(v string) string { return v }) }
			for i, st := range seq.Steps {
				rep := s.do(st.Method, "/scim/v2"+expandWith(st.Path, url.PathEscape), expand(string(st.Body)))
				require.Equal(t, st.Status, rep.status, "step %d, %s %s: %s", i, st.Method, st.Path, rep.body)
				for k, v := range st.Want {
					var want any
					require.NoError(t, json.Unmarshal([]byte(expand(mustJSON(t, v))), &want))
					assert.Equal(t, want, rep.json[k], "step %d: %s", i, k)
				}
				if st.Save != "" {
					saved[st.Save] = str(rep.json, "id")
				}
				s.checkState(t, i, st, expand)
			}
		})
	}
}

// checkState compares the service's state with what st says of it.
func (s *server) checkState(t *testing.T, i int, st step, expand func(string) string) {
	ctx := context.Background()
	for id, want := range st.State.Users {
		uid, ok := decode.ParseUID(expand(id))
		require.True(t, ok, "step %d: user %s", i, id)
		u, err := s.dir.User(ctx, uid)
		if want == nil {
			assert.Equal(t, membership.CodeUnknownUser, membership.ErrorCode(err), "step %d: user %s is gone", i, id)
			assert.Empty(t, s.groupsOf(uid), "step %d: in no group", i)
			continue
		}
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, want.UserName, u.Account.UserName, "step %d", i)
		assert.Equal(t, want.DisplayName, u.Account.DisplayName, "step %d", i)
		assert.Equal(t, want.Active, u.Account.Active, "step %d", i)
	}
	for id, want := range st.State.Groups {
		g, err := s.dir.Group(ctx, expand(id), nil)
		if want == nil {
			assert.Equal(t, membership.CodeUnknownGroup, membership.ErrorCode(err), "step %d: group %s is gone", i, id)
			continue
		}
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, want.DisplayName, g.Attributes.DisplayName, "step %d", i)
		members := s.members(expand(id))
		wantUIDs := []membership.UID{}
		for _, m := range want.Members {
			uid, _ := decode.ParseUID(expand(m))
			wantUIDs = append(wantUIDs, uid)
		}
		assert.ElementsMatch(t, wantUIDs, uids(members), "step %d: the members of %s", i, id)
		if want.Displays != nil {
			var nicks []string
			for _, m := range members {
				nicks = append(nicks, m.Nickname)
			}
			assert.Equal(t, want.Displays, nicks, "step %d: the nicknames of %s", i, id)
		}
	}
}

// mustJSON returns v as JSON text.
func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
