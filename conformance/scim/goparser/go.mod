module example.com/groupmembership/conformance/scim/goparser

go 1.24

require github.com/scim2/filter-parser/v2 v2.3.1

require github.com/q-uint/parser v0.3.1 // indirect
