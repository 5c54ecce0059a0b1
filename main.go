// Command membership serves the group membership service over HTTP.
package main

import "example.com/groupmembership/internal/server"

func main() { server.Main("membership", run) }
