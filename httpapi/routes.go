package httpapi

import (
	"net/http"

	"example.com/groupmembership/membership"
)

// addRoutes registers the whole API surface. The method-less patterns catch
// the methods a path does not support, and "/" every unknown path, so that
// those answers are JSON too and not the mux's plain-text ones.
func addRoutes(mux *http.ServeMux, svc *membership.Service, maxBodyBytes int64, cache *listCache) {
	mux.Handle("POST /group-user/{groupID}", handleChangeMembers(svc.AddMembers, maxBodyBytes))
	mux.Handle("DELETE /group-user/{groupID}", handleChangeMembers(svc.RemoveMembers, maxBodyBytes))
	mux.Handle("GET /group-user/{groupID}", handleListMembers(svc, cache)) // GET patterns serve HEAD too
	mux.Handle("/group-user/{groupID}", handleMethodNotAllowed("GET, HEAD, POST, DELETE"))
	mux.Handle("GET /group-user/{groupID}/{uid}", handleMember(svc))
	mux.Handle("/group-user/{groupID}/{uid}", handleMethodNotAllowed("GET, HEAD"))

	mux.Handle("GET /healthz", handleHealthz())
	mux.Handle("/healthz", handleMethodNotAllowed("GET, HEAD"))

	mux.Handle("/", handleNotFound())
}
