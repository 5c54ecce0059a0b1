// Command goparser tells which filters github.com/scim2/filter-parser/v2
// parses: it reads a JSON array of filters on stdin and writes a JSON
// array of booleans, one for each. make scim-conformance runs it beside
// the npm filter parsers.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	filter "github.com/scim2/filter-parser/v2"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "goparser:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	var filters []string
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&filters); err != nil {
		return fmt.Errorf("reading a JSON array of filters: %w", err)
	}
	parsed := make([]bool, len(filters))
	for i, f := range filters {
		// ParseFilterNumber: RFC 7644's compValue may be a number.
		_, err := filter.ParseFilterNumber([]byte(f))
		parsed[i] = err == nil
	}
	return json.NewEncoder(out).Encode(parsed)
}
