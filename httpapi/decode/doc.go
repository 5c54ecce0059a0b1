// Package decode reads the bodies of the HTTP API's requests into domain
// values: the users and subgroups of a change (ParseUsers, ParseSubgroups),
// the checks of POST /check (ParseChecks), a change's form or JSON object
// (ParseChangeForm, ParseChangeJSON) and the JSON objects and strings of
// POST /batch (JSONObject, JSONString). It parses; the limits it applies are
// those it needs while reading (the number of elements), and the values it
// returns are validated by membership.Service. It imports no other part of
// httpapi.
package decode
