package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/server"
)

// UploadConfig says what RunUpload measures.
type UploadConfig struct {
	// Size is how many bytes of CSV to generate, unless File names a
	// table to measure instead.
	Size int64
	File string
	// Runs is how many times each step is measured (the medians are
	// reported); ChunkRows the rows per chunk of the job.
	Runs, ChunkRows int
	// Cold drops the page cache before cat and before the upload (it
	// needs root), so that both read the disk.
	Cold bool
	// Profile, when set, names a file for a CPU profile of the whole run.
	Profile string
}

// RunUpload measures reading a table with cat, uploading it through a real
// coordinator's POST /upload (streamed, checked, normalized, hashed,
// synced) and creating a job over it (the chunking pass), c.Runs times,
// and writes the medians in MB/s to out.
func RunUpload(ctx context.Context, out io.Writer, c UploadConfig) error {
	stop, err := startProfile(c.Profile)
	if err != nil {
		return err
	}
	defer stop()
	dropCaches := func() error {
		if !c.Cold {
			return nil
		}
		if err := exec.Command("sync").Run(); err != nil {
			return err
		}
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
			return fmt.Errorf("--cold: drop the page cache: %w (run as root, or leave --cold out)", err)
		}
		return nil
	}
	dir, err := os.MkdirTemp("", "scimesh-bench-upload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := c.File
	if file == "" {
		file = filepath.Join(dir, "table.csv")
		if err := WriteTable(file, c.Size); err != nil {
			return err
		}
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	mb := float64(st.Size()) / 1e6

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(ctx, server.Config{Addr: "127.0.0.1:0", DB: "sqlite:" + filepath.Join(dir, "scimesh.db"), DataDir: dir, Logger: quiet})
	if err != nil {
		return err
	}
	defer srv.Close()
	waitServer := srv.Start(ctx)
	defer func() { cancel(); _ = waitServer() }()
	cl := client.New(srv.URL(), "")
	defer cl.CloseIdleConnections()

	var catT, upT, splitT, bothT []time.Duration
	for range c.Runs {
		if err := dropCaches(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := exec.CommandContext(ctx, "sh", "-c", "cat \"$0\" >/dev/null", file).Run(); err != nil {
			return fmt.Errorf("cat: %w", err)
		}
		catT = append(catT, time.Since(t0))

		if err := dropCaches(); err != nil {
			return err
		}
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		t0 = time.Now()
		up, err := cl.Upload(ctx, f)
		f.Close()
		if err != nil {
			return err
		}
		upT = append(upT, time.Since(t0))

		t0 = time.Now()
		job, err := cl.CreateJob(ctx, &client.JobRequest{Workload: "noop", Input: client.JobInput{UploadID: up.UploadID}, ChunkRows: c.ChunkRows}, "")
		if err != nil {
			return err
		}
		splitT = append(splitT, time.Since(t0))
		bothT = append(bothT, upT[len(upT)-1]+splitT[len(splitT)-1])
		if _, err := cl.Cancel(ctx, job.JobID); err != nil {
			return err
		}
		_ = os.RemoveAll(filepath.Join(dir, "blobs", "sha256")) // keep the disk from filling over runs
	}
	med := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
	rate := func(d time.Duration) float64 { return mb / d.Seconds() }
	cat, u, s, both := med(catT), med(upT), med(splitT), med(bothT)
	cache := "warm page cache"
	if c.Cold {
		cache = "page cache dropped before cat and before the upload"
	}
	fmt.Fprintf(out, "file %.0f MB, %s, medians of %d runs:\n", mb, cache, c.Runs)
	fmt.Fprintf(out, "  cat FILE >/dev/null          %8v  %7.0f MB/s\n", cat.Round(time.Millisecond), rate(cat))
	fmt.Fprintf(out, "  POST /upload                 %8v  %7.0f MB/s\n", u.Round(time.Millisecond), rate(u))
	fmt.Fprintf(out, "  POST /jobs (chunking)        %8v  %7.0f MB/s\n", s.Round(time.Millisecond), rate(s))
	fmt.Fprintf(out, "  upload + chunking            %8v  %7.0f MB/s (%.0f%% of cat)\n", both.Round(time.Millisecond), rate(both), 100*rate(both)/rate(cat))
	return nil
}

// WriteTable writes about size bytes of id,fingerprint,note CSV to path,
// the table upload measurements send; one row in 50 has a quoted field
// with a comma, so the checker's slow path is measured too.
func WriteTable(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(3, 5))
	const hexdigits = "0123456789abcdef"
	fp := make([]byte, 256)
	n, _ := w.WriteString("id,fingerprint,note\n")
	written := int64(n)
	for i := 0; written < size; i++ {
		for j := range fp {
			fp[j] = hexdigits[rng.IntN(16)]
		}
		note := "plain"
		if i%50 == 0 {
			note = `"quoted, with a comma"`
		}
		n, err := fmt.Fprintf(w, "mol-%d,%s,%s\n", i, fp, note)
		if err != nil {
			return err
		}
		written += int64(n)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
