package storetest

import "example.com/groupmembership/membership"

// Keyed returns w with the Idempotency key, fingerprinted as the Service
// does.
func Keyed(w membership.Write, key string) membership.Write {
	w.Idem = membership.Idempotency{Key: key, Fingerprint: membership.FingerprintWrite(w)}
	return w
}

// KeyedAdd returns an add of uids to group with the Idempotency key,
// fingerprinted as the Service does.
func KeyedAdd(group, key string, uids ...membership.UID) membership.Write {
	return Keyed(membership.Write{Op: membership.OpAdd, GroupID: group, Users: UsersOf(uids...)}, key)
}

// KeyedBatch returns b with the Idempotency key, fingerprinted as the
// Service does.
func KeyedBatch(b membership.Batch, key string) membership.Batch {
	b.Idem = membership.Idempotency{Key: key, Fingerprint: membership.FingerprintBatch(b)}
	return b
}
