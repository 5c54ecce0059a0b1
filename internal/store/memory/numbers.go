package memory

import (
	"sync"
)

// groupNumbers guards the ids of the groups' slots (group.Table): a
// group's number is its slot's, and the reverse index and the due set name
// a group by its number, so that the readers of a number's id (a user's
// groups, the expirer) read it under mu, while a group is given a slot, or
// its slot freed, under mu and its shard's lock.
type groupNumbers struct {
	mu sync.RWMutex
}
