package decode

import (
	"net/url"
	"testing"
)

// FuzzParseChangeForm checks ParseChangeForm against url.ParseQuery: the same
// bodies accepted but those with a parameter other than users and uid,
// which are refused, the same values read.
func FuzzParseChangeForm(f *testing.F) {
	for _, seed := range []string{
		"users=[1,2]", "users=%5B1%5D&uid=7", "uid=1&users=[1]&x=y", "users=[1]&users=[2]", "users=%zz",
		"a;b=1&users=[1]", "=&&users=", "users=a+b%20c", "x=%", "users", "&&&",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		users, uid, err := ParseChangeForm(body, "users")
		form, wantErr := url.ParseQuery(body)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("ParseChangeForm(%q) accepted what url.ParseQuery rejects: %v", body, wantErr)
			}
			return
		}
		if len(form["users"]) > 1 || len(form["uid"]) > 1 {
			if err == nil {
				t.Fatalf("ParseChangeForm(%q) accepted a repeated parameter", body)
			}
			return
		}
		for key := range form {
			if key != "users" && key != "uid" {
				if err == nil {
					t.Fatalf("ParseChangeForm(%q) accepted the unknown parameter %q", body, key)
				}
				return
			}
		}
		if err != nil {
			t.Fatalf("ParseChangeForm(%q) rejected what url.ParseQuery accepts: %v", body, err)
		}
		if users != form.Get("users") || uid != form.Get("uid") {
			t.Fatalf("ParseChangeForm(%q) = %q, %q; url.ParseQuery reads %q, %q", body, users, uid, form.Get("users"), form.Get("uid"))
		}
	})
}
