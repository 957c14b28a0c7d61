// Command blobs is bench/blobs.sh's client: it times an upload and the
// chunking of a job over it, and a worker's downloads of a job's chunks,
// against a `scimesh serve` running as a process of its own, and reads
// that process's (and the blob store's) CPU time and peak memory from
// /proc around what it times.
//
//	blobs table -size BYTES FILE
//	blobs bucket -endpoint URL NAME
//	blobs upload -coordinator URL -file TABLE -chunk-rows N [-pid PID,…]
//	blobs download -coordinator URL -upload ID -chunk-rows N [-concurrency C] [-pid PID,…] [-profile FILE=URL]…
//
// table writes about BYTES of CSV, id,fingerprint,note (a 256-digit hex
// fingerprint; one row in 50 has a quoted note with a comma), the table of
// `scimesh-bench upload`. bucket creates an S3 bucket at endpoint (path-style, keys from the AWS
// environment variables). upload sends TABLE to POST /upload, then POST
// /jobs over it with chunk_rows N, and prints one line of key=value
// pairs: each step's seconds and MB/s (of TABLE's size), the first
// process's VmHWM before, after the upload and after the job, and every
// process's CPU seconds during each step. download creates a job over an
// upload, claims all its chunks with POST /tasks/claim, then downloads
// them as a worker does (input.url relative to the coordinator, with the
// worker token; or, when the claim gives input.range, the signed URL with
// that Range header, input.header_line first), C at a time, checks each
// one's size and sha256, cancels the job and prints one line: the
// downloads' count, bytes, wall time and MB/s in total, the median MB/s
// of one download, and every process's CPU seconds during the downloads;
// each -profile URL is fetched into its FILE as the downloads start.
//
// The client token comes from CLIENT_AUTH_TOKEN, the worker token from
// WORKER_AUTH_TOKEN (empty: none).
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scimesh/scimesh/internal/bench"
	"github.com/scimesh/scimesh/internal/client"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: blobs table|bucket|upload|download FLAGS (see the package comment)")
		os.Exit(2)
	}
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "table":
		err = table(os.Args[2:])
	case "bucket":
		err = bucket(ctx, os.Args[2:])
	case "upload":
		err = upload(ctx, os.Args[2:])
	case "download":
		err = download(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: table, bucket, upload or download", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "blobs:", err)
		os.Exit(1)
	}
}

func table(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	size := fs.Int64("size", 1e9, "about how many bytes to write")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("table -size BYTES FILE")
	}
	return bench.WriteTable(fs.Arg(0), *size)
}

func bucket(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bucket", flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "the S3 endpoint, such as http://127.0.0.1:8333")
	_ = fs.Parse(args)
	if *endpoint == "" || fs.NArg() != 1 {
		return errors.New("bucket -endpoint URL NAME")
	}
	c := s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(*endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(fs.Arg(0))})
	return err
}

// procs are the processes whose CPU time and memory are read.
type procs []int

func (p *procs) String() string { return fmt.Sprint(*p) }

func (p *procs) Set(s string) error {
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		*p = append(*p, n)
	}
	return nil
}

// clockTick is USER_HZ, 100 on Linux (getconf CLK_TCK).
const clockTick = 100

// cpu returns each process's user plus system CPU seconds.
func (p procs) cpu() ([]float64, error) {
	out := make([]float64, len(p))
	for i, pid := range p {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, err
		}
		// The fields after the command's name, which is in parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		utime, err1 := strconv.ParseFloat(f[11], 64)
		stime, err2 := strconv.ParseFloat(f[12], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		out[i] = (utime + stime) / clockTick
	}
	return out, nil
}

// hwm returns the first process's peak resident set (VmHWM) in MiB; 0
// without a process.
func (p procs) hwm() (float64, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p[0]))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmHWM")
}

// cpuSince formats the CPU seconds each process spent since before.
func (p procs) cpuSince(name string, before []float64) (string, error) {
	after, err := p.cpu()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i := range p {
		fmt.Fprintf(&b, " %s_cpu%d_s=%.2f", name, i, after[i]-before[i])
	}
	return b.String(), nil
}

func upload(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("upload", flag.ExitOnError)
	coord := fs.String("coordinator", "", "the coordinator's URL")
	file := fs.String("file", "", "the CSV table to upload")
	chunkRows := fs.Int("chunk-rows", 10000, "rows per chunk of the job")
	var pids procs
	fs.Var(&pids, "pid", "processes (comma-separated) whose CPU time to read; the first one's VmHWM too")
	_ = fs.Parse(args)
	cl := client.New(*coord, os.Getenv("CLIENT_AUTH_TOKEN"), client.WithTimeout(10*time.Minute))
	defer cl.CloseIdleConnections()
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	mb := float64(st.Size()) / 1e6

	hwm0, err := pids.hwm()
	if err != nil {
		return err
	}
	cpu0, err := pids.cpu()
	if err != nil {
		return err
	}
	t0 := time.Now()
	up, err := cl.Upload(ctx, f)
	if err != nil {
		return err
	}
	upT := time.Since(t0)
	upCPU, err := pids.cpuSince("upload", cpu0)
	if err != nil {
		return err
	}
	hwm1, err := pids.hwm()
	if err != nil {
		return err
	}

	cpu1, err := pids.cpu()
	if err != nil {
		return err
	}
	t0 = time.Now()
	job, err := cl.CreateJob(ctx, &client.JobRequest{Workload: "noop", Input: client.JobInput{UploadID: up.UploadID}, ChunkRows: *chunkRows}, "")
	if err != nil {
		return err
	}
	jobT := time.Since(t0)
	jobCPU, err := pids.cpuSince("chunk", cpu1)
	if err != nil {
		return err
	}
	hwm2, err := pids.hwm()
	if err != nil {
		return err
	}
	if _, err := cl.Cancel(ctx, job.JobID); err != nil {
		return err
	}
	fmt.Printf("upload_id=%s bytes=%d chunks=%d upload_s=%.3f upload_mbs=%.0f chunk_s=%.3f chunk_mbs=%.0f hwm_start_mib=%.0f hwm_upload_mib=%.0f hwm_chunk_mib=%.0f%s%s\n",
		up.UploadID, st.Size(), job.Tasks.Total, upT.Seconds(), mb/upT.Seconds(), jobT.Seconds(), mb/jobT.Seconds(), hwm0, hwm1, hwm2, upCPU, jobCPU)
	return nil
}

