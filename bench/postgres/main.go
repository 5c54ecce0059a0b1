// Command postgres measures the PostgreSQL store side by side in one run, on
// loopback: a POST of 3 users, and a GET of 10 and of 1000 members, on one
// and on two instances of membership-postgres on one database, against the
// embedded service (membership: in memory, and with -data-dir for writes),
// and against what the database itself does at the same concurrency:
// pgbench inserting 3 rows in one transaction. It prints the medians, the
// ratios the targets are stated in, met or not, and how far the second
// instance ran behind the log (membership_follow_lag_seconds).
//
// Run it from the repository root with `make bench-postgres` (or `make
// bench`), which installs wrk and PostgreSQL first when they are missing.
// The database is a throwaway server of its own (internal/pgserver), or the
// server MEMBERSHIP_TEST_POSTGRES names, as for the PostgreSQL store's tests.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"example.com/groupmembership/bench/loadtest"
	"example.com/groupmembership/internal/pgserver"
)

//go:embed insert3.sql
var insert3SQL []byte

func main() {
	load := loadtest.Load{}
	rounds := flag.Int("rounds", 3, "rounds of all runs; the table shows medians")
	flag.DurationVar(&load.Duration, "duration", 5*time.Second, "length of each load run")
	flag.IntVar(&load.Connections, "c", 50, "connections per load run (split between two instances)")
	flag.IntVar(&load.Threads, "t", 2, "client threads for wrk and pgbench")
	flag.Parse()
	if err := run(load, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench-postgres:", err)
		os.Exit(1)
	}
}

// target is what one row loads: one URL, or two URLs loaded together
// (each with half the connections), or pgbench.
type target struct {
	name string
	urls []string
}

func run(load loadtest.Load, rounds int) error {
	for _, tool := range []string{"wrk", "pgbench"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: run `make bench-postgres`, which installs it", tool)
		}
	}
	tmp, err := os.MkdirTemp("", "membership-pgbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	embedded, pgBin, err := build(tmp)
	if err != nil {
		return err
	}
	server, stop, err := startPostgres(tmp)
	if err != nil {
		return err
	}
	defer stop()
	dbURL, drop, err := createDatabase(server, "membership_bench")
	if err != nil {
		return err
	}
	defer drop()
	benchURL, dropBench, err := createDatabase(server, "membership_pgbench")
	if err != nil {
		return err
	}
	defer dropBench()

	services := map[string]string{}
	for _, s := range []struct{ name, bin, args string }{
		{"embedded", embedded, ""},
		{"embedded -data-dir", embedded, "-data-dir " + filepath.Join(tmp, "data")},
		{"postgres 1", pgBin, "-database-url " + dbURL},
		{"postgres 2", pgBin, "-database-url " + dbURL},
	} {
		addr, _, stop, err := loadtest.StartService(s.bin, tmp, strings.ReplaceAll(s.name, " ", "_"), s.args)
		if err != nil {
			return err
		}
		defer stop()
		services[s.name] = "http://" + addr
	}
	if err := loadLists(services); err != nil {
		return err
	}
	script := filepath.Join(tmp, "post.lua")
	if err := os.WriteFile(script, loadtest.PostLua, 0o600); err != nil {
		return err
	}
	pgbenchScript := filepath.Join(tmp, "insert3.sql")
	if err := os.WriteFile(pgbenchScript, insert3SQL, 0o600); err != nil {
		return err
	}
	if err := psql(benchURL, "CREATE TABLE bench_members (group_id text, uid bigint, PRIMARY KEY (group_id, uid))"); err != nil {
		return err
	}

	results, err := runRounds(load, rounds, services, script, benchURL, pgbenchScript)
	if err != nil {
		return err
	}
	lag, err := lagP99(services["postgres 2"])
	if err != nil {
		return err
	}
	report(results, lag)
	return nil
}

// loadLists adds the lists the GET rows read, of 10 and 1,000 random users,
// to the embedded services and to postgres 1, whose database postgres 2
// shares.
func loadLists(services map[string]string) error {
	rng := rand.New(rand.NewPCG(1, 2))
	list10, list1000 := loadtest.RandomUIDs(rng, 10, 1e9), loadtest.RandomUIDs(rng, 1000, 1e9)
	for _, name := range []string{"embedded", "embedded -data-dir", "postgres 1"} {
		if err := loadtest.PostUsers(services[name], "list10", list10); err != nil {
			return err
		}
		if err := loadtest.PostUsers(services[name], "list1000", list1000); err != nil {
			return err
		}
	}
	return nil
}

