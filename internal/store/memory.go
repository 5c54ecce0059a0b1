// Package store holds the implementations of membership.Store.
package store

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"example.com/groupmembership/membership"
)

// Memory is a membership.Store that keeps everything in memory: each group as
// a set of uids, and one nickname directory shared by all groups. Everything
// is lost when the process exits.
type Memory struct {
	// mu guards groups and nicknames. One lock for the whole store keeps each
	// call atomic and the counts exact under contention.
	mu sync.RWMutex
	// groups maps a group id to its members. A group with no members is
	// deleted, so that removing everyone frees the memory.
	groups map[string]map[membership.UID]struct{}
	// nicknames holds the users' nicknames. A user without an entry has the
	// nickname "", so "" is never stored.
	nicknames map[membership.UID]string
}

var _ membership.Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{
		groups:    make(map[string]map[membership.UID]struct{}),
		nicknames: make(map[membership.UID]string),
	}
}

// AddMembers implements membership.Store.
func (m *Memory) AddMembers(_ context.Context, groupID string, users []membership.User) (int, error) {
	if len(users) == 0 {
		return 0, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	members := m.groups[groupID]
	if members == nil {
		members = make(map[membership.UID]struct{}, len(users))
		m.groups[groupID] = members
	}
	added := 0
	for _, u := range users {
		if u.HasNickname {
			if u.Nickname == "" {
				delete(m.nicknames, u.UID)
			} else {
				m.nicknames[u.UID] = u.Nickname
			}
		}
		if _, ok := members[u.UID]; !ok {
			members[u.UID] = struct{}{}
			added++
		}
	}
	return added, nil
}

// RemoveMembers implements membership.Store.
func (m *Memory) RemoveMembers(_ context.Context, groupID string, uids []membership.UID) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	members := m.groups[groupID]
	if members == nil {
		return 0, nil
	}
	removed := 0
	for _, uid := range uids {
		if _, ok := members[uid]; ok {
			delete(members, uid)
			removed++
		}
	}
	if len(members) == 0 {
		delete(m.groups, groupID)
	}
	return removed, nil
}

// ListMembers implements membership.Store.
func (m *Memory) ListMembers(_ context.Context, groupID string) ([]membership.Member, error) {
	m.mu.RLock()
	members := m.groups[groupID]
	list := make([]membership.Member, 0, len(members))
	for uid := range members {
		list = append(list, membership.Member{UID: uid, Nickname: m.nicknames[uid]})
	}
	m.mu.RUnlock()
	slices.SortFunc(list, func(a, b membership.Member) int {
		return cmp.Compare(a.UID, b.UID)
	})
	return list, nil
}
