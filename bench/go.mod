module example.com/groupmembership/bench

go 1.25.0

require example.com/groupmembership v0.0.0-00010101000000-000000000000

replace example.com/groupmembership => ../