func download(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("download", flag.ExitOnError)
	coord := fs.String("coordinator", "", "the coordinator's URL")
	uploadID := fs.String("upload", "", "the upload to make a job of")
	chunkRows := fs.Int("chunk-rows", 50000, "rows per chunk of the job")
	conc := fs.Int("concurrency", 1, "downloads at a time")
	var pids procs
	fs.Var(&pids, "pid", "processes (comma-separated) whose CPU time to read")
	var profiles []string
	fs.Func("profile", "FILE=URL: fetch URL (a CPU profile of some seconds) into FILE while the downloads run; repeatable", func(s string) error {
		if !strings.Contains(s, "=") {
			return errors.New("want FILE=URL")
		}
		profiles = append(profiles, s)
		return nil
	})
	_ = fs.Parse(args)
	cl := client.New(*coord, os.Getenv("CLIENT_AUTH_TOKEN"))
	defer cl.CloseIdleConnections()
	wk := client.New(*coord, os.Getenv("WORKER_AUTH_TOKEN"))
	defer wk.CloseIdleConnections()

	job, err := cl.CreateJob(ctx, &client.JobRequest{Workload: "noop", Input: client.JobInput{UploadID: *uploadID}, ChunkRows: *chunkRows, LeaseSeconds: 600}, "")
	if err != nil {
		return err
	}
	defer func() { _, _ = cl.Cancel(context.WithoutCancel(ctx), job.JobID) }()
	var tasks []client.Task
	for len(tasks) < job.Tasks.Total {
		got, err := wk.ClaimMany(ctx, client.ClaimRequest{WorkerID: "bench-blobs", Workloads: []string{"noop"}}, 1000)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return fmt.Errorf("claimed %d of %d chunks, then none", len(tasks), job.Tasks.Total)
		}
		tasks = append(tasks, got...)
	}
	signed := 0
	for _, t := range tasks {
		if t.Input.Range != "" {
			signed++
		}
	}
	if signed != 0 && signed != len(tasks) {
		return fmt.Errorf("%d of %d chunks signed: a mix", signed, len(tasks))
	}
	// Signed inputs: no token, no proxy, no redirect, as the worker's.
	hc := &http.Client{
		Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return errors.New("redirected") },
	}
	defer hc.CloseIdleConnections()

	var profWG sync.WaitGroup
	profErrs := make([]error, len(profiles))
	for i, p := range profiles {
		file, u, _ := strings.Cut(p, "=")
		profWG.Go(func() { profErrs[i] = fetchProfile(ctx, file, u) })
	}
	cpu0, err := pids.cpu()
	if err != nil {
		return err
	}
	rates := make([]float64, len(tasks))
	var total int64
	var mu sync.Mutex
	var errs []error
	next := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range *conc {
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for i := range next {
				t := &tasks[i]
				s := time.Now()
				n, err := fetch(ctx, wk, hc, t, buf)
				d := time.Since(s)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("chunk %d: %w", t.ChunkIndex, err))
				}
				total += n
				rates[i] = float64(n) / 1e6 / d.Seconds()
				mu.Unlock()
			}
		})
	}
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	wall := time.Since(t0)
	cpu, err := pids.cpuSince("download", cpu0)
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	profWG.Wait()
	if err := errors.Join(profErrs...); err != nil {
		return err
	}
	mode := "coordinator"
	if signed > 0 {
		mode = "presigned"
	}
	slices.Sort(rates)
	fmt.Printf("mode=%s chunks=%d bytes=%d concurrency=%d wall_s=%.3f total_mbs=%.0f per_download_mbs=%.0f min_mbs=%.0f max_mbs=%.0f%s\n",
		mode, len(tasks), total, *conc, wall.Seconds(), float64(total)/1e6/wall.Seconds(), rates[len(rates)/2], rates[0], rates[len(rates)-1], cpu)
	return nil
}

// fetchProfile writes what GET u answers (a CPU profile) to file.
func fetchProfile(ctx context.Context, file, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fetch downloads t's input as a worker does and checks its size and
// sha256; it returns the bytes read.
func fetch(ctx context.Context, wk *client.Client, hc *http.Client, t *client.Task, buf []byte) (int64, error) {
	var body io.ReadCloser
	var r io.Reader
	if t.Input.Range != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.Input.URL, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Range", t.Input.Range)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusPartialContent {
			resp.Body.Close()
			return 0, fmt.Errorf("the store answered %s, not 206", resp.Status)
		}
		body = resp.Body
		r = io.MultiReader(strings.NewReader(t.Input.HeaderLine), body)
	} else {
		var err error
		if body, err = wk.Input(ctx, t.Input.URL); err != nil {
			return 0, err
		}
		r = body
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, r, buf)
	if err != nil {
		return n, err
	}
	if t.Input.Bytes != 0 && n != t.Input.Bytes {
		return n, fmt.Errorf("%d bytes, want %d", n, t.Input.Bytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != t.Input.SHA256 {
		return n, fmt.Errorf("sha256 %s, want %s", got, t.Input.SHA256)
	}
	return n, nil
}
