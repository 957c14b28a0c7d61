package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/server"
	"github.com/scimesh/scimesh/internal/show"
	"github.com/scimesh/scimesh/internal/worker"
	"github.com/scimesh/scimesh/internal/worker/tanimoto"
)

// Config says what Run runs.
type Config struct {
	Data          // the data set
	Workers   int // workers, of one slot each
	ChunkRows int
	TopK      int
	Keep      bool // keep the temporary directory (data set, database)
}

// Run runs the demo c describes: it writes the data set in a temporary
// directory, starts a coordinator on a SQLite database there and c.Workers
// workers of the built-in tanimoto workload in this process, submits the
// search through the REST API, shows its progress on stderr, prints the
// top rows and the times on stdout, and checks the result against
// DirectTopK: a result that differs is an error.
func Run(ctx context.Context, stdout, stderr io.Writer, c Config) error {
	if c.Rows < 1 || c.Bits < 8 || c.Bits%8 != 0 || c.Workers < 1 || c.ChunkRows < 1 || c.TopK < 1 || c.Density <= 0 || c.Density >= 1 {
		return fmt.Errorf("demo: need --rows ≥ 1, --bits a positive multiple of 8, --workers ≥ 1, --chunk-rows ≥ 1, --top-k ≥ 1 and 0 < --density < 1")
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "scimesh-demo-")
	if err != nil {
		return err
	}
	if c.Keep {
		fmt.Fprintf(stderr, "keeping %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The data set.
	dataPath := filepath.Join(dir, "fingerprints.csv")
	query, err := WriteFingerprints(dataPath, c.Data)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "generated %d fingerprints of %d bits (seed %d) in %v\n", c.Rows, c.Bits, c.Seed, time.Since(start).Round(time.Millisecond))

	// The coordinator.
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", Shard: "s0",
		DB: "sqlite:" + filepath.Join(dir, "scimesh.db"), DataDir: dir, Logger: quiet})
	if err != nil {
		return err
	}
	defer srv.Close()
	var wg sync.WaitGroup // the workers
	defer wg.Wait()
	waitServer := srv.Start(ctx)
	defer waitServer()
	defer cancel()
	base := srv.URL()
	fmt.Fprintf(stderr, "coordinator on %s (SQLite in %s)\n", base, dir)

	// The workers.
	for i := range c.Workers {
		wl, err := worker.ParseWorkload(tanimoto.Name)
		if err != nil {
			return err
		}
		w, err := worker.New(worker.Config{
			Client: client.New(base, ""), ID: fmt.Sprintf("demo-worker-%d", i+1), Concurrency: 1,
			Workloads: []worker.Workload{wl}, Logger: quiet, ClaimWait: time.Second,
		})
		if err != nil {
			return err
		}
		wg.Go(func() { _ = w.Run(ctx) })
	}
	fmt.Fprintf(stderr, "%d workers running the built-in tanimoto\n", c.Workers)

	// The job, the way a scientist submits it.
	jobStart := time.Now()
	cl := client.New(base, "")
	f, err := os.Open(dataPath)
	if err != nil {
		return err
	}
	up, err := cl.Upload(ctx, f)
	f.Close()
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	fmt.Fprintf(stderr, "uploaded %d rows, %d bytes in %v\n", up.Rows, up.Bytes, time.Since(jobStart).Round(time.Millisecond))
	params, _ := json.Marshal(map[string]string{"query": query})
	job, err := cl.CreateJob(ctx, &client.JobRequest{
		Name: "demo", Workload: tanimoto.Name, Parameters: params, Input: client.JobInput{UploadID: up.UploadID},
		ChunkRows: c.ChunkRows, TopK: c.TopK, ScoreColumn: "score", Order: client.Desc,
	}, "")
	if err != nil {
		return fmt.Errorf("create the job: %w", err)
	}
	fmt.Fprintf(stderr, "job %s: %d chunks of %d rows, created %v after the upload began\n", job.JobID, job.Tasks.Total, c.ChunkRows, time.Since(jobStart).Round(time.Millisecond))
	job, err = show.Follow(ctx, cl, job.JobID, stderr)
	if err != nil {
		return err
	}
	if job.Status != client.JobCompleted {
		return fmt.Errorf("demo job %s is %s: %s", job.JobID, job.Status, job.Error)
	}
	rc, err := cl.Result(ctx, job.JobID)
	if err != nil {
		return err
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	distributed := time.Since(jobStart)

	// The same search in one process, to check the result.
	directStart := time.Now()
	want, err := DirectTopK(ctx, dataPath, params, c.TopK)
	if err != nil {
		return fmt.Errorf("direct computation: %w", err)
	}
	direct := time.Since(directStart)

	fmt.Fprintf(stdout, "top %d of %d fingerprints by Tanimoto similarity to the query:\n%s", c.TopK, c.Rows, got)
	fmt.Fprintf(stdout, "distributed (upload, %d chunks, %d workers, stitch): %v\n", job.Tasks.Total, c.Workers, distributed.Round(time.Millisecond))
	fmt.Fprintf(stdout, "direct single-process computation:                %v\n", direct.Round(time.Millisecond))
	fmt.Fprintf(stdout, "wall time of the demo:                            %v\n", time.Since(start).Round(time.Millisecond))
	if !bytes.Equal(got, want) {
		return fmt.Errorf("check FAILED: the distributed result differs from the direct computation:\n%s\nwant:\n%s", got, want)
	}
	fmt.Fprintln(stdout, "check: the result equals the direct computation, byte for byte")
	cancel()
	return nil
}
