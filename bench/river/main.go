// Command river measures River (github.com/riverqueue/river), the Go and
// PostgreSQL job queue SciMesh measures itself against: it inserts -jobs
// no-op jobs, starts a River client with the settings of River's own
// benchmark (fetch cooldown 2 ms, fetch poll interval 20 ms, 2,000 workers
// on the default queue), and prints how long the client took to complete
// them all.
//
// It is a module of its own so that SciMesh's module never depends on
// River; it borrows SciMesh's internal/pgcluster (allowed: this module's
// path lies under SciMesh's) to start a throwaway PostgreSQL cluster when
// -db is not given. With -serve it only starts such a cluster, prints its
// URL and waits for SIGINT or SIGTERM, so that bench/load.sh (which
// bench/river.sh runs) can run River and SciMesh against one cluster in
// one run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/scimesh/scimesh/internal/pgcluster"
)

func main() {
	var (
		jobs    = flag.Int("jobs", 50000, "no-op jobs to insert and complete per run")
		db      = flag.String("db", "", "postgres:// URL of the database to use; empty starts a throwaway cluster")
		runs    = flag.Int("runs", 1, "runs; with more than one, the median is printed last")
		serve   = flag.Bool("serve", false, "only start a throwaway cluster, print the URL of its postgres database and wait for SIGINT or SIGTERM")
		verbose = flag.Bool("v", false, "log River's warnings and errors to stderr")
		preload = flag.String("preload", "", "with -serve, the cluster's shared_preload_libraries, such as pg_stat_statements")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *serve {
		err = serveCluster(ctx, os.Stdout, *preload)
	} else {
		logger := slog.New(slog.DiscardHandler)
		if *verbose {
			logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		err = measure(ctx, os.Stdout, config{jobs: *jobs, db: *db, runs: *runs, logger: logger})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

// config says what measure does.
type config struct {
	jobs, runs int
	db         string // empty: a throwaway cluster
	logger     *slog.Logger
}

// measure runs c.runs measurements on one database and prints a line for
// each, then the median.
func measure(ctx context.Context, out io.Writer, c config) error {
	if c.jobs < 1 || c.runs < 1 {
		return fmt.Errorf("need -jobs ≥ 1 and -runs ≥ 1, not %d and %d", c.jobs, c.runs)
	}
	url := c.db
	if url == "" {
		cl, err := startCluster(ctx, nil)
		if err != nil {
			return err
		}
		defer cl.Stop()
		if url, err = cl.CreateDatabase(ctx, "river"); err != nil {
			return err
		}
	}
	version := riverVersion()
	var rates []float64
	for range c.runs {
		r, err := runOnce(ctx, url, c.jobs, c.logger)
		if err != nil {
			return err
		}
		rates = append(rates, r.rate())
		fmt.Fprintf(out, "river %s: %s\n", version, r)
	}
	if c.runs > 1 {
		fmt.Fprintf(out, "river %s: median of %d runs: %s jobs/s\n", version, c.runs, thousands(median(rates)))
	}
	return nil
}

// startCluster starts a throwaway cluster, on a RAM disk when there is
// one, as SciMesh's PostgreSQL tests do. pgcluster's defaults run it with
// fsync, synchronous_commit and full_page_writes off.
func startCluster(ctx context.Context, settings map[string]string) (*pgcluster.Cluster, error) {
	cl, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgcluster.RAMDir(), Settings: settings})
	if err != nil {
		return nil, fmt.Errorf("start a throwaway PostgreSQL: %w", err)
	}
	return cl, nil
}

// serveCluster starts a throwaway cluster, with preload as its
// shared_preload_libraries when not empty, prints the URL of its postgres
// database on a line of its own, and stops the cluster when ctx is done.
func serveCluster(ctx context.Context, out io.Writer, preload string) error {
	var settings map[string]string
	if preload != "" {
		settings = map[string]string{"shared_preload_libraries": preload}
	}
	cl, err := startCluster(ctx, settings)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, cl.URL("postgres"))
	<-ctx.Done()
	return cl.Stop()
}

// riverVersion is the version of River this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}

// median is the middle of xs, or the mean of the two middle ones.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// thousands formats x rounded to an integer with commas between groups of
// three digits: 32900.4 → "32,900".
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}

// seconds formats d in seconds with two decimals: "1.52s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}
