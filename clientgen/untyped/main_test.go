package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUntypedGoFindsInterfaceAndAny(t *testing.T) {
	src := `package p

// Comments about any value, or an interface{}, are not code.
type Tuple = []interface{}

type Member struct {
	UID  int64  ` + "`json:\"uid\"`" + `
	Note string ` + "`json:\"note\"` // any note" + `
	Data any
}

type Document map[string]interface{}

var text = "interface{} and any in a string"

func parse() { var dest map[string]interface{}; _ = dest }
`
	findings, err := untypedGo("p.go", strings.NewReader(src), map[string]bool{"Document": true})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"p.go:4: type Tuple = []interface{}",
		"p.go:9: Data any",
		"p.go:16: func parse() { var dest map[string]interface{}; _ = dest }",
	}, findings)
}

func TestUntypedTSFindsUnknown(t *testing.T) {
	src := `export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description An unknown group is empty. */
        Change: {
            op: unknown;
            rev: number;
        };
        OpenAPIDocument: {
            [key: string]: unknown;
        };
        Empty: Record<string, never>;
        Pair: [number, unknown];
    };
    responses: {
        BadRequest: {
            headers: {
                "X-Request-ID": string;
                [name: string]: unknown;
            };
            content: {
                "application/json": { [key: string]: unknown };
            };
        };
    };
}
export type $defs = Record<string, never>;
`
	findings, err := untypedTS("s.ts", strings.NewReader(src), map[string]bool{"OpenAPIDocument": true})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"s.ts:6: op: unknown;",
		"s.ts:12: Empty: Record<string, never>;",
		"s.ts:13: Pair: [number, unknown];",
		`s.ts:22: "application/json": { [key: string]: unknown };`,
	}, findings)
}

func TestUntypedTSAllowsOnlyTheNamedBlock(t *testing.T) {
	src := `        OpenAPIDocument: {
            [key: string]: unknown;
        };
        Next: {
            [key: string]: unknown;
        };
`
	findings, err := untypedTS("s.ts", strings.NewReader(src), map[string]bool{"OpenAPIDocument": true})
	require.NoError(t, err)
	assert.Equal(t, []string{"s.ts:5: [key: string]: unknown;"}, findings)
}
