package memory_test

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"example.com/groupmembership/internal/store/memory"
	"example.com/groupmembership/membership"
)

// BenchmarkMemoryUserGroups lists the groups of a user in 10 groups among
// 1,000,000 groups of 3 (users 1 to 300,000): the reverse index's read of
// a user, and each group number's id.
func BenchmarkMemoryUserGroups(b *testing.B) {
	s := memory.New()
	ctx := context.Background()
	const groups, users = 1_000_000, 300_000
	for g := range groups {
		us := make([]membership.User, 3)
		for i := range us {
			us[i] = membership.User{UID: membership.UID((g*3+i)%users + 1)}
		}
		if _, err := s.Write(ctx, membership.Write{Op: membership.OpAdd, GroupID: fmt.Sprint("g", g), Users: us}); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	list := func(_ int, ids iter.Seq[string]) {
		for range ids {
			n++
		}
	}
	uid := membership.UID(1)
	b.ResetTimer()
	for b.Loop() {
		if err := s.UserGroups(ctx, uid, membership.GroupListOptions{}, list); err != nil {
			b.Fatal(err)
		}
		uid = uid%users + 1
	}
	if n/b.N != 10 {
		b.Fatalf("%d groups a user, want 10", n/b.N)
	}
}