// runRounds runs every row, round after round, each round in another
// order, and returns the results of each.
func runRounds(load loadtest.Load, rounds int, services map[string]string, script, benchURL, pgbenchScript string) (map[string][]loadtest.Result, error) {
	one, two := []string{services["postgres 1"]}, []string{services["postgres 1"], services["postgres 2"]}
	scenarios := []struct {
		op, path, script string
		targets          []target
	}{
		{"POST 3", "", script, []target{
			{"embedded", []string{services["embedded"]}}, {"embedded -data-dir", []string{services["embedded -data-dir"]}},
			{"postgres, 1 instance", one}, {"postgres, 2 instances", two}, {"pgbench, 3 rows a transaction", nil}}},
		{"GET 10", "/group-user/list10", "", []target{
			{"embedded", []string{services["embedded"]}}, {"postgres, 1 instance", one}, {"postgres, 2 instances", two}}},
		{"GET 1000", "/group-user/list1000", "", []target{
			{"embedded", []string{services["embedded"]}}, {"postgres, 1 instance", one}, {"postgres, 2 instances", two}}},
	}
	fmt.Printf("membership PostgreSQL bench: %d rounds of %s per run, %d connections, %d client threads, %d cores\n",
		rounds, load.Duration, load.Connections, load.Threads, loadtest.NumCPU())
	results := map[string][]loadtest.Result{}
	for round := 1; round <= rounds; round++ {
		for _, s := range scenarios {
			for k := range s.targets {
				t := s.targets[(k+round)%len(s.targets)] // none always first
				var r loadtest.Result
				var err error
				if t.urls == nil {
					r, err = runPgbench(load, benchURL, pgbenchScript)
				} else {
					r, err = runTogether(load, t.urls, s.path, s.script)
				}
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", s.op, t.name, err)
				}
				key := s.op + ", " + t.name
				fmt.Printf("  round %d  %-42s %10.0f req/s  p99 %s\n", round, key, r.RPS, r.P99)
				results[key] = append(results[key], r)
			}
		}
	}
	return results, nil
}

// report prints the medians and the targets.
func report(results map[string][]loadtest.Result, lag string) {
	med := func(key string) loadtest.Result { return loadtest.Median(results[key]) }
	fmt.Printf("\n%-42s %12s %10s\n", "operation, service (medians)", "req/s", "p99")
	for _, key := range []string{"POST 3, embedded", "POST 3, embedded -data-dir", "POST 3, postgres, 1 instance", "POST 3, postgres, 2 instances",
		"POST 3, pgbench, 3 rows a transaction", "GET 10, embedded", "GET 10, postgres, 1 instance", "GET 10, postgres, 2 instances",
		"GET 1000, embedded", "GET 1000, postgres, 1 instance", "GET 1000, postgres, 2 instances"} {
		fmt.Printf("%-42s %12.0f %10s\n", key, med(key).RPS, med(key).P99)
	}
	fmt.Println("\ntargets:")
	ratio := func(what, a, b string, target float64) {
		r := med(a).RPS / med(b).RPS
		verdict := "met"
		if r < target {
			verdict = "NOT MET"
		}
		fmt.Printf("  %-62s %.2f (target >= %.2f) %s\n", what, r, target, verdict)
	}
	pg := "POST 3, pgbench, 3 rows a transaction"
	ratio("POST 3, postgres 1 instance / pgbench", "POST 3, postgres, 1 instance", pg, 0.5)
	ratio("POST 3, postgres 2 instances / pgbench", "POST 3, postgres, 2 instances", pg, 0.5)
	ratio("GET 10, postgres 1 instance / embedded", "GET 10, postgres, 1 instance", "GET 10, embedded", 0.8)
	ratio("GET 10, postgres 2 instances / embedded", "GET 10, postgres, 2 instances", "GET 10, embedded", 0.8)
	ratio("GET 1000, postgres 1 instance / embedded", "GET 1000, postgres, 1 instance", "GET 1000, embedded", 0.8)
	ratio("GET 1000, postgres 2 instances / embedded", "GET 1000, postgres, 2 instances", "GET 1000, embedded", 0.8)
	fmt.Printf("  %-62s %s (target < 50ms)\n", "lag of the second instance behind the log, p99", lag)
}

// startPostgres returns the URL of the maintenance database of the server
// MEMBERSHIP_TEST_POSTGRES names, or of a throwaway one started in dir/pg,
// and a function that stops the throwaway one.
func startPostgres(dir string) (string, func(), error) {
	if env := os.Getenv("MEMBERSHIP_TEST_POSTGRES"); env != "" {
		return env, func() {}, nil
	}
	dir = filepath.Join(dir, "pg")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, err
	}
	// The server runs as postgres when we are root: it must reach dir.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		return "", nil, err
	}
	pg, err := pgserver.Start(context.Background(), dir)
	if err != nil {
		return "", nil, err
	}
	return pg.URL, func() {
		if err := pg.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-postgres:", err)
		}
	}, nil
}

