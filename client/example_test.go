package client_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"example.com/groupmembership/client"
	"example.com/groupmembership/membershiptest"
)

// start starts the service in-process, for the examples; a program would
// call client.New with the service's URL instead.
func start() (*membershiptest.Server, *client.Client) {
	srv, err := membershiptest.Start()
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	return srv, c
}

// Add users to a group, then list its members, a page at a time.
func Example() {
	srv, c := start()
	defer srv.Close()
	ctx := context.Background()

	res, err := c.Add(ctx, "admins", []client.User{
		client.NewUser(1),
		client.NewUser(2).WithNickname("Bob"),
		client.NewUser(3).WithNickname("Cy"),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("added", res.Count, "at revision", res.Revision)

	// Members follows the pages (of 2 here) until the end of the group.
	for m, err := range c.Members(ctx, "admins", client.ListOptions{Limit: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %q\n", m.UID, m.Nickname)
	}
	// Output:
	// added 3 at revision 1
	// 1 ""
	// 2 "Bob"
	// 3 "Cy"
}

// Make a group exactly the members a list of yours says, without losing a
// change made by someone else between the read and the write: read the
// group's ETag, replace only while it holds (If-Match), and on 412 read
// again and decide again.
func ExampleClient_Replace() {
	srv, c := start()
	defer srv.Close()
	ctx := context.Background()
	if _, err := c.Add(ctx, "oncall", client.Users(1, 2)); err != nil {
		log.Fatal(err)
	}

	// The sync: the group must hold 3, and keep whoever is on call now
	// but 1, who left.
	want := func(members []client.Member) []client.User {
		users := client.Users(3)
		for _, m := range members {
			if m.UID != 1 && m.UID != 3 {
				users = append(users, client.NewUser(m.UID))
			}
		}
		return users
	}
	for attempt := 1; ; attempt++ {
		page, err := c.ListPage(ctx, "oncall", client.ListOptions{})
		if err != nil {
			log.Fatal(err)
		}
		if attempt == 1 { // someone else adds 4 between our read and our write
			if _, err := c.Add(ctx, "oncall", client.Users(4)); err != nil {
				log.Fatal(err)
			}
		}
		res, err := c.Replace(ctx, "oncall", want(page.Items), client.IfMatch(page.ETag))
		if client.IsPreconditionFailed(err) {
			fmt.Println("attempt", attempt, "412: the group changed, reading it again")
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("attempt", attempt, "added", res.Count, "removed", res.Removed)
		break
	}
	var uids []int64
	for m, err := range c.Members(ctx, "oncall", client.ListOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		uids = append(uids, m.UID)
	}
	fmt.Println(uids)
	// Output:
	// attempt 1 412: the group changed, reading it again
	// attempt 2 added 1 removed 1
	// [2 3 4]
}

// Follow the change feed: every change after a revision, oldest first,
// with long polls, until the loop stops or the context ends.
func ExampleClient_Follow() {
	srv, c := start()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	pos, err := c.Latest(ctx) // where the feed is now: follow from there
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Add(ctx, "ops", []client.User{client.NewUser(5).WithNickname("Eve"), client.NewUser(6)}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Remove(ctx, "ops", []int64{6}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.DeleteGroup(ctx, "ops", client.WithActor(42)); err != nil {
		log.Fatal(err)
	}

	n := 0
	for ch, err := range c.Follow(ctx, pos.Revision, client.FromEpoch(pos.Epoch)) {
		if client.NeedsResync(err) {
			log.Fatal("changes were lost: list the groups again, and follow from there: ", err)
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ch.Revision, ch.Op, ch.Group, ch.UIDs, ch.Actor)
		if n++; n == 3 {
			break
		}
	}
	// Output:
	// 1 add ops [5 6] 0
	// 2 remove ops [6] 0
	// 3 delete_group ops [] 42
}

// Read your own writes: the client sends the revision of its last write
// in X-Min-Revision on its reads, so that a read sees the write on
// whichever instance behind a load balancer it reaches.
func ExampleWithReadYourWrites() {
	srv, _ := start()
	defer srv.Close()
	ctx := context.Background()
	c, err := client.New(srv.URL, client.WithReadYourWrites())
	if err != nil {
		log.Fatal(err)
	}

	res, err := c.Add(ctx, "admins", client.Users(7))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote revision", res.Revision, "reads ask for", c.MinRevision())
	m, ok, err := c.Member(ctx, "admins", 7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("member:", ok, m.UID)
	groups, err := c.Check(ctx, []client.Check{{Group: "admins", UID: 7}, {Group: "admins", UID: 8}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(groups.Results, slices.Contains(groups.Results, true))
	// Output:
	// wrote revision 1 reads ask for 1
	// member: true 7
	// [true false] true
}
