// Command untyped reports the values generated code leaves untyped: in Go
// (oapi-codegen), every interface{} and any; in TypeScript
// (openapi-typescript), every unknown and Record<string, never>. Each is a
// place where the OpenAPI document did not say what a value is, so that a
// client cannot use it without a cast. It prints each as file:line: code,
// and exits 1 when it found any.
//
// Usage:
//
//	untyped [-allow Name,...] FILE.go|FILE.ts ...
//
// -allow names the schemas that may stay untyped: in Go the type declared
// with that name, in TypeScript the member of that name (its block).
//
// Two things openapi-typescript writes for every document are not reported:
// the index signature [name: string]: unknown in the headers of every
// response (the headers the document does not name), and the top-level
// webhooks and $defs, Record<string, never> when a document has none.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	allowList := flag.String("allow", "", "comma-separated `names` of schemas that may stay untyped")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: untyped [-allow Name,...] FILE.go|FILE.ts ...")
		os.Exit(2)
	}
	allowed := map[string]bool{}
	for _, name := range strings.Split(*allowList, ",") {
		if name != "" {
			allowed[name] = true
		}
	}
	found := 0
	for _, name := range flag.Args() {
		findings, err := check(name, allowed)
		if err != nil {
			fmt.Fprintln(os.Stderr, "untyped:", err)
			os.Exit(2)
		}
		for _, f := range findings {
			fmt.Println(f)
		}
		found += len(findings)
	}
	if found > 0 {
		fmt.Printf("untyped: %d untyped values in the generated code: the OpenAPI document should say what they are\n", found)
		os.Exit(1)
	}
}

// check returns the untyped values of the file name, a .go or a .ts file,
// outside the declarations allowed.
func check(name string, allowed map[string]bool) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch {
	case strings.HasSuffix(name, ".go"):
		return untypedGo(name, f, allowed)
	case strings.HasSuffix(name, ".ts"):
		return untypedTS(name, f, allowed)
	}
	return nil, fmt.Errorf("%s: neither a .go nor a .ts file", name)
}

// untypedGo returns each interface{} and each any of the Go source src
// outside the type declarations allowed, as file:line: the line.
func untypedGo(name string, src io.Reader, allowed map[string]bool) ([]string, error) {
	text, err := io.ReadAll(src)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, text, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(text), "\n")
	var findings []string
	ast.Inspect(file, func(n ast.Node) bool {
		untyped := false
		switch n := n.(type) {
		case *ast.TypeSpec:
			return !allowed[n.Name.Name]
		case *ast.InterfaceType:
			untyped = len(n.Methods.List) == 0
		case *ast.Ident:
			untyped = n.Name == "any"
		}
		if untyped {
			p := fset.Position(n.Pos())
			findings = append(findings, fmt.Sprintf("%s:%d: %s", p.Filename, p.Line, strings.TrimSpace(lines[p.Line-1])))
		}
		return true
	})
	return findings, nil
}

var (
	tsUntyped     = regexp.MustCompile(`\bunknown\b|Record<string, never>`)
	tsComment     = regexp.MustCompile(`^\s*(/\*|\*|//)`)
	tsHeaderIndex = regexp.MustCompile(`^\s*\[name: string\]: unknown;$`)
	tsEmptyTop    = regexp.MustCompile(`^export type (webhooks|\$defs) = Record<string, never>;$`)
	tsMember      = regexp.MustCompile(`^(\s*)"?([A-Za-z0-9_$-]+)"?\??: (.*)$`)
)

// untypedTS returns each line of the TypeScript src with an unknown or a
// Record<string, never> outside comments and the members allowed, as
// file:line: the line. openapi-typescript writes one member a line, and a
// member's block ends at the first line as indented as the member's name.
func untypedTS(name string, src io.Reader, allowed map[string]bool) ([]string, error) {
	var findings []string
	inAllowed := "" // the indentation of the allowed member whose block this is
	scanner := bufio.NewScanner(src)
	scanner.Buffer(nil, 1<<20)
	for line := 1; scanner.Scan(); line++ {
		text := scanner.Text()
		if inAllowed != "" {
			if strings.HasPrefix(text, inAllowed) && !strings.HasPrefix(text, inAllowed+" ") {
				inAllowed = "" // the block's last line
			}
			continue
		}
		if m := tsMember.FindStringSubmatch(text); m != nil && allowed[m[2]] {
			if strings.HasSuffix(m[3], "{") {
				inAllowed = m[1]
			}
			continue
		}
		if !tsUntyped.MatchString(text) || tsComment.MatchString(text) ||
			tsHeaderIndex.MatchString(text) || tsEmptyTop.MatchString(text) {
			continue
		}
		findings = append(findings, fmt.Sprintf("%s:%d: %s", name, line, strings.TrimSpace(text)))
	}
	return findings, scanner.Err()
}
