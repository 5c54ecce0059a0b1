// Command changedpkgs prints the packages of one Go module of this
// repository that have a file changed since a base commit: in the commits
// since HEAD left it, staged, unstaged or untracked. make check tests them.
//
//	go run ./internal/tools/changedpkgs [-base main] [-module .]
//
// A file belongs to the package of its folder, or of the nearest folder
// above it that holds one: testdata, embedded files, and the documents
// whose examples the root package's tests run count for that package. Each
// package is printed as a path relative to the module, "." or "./x/y", one
// a line.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
)

func main() {
	base := flag.String("base", "main", "the commit to compare with: the changes are those since HEAD's merge base with it")
	module := flag.String("module", ".", "the module's folder, relative to the top of the repository")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*base, path.Clean(*module)); err != nil {
		fmt.Fprintln(os.Stderr, "changedpkgs:", err)
		os.Exit(1)
	}
}

func run(base, module string) error {
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	since, err := git("merge-base", base, "HEAD")
	if err != nil {
		return fmt.Errorf("no merge base of %s and HEAD (set BASE to a branch or commit): %w", base, err)
	}
	changed, err := git("-C", top, "diff", "--name-only", "-z", since)
	if err != nil {
		return err
	}
	untracked, err := git("-C", top, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return err
	}
	files := slices.DeleteFunc(strings.Split(changed+"\x00"+untracked, "\x00"), func(f string) bool { return f == "" })
	for _, p := range packages(os.DirFS(top), files, module) {
		fmt.Println(p)
	}
	return nil
}

// git runs git with args and returns its output, without the last newline.
func git(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// packages returns the packages of module, the folder of a go.mod in fsys,
// that hold files (paths relative to fsys, slash-separated), sorted, each
// as "." or "./x/y" relative to the module. A file of a folder gone, or of
// one without a package, counts for the nearest folder above it with one;
// a package of another module (a folder below module with a go.mod of its
// own) is left out.
func packages(fsys fs.FS, files []string, module string) []string {
	var pkgs []string
	for _, f := range files {
		dir, ok := packageDir(fsys, path.Dir(f))
		if !ok || moduleDir(fsys, dir) != module {
			continue
		}
		rel := "."
		if dir != module {
			rel = "./" + strings.TrimPrefix(dir, module+"/")
			if module == "." {
				rel = "./" + dir
			}
		}
		pkgs = append(pkgs, rel)
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}

// packageDir returns dir, or the nearest folder above it, that holds a
// package: .go files, in a folder the go command does not ignore.
func packageDir(fsys fs.FS, dir string) (string, bool) {
	for {
		if !ignored(dir) && hasGoFiles(fsys, dir) {
			return dir, true
		}
		if dir == "." {
			return "", false
		}
		dir = path.Dir(dir)
	}
}

// ignored reports whether the go command ignores the folder dir, and so
// every one below it: testdata, and names that start with . or _.
func ignored(dir string) bool {
	if dir == "." {
		return false
	}
	for _, elem := range strings.Split(dir, "/") {
		if elem == "testdata" || strings.HasPrefix(elem, ".") || strings.HasPrefix(elem, "_") {
			return true
		}
	}
	return false
}

func hasGoFiles(fsys fs.FS, dir string) bool {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
		return !e.IsDir() && strings.HasSuffix(e.Name(), ".go")
	})
}

// moduleDir returns the folder of the go.mod nearest above dir, or dir's.
func moduleDir(fsys fs.FS, dir string) string {
	for {
		if _, err := fs.Stat(fsys, path.Join(dir, "go.mod")); err == nil || dir == "." {
			return dir
		}
		dir = path.Dir(dir)
	}
}
