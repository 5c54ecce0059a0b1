// Package encode writes the HTTP API's replies: the JSON of member lists
// (AppendMembers), of groups and nestings (AppendGroups, AppendNested), of
// the change feed (AppendChanges), of the results of a write, a batch and
// POST /check, and the entity tags of lists (ETag, NoneMatch). Each writer
// has a function that measures its output first, so that a reply is
// built in a buffer of exactly its size. JSON strings are written by
// internal/jsonstr. It imports no other part of httpapi.
package encode
