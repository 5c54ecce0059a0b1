// Package decode reads the HTTP API's requests into domain values: the
// body of a change (ReadChangeRequest: a form or a JSON object, read within
// the bodies budget), the users and subgroups it names
// (ParseUsers, ParseSubgroups), the checks of POST /check (ReadChecks,
// ParseChecks), the changes of POST /batch (ReadBatch), the If-Match and
// If-None-Match of a write (WriteCondition), a query string (ParseQuery),
// and a uid (ParseUID). It parses; the limits it applies are those it
// needs while reading (body bytes, the number of elements), and the values
// it returns are validated by membership.Service (the reads of groups in
// groups by nestreads.Service). It imports middleware (for the HTTP error
// codes and the acting uid) and encode (for entity tags).
package decode
