package httpapi

import (
	_ "embed"
	"net/http"
	"strings"

	"example.com/groupmembership/membership"
)

// route is one method on one path of the API.
type route struct {
	method  string
	path    string
	handler http.Handler
}

// routes is the whole API surface. openapi.json documents exactly these; a
// test holds the two together. GET routes serve HEAD too.
func routes(svc *membership.Service, maxBodyBytes int64, cache *listCache) []route {
	return []route{
		{"GET", "/group-user/{groupID}", handleListMembers(svc, cache)},
		{"POST", "/group-user/{groupID}", handleChangeMembers(svc.AddMembers, maxBodyBytes)},
		{"DELETE", "/group-user/{groupID}", handleChangeMembers(svc.RemoveMembers, maxBodyBytes)},
		{"GET", "/group-user/{groupID}/{uid}", handleMember(svc)},
		{"GET", "/user-group/{uid}", handleUserGroups(svc)},
		{"GET", "/healthz", handleHealthz()},
		{"GET", "/openapi.json", handleOpenAPI()},
	}
}

// addRoutes registers rs on mux. Each path also gets a method-less pattern
// that answers the methods it does not serve with a JSON 405 and its Allow
// header, and "/" answers every unknown path with a JSON 404: the mux's own
// answers are plain text.
func addRoutes(mux *http.ServeMux, rs []route) {
	allowed := map[string][]string{}
	var paths []string
	for _, r := range rs {
		mux.Handle(r.method+" "+r.path, r.handler)
		if allowed[r.path] == nil {
			paths = append(paths, r.path)
		}
		allowed[r.path] = append(allowed[r.path], r.method)
		if r.method == http.MethodGet {
			allowed[r.path] = append(allowed[r.path], http.MethodHead)
		}
	}
	for _, p := range paths {
		mux.Handle(p, handleMethodNotAllowed(strings.Join(allowed[p], ", ")))
	}
	mux.Handle("/", handleNotFound())
}

//go:embed openapi.json
var openAPIDocument []byte

// handleOpenAPI serves the OpenAPI 3.1 document of the API.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, openAPIDocument)
	})
}