// createDatabase creates the database name, a name of its own, on the
// server whose maintenance database is at server, and returns its URL and
// a function that drops it.
func createDatabase(server, name string) (string, func(), error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", nil, fmt.Errorf("the database URL: %w", err)
	}
	name = fmt.Sprintf("%s_%d", name, os.Getpid())
	if err := psql(server, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		if err := psql(server, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "bench-postgres:", err)
		}
	}, nil
}

// build builds the embedded service and membership-postgres into dir, from
// the repository root, the working directory.
func build(dir string) (embedded, pg string, err error) {
	if _, err := os.Stat("postgres/go.mod"); err != nil {
		return "", "", errors.New("run it from the repository root: no postgres/go.mod here")
	}
	embedded, pg = filepath.Join(dir, "membership"), filepath.Join(dir, "membership-postgres")
	for _, b := range []struct{ out, pkg, dir string }{{embedded, ".", "."}, {pg, "./cmd/membership-postgres", "postgres"}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("building %s: %v\n%s", b.pkg, err, out)
		}
	}
	return embedded, pg, nil
}

// runTogether loads every URL at once, each with an equal share of the
// connections and threads, and returns the sum of their throughputs and
// the largest p99.
func runTogether(load loadtest.Load, urls []string, path, script string) (loadtest.Result, error) {
	share := loadtest.Load{Threads: max(1, load.Threads/len(urls)), Connections: load.Connections / len(urls), Duration: load.Duration}
	results := make([]loadtest.Result, len(urls))
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { results[i], errs[i] = share.RunWrk(context.Background(), u+path, script) })
	}
	wg.Wait()
	var sum loadtest.Result
	for i := range urls {
		if errs[i] != nil {
			return sum, errs[i]
		}
		sum.RPS += results[i].RPS
		sum.P99 = max(sum.P99, results[i].P99)
	}
	return sum, nil
}

var pgbenchTPS = regexp.MustCompile(`tps = ([\d.]+) \(without initial connection time\)`)
var pgbenchP99 = regexp.MustCompile(`latency average = ([\d.]+) ms`)

// runPgbench runs pgbench with script at the same concurrency, and returns
// its transactions per second (the p99 is its average latency: pgbench
// gives no percentile without a per-transaction log).
func runPgbench(load loadtest.Load, url, script string) (loadtest.Result, error) {
	out, err := exec.Command("pgbench", "-n", "-c", strconv.Itoa(load.Connections), "-j", strconv.Itoa(load.Threads),
		"-T", strconv.Itoa(max(1, int(load.Duration.Seconds()))), "-f", script, url).CombinedOutput()
	if err != nil {
		return loadtest.Result{}, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return loadtest.Result{}, fmt.Errorf("cannot read pgbench's output:\n%s", out)
	}
	var r loadtest.Result
	r.RPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if a := pgbenchP99.FindSubmatch(out); a != nil {
		ms, _ := strconv.ParseFloat(string(a[1]), 64)
		r.P99 = time.Duration(ms * float64(time.Millisecond))
	}
	return r, nil
}

// psql runs one statement.
func psql(url, sql string) error {
	out, err := exec.Command("psql", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql, url).CombinedOutput()
	if err != nil {
		return fmt.Errorf("psql: %v\n%s", err, out)
	}
	return nil
}

var bucketLine = regexp.MustCompile(`(?m)^membership_follow_lag_seconds_bucket\{le="([^"]+)"\} (\d+)$`)

// lagP99 reads the lag histogram of the instance at base and returns the
// bucket the 99th percentile falls in, as "<= bound".
func lagP99(base string) (string, error) {
	body, err := loadtest.Get(context.Background(), http.DefaultClient, base+"/metrics")
	if err != nil {
		return "", err
	}
	ms := bucketLine.FindAllSubmatch(body, -1)
	if len(ms) == 0 {
		return "", fmt.Errorf("no membership_follow_lag_seconds in /metrics of %s", base)
	}
	total, _ := strconv.ParseFloat(string(ms[len(ms)-1][2]), 64)
	for _, m := range ms {
		n, _ := strconv.ParseFloat(string(m[2]), 64)
		if n >= 0.99*total {
			return fmt.Sprintf("<= %ss (%.0f changes applied)", m[1], total), nil
		}
	}
	return "", fmt.Errorf("cannot read the lag histogram of %s", base)
}
