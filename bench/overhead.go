package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"

	"example.com/groupmembership/bench/loadtest"
)

// runOverhead measures what metrics and revisions (with the change feed they
// fill) cost the hot path: this checkout's service against opts.baseline, a
// build from before them, and against itself with -metrics=false, side by
// side in one run, with the access log on (as users run it) and off (where
// anything else costs the largest share).
func runOverhead(opts options, luaPath, tmp string) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk is not installed: run `make bench-overhead`, which installs it")
	}
	bin, err := serviceBinary(opts, tmp)
	if err != nil {
		return err
	}
	configs := overheadConfigs(opts.baseline, bin)
	urls := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	list10 := loadtest.RandomUIDs(rng, 10, 1e9)
	for i, c := range configs {
		addr, _, stop, err := loadtest.StartService(c.bin, tmp, fmt.Sprint("overhead", i), opts.serviceArgs+c.args)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		defer stop()
		urls[c.name] = "http://" + addr
		if err := loadtest.PostUsers(urls[c.name], "list10", list10); err != nil {
			return err
		}
	}
	fmt.Printf("membership overhead bench: %d rounds of %s per run, %d connections, %d client threads, %d cores\n",
		opts.rounds, opts.duration, opts.connections, opts.threads, loadtest.NumCPU())
	fmt.Printf("before: %s\n", opts.baseline)

	scenarios := []overheadScenario{{"POST 3", "", luaPath}, {"GET 10", "/group-user/list10", ""}}
	results := map[string][]loadtest.Result{}
	for round := 1; round <= opts.rounds; round++ {
		for _, s := range scenarios {
			// Each round starts with another service, so that none always
			// runs first (or right after a given other one).
			for k := range configs {
				c := configs[(k+round)%len(configs)]
				r, err := loadtest.Load{Threads: opts.threads, Connections: opts.connections, Duration: opts.duration}.RunWrk(context.Background(), urls[c.name]+s.path, s.script)
				if err != nil {
					return fmt.Errorf("%s %s: %w", c.name, s.op, err)
				}
				key := s.op + ", " + c.name
				fmt.Printf("  round %d  %-40s %10.0f req/s  p99 %s\n", round, key, r.RPS, r.P99)
				results[key] = append(results[key], r)
			}
		}
	}
	printOverhead(results, scenarios)
	return nil
}

// overheadConfig is a service the overhead bench runs: a build and its flags.
type overheadConfig struct {
	name, bin, args string
}

// overheadScenario is a request the overhead bench measures: a path to GET,
// or a wrk script.
type overheadScenario struct{ op, path, script string }

// overheadConfigs returns the services to compare: the baseline build,
// this one, and this one without metrics, each with the access log on and
// off.
func overheadConfigs(baseline, bin string) []overheadConfig {
	var configs []overheadConfig
	for _, log := range []string{"", " -access-log=false"} {
		label := "log on"
		if log != "" {
			label = "log off"
		}
		configs = append(configs,
			overheadConfig{"before, " + label, baseline, log},
			overheadConfig{"now, " + label, bin, log},
			overheadConfig{"now -metrics=false, " + label, bin, " -metrics=false" + log},
		)
	}
	return configs
}

// printOverhead prints the median of each scenario and service, and its
// ratio to the baseline's with the log the same.
func printOverhead(results map[string][]loadtest.Result, scenarios []overheadScenario) {
	fmt.Printf("\n%-40s %12s   %s\n", "operation, service", "req/s", "ratio to before (medians of this run)")
	for _, s := range scenarios {
		for _, log := range []string{"log on", "log off"} {
			before := loadtest.Median(results[s.op+", before, "+log]).RPS
			for _, name := range []string{"before, ", "now, ", "now -metrics=false, "} {
				key := s.op + ", " + name + log
				rps := loadtest.Median(results[key]).RPS
				fmt.Printf("%-40s %12.0f   %.3f\n", key, rps, rps/before)
			}
		}
	}
}
