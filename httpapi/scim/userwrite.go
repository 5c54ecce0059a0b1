package scim

import (
	"encoding/json"
	"net/http"

	"example.com/groupmembership/membership"
	"example.com/groupmembership/membership/account"
	"example.com/groupmembership/membership/directory"

	"example.com/groupmembership/httpapi/scim/wire"
)

// handleCreateUser answers POST /Users: a new account with the next free
// uid (Directory.FreeUID), refused with 409 uniqueness when another has
// its userName.
func handleCreateUser(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := wire.ParseResource(r, wire.UserResource)
		if err == nil {
			err = refuseKey(r)
		}
		var doc map[string]json.RawMessage
		if err == nil {
			doc, err = readDocument(r, d)
		}
		var a account.Account
		if err == nil {
			a, err = accountOf(doc)
		}
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		u, err := createUser(r, d.services(), a)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		writeUser(w, r, d.services(), http.StatusCreated, u, sel)
	})
}

// createUser writes a with a free uid, taking another when another
// write took its own first.
func createUser(r *http.Request, svc services, a account.Account) (directory.UserRecord, error) {
	ctx := r.Context()
	for range updateTries {
		uid, err := svc.dir.FreeUID(ctx)
		if err != nil {
			return directory.UserRecord{}, err
		}
		_, err = svc.Write(ctx, membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a,
			If: membership.Precondition{Empty: true}, Principal: principal(r)})
		if isPreconditionFailed(err) {
			continue // another write took the uid
		}
		if err != nil {
			return directory.UserRecord{}, err
		}
		return svc.dir.User(ctx, uid)
	}
	return directory.UserRecord{}, membership.Errorf(membership.CodeUnavailable, "other users were created with every free uid tried: try again")
}

// handleReplaceUser answers PUT /Users/{id}: the account as the body
// gives it, every attribute it leaves out cleared but active, which keeps
// its value.
func handleReplaceUser(d Deps) http.Handler {
	return updateUser(d, func(r *http.Request) (func(account.Account) (account.Account, error), error) {
		doc, err := readDocument(r, d)
		if err != nil {
			return nil, err
		}
		a, err := accountOf(doc)
		if err != nil {
			return nil, err
		}
		_, hasActive := doc["active"]
		return func(cur account.Account) (account.Account, error) {
			if !hasActive {
				a.Active = cur.Active
			}
			return a, nil
		}, nil
	})
}

// handlePatchUser answers PATCH /Users/{id}: its operations applied to the
// account, all or none, in one change.
func handlePatchUser(d Deps) http.Handler {
	return updateUser(d, func(r *http.Request) (func(account.Account) (account.Account, error), error) {
		ops, err := readPatch(r, d)
		if err != nil {
			return nil, err
		}
		id := r.PathValue("id")
		return func(cur account.Account) (account.Account, error) { return patchAccount(cur, id, ops) }, nil
	})
}

// updateUser answers a PUT or PATCH of a user: it reads the account,
// gives it to the change read made of the request, and writes what that
// returns, in one set_user; the write requires the account as read, or
// r's If-Match when it has one. A write that another overtook is made
// again from a new read, when r has no If-Match.
func updateUser(d Deps, read func(*http.Request) (func(account.Account) (account.Account, error), error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := wire.ParseResource(r, wire.UserResource)
		var uid membership.UID
		if err == nil {
			uid, err = userID(r)
		}
		var change func(account.Account) (account.Account, error)
		if err == nil {
			change, err = read(r)
		}
		var u directory.UserRecord
		var replayed bool
		if err == nil {
			u, replayed, err = writeUpdate(r, d.services(), uid, change)
		}
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		markReplayed(w, replayed)
		writeUser(w, r, d.services(), http.StatusOK, u, sel)
	})
}

// writeUpdate reads uid's account, applies change and writes the result,
// as updateUser says, and returns the account as written.
func writeUpdate(r *http.Request, svc services, uid membership.UID, change func(account.Account) (account.Account, error)) (directory.UserRecord, bool, error) {
	ctx := r.Context()
	cond, given, err := conditions(r, svc)
	if err != nil {
		return directory.UserRecord{}, false, err
	}
	for range updateTries {
		cur, err := svc.dir.User(ctx, uid)
		if err != nil {
			return directory.UserRecord{}, false, err
		}
		a, err := change(cur.Account)
		if err != nil {
			return directory.UserRecord{}, false, err
		}
		if !given {
			cond = membership.Precondition{Revisions: []membership.Revision{cur.Revision}}
		}
		write, err := keyed(r, membership.Write{Op: membership.OpSetUser, UIDs: []membership.UID{uid}, Account: &a, If: cond})
		if err != nil {
			return directory.UserRecord{}, false, err
		}
		res, err := svc.Write(ctx, write)
		switch {
		case isPreconditionFailed(err) && !given:
			continue
		case isPreconditionFailed(err):
			return directory.UserRecord{}, false, preconditionFailed(wire.UserResource)
		case err != nil:
			return directory.UserRecord{}, false, err
		}
		u, err := svc.dir.User(ctx, uid)
		return u, res.Replayed, err
	}
	return directory.UserRecord{}, false, membership.Errorf(membership.CodeUnavailable, "the user kept changing while it was written: try again")
}

// handleDeleteUser answers DELETE /Users/{id}: the account is deleted, and
// the user removed from every group.
func handleDeleteUser(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, err := userID(r)
		if err != nil {
			wire.WriteError(w, r, err)
			return
		}
		serveDelete(d, w, r, membership.Write{Op: membership.OpDeleteUser, UIDs: []membership.UID{uid}}, directory.UnknownUser(uid), wire.UserResource)
	})
}
