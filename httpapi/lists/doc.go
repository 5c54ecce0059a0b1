// Package lists holds the encoded member lists the HTTP API sends: a
// group's whole list is encoded once per revision (EncodedLists.Whole) and
// shared by every reply that sends it or a suffix of it, kept in a cache
// bounded in bytes (Cache), and every reply body is taken from the replies
// budget before it is built (EncodeBounded). It imports encode, and no
// other part of httpapi.
package lists
