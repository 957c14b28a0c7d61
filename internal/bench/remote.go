package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/rpc"
	v1 "github.com/scimesh/scimesh/proto/scimesh/v1"
	"github.com/scimesh/scimesh/proto/scimesh/v1/scimeshv1connect"
)

// seeded is what a run against a coordinator created for its workers: a
// job of chunk tasks (REST) or single-task trees (gRPC), by root ID, all
// of a workload of the run's own, which the workers ask for: the tasks
// other runs left on the same coordinator are not theirs.
type seeded struct {
	workload string
	jobID    string
	trees    []string
}

// runRemote seeds c.Backlog+c.Tasks pending tasks on the coordinator at
// c.Coordinator, over its API, drives them with c.Workers no-op workers
// until c.Tasks lifecycles completed, and writes the lines Run writes. The
// coordinator runs in another process, so the load generator's CPU is not
// the server's.
func runRemote(ctx context.Context, out io.Writer, c Config) (*seeded, error) {
	if c.CreateChunks > 0 {
		return nil, fmt.Errorf("--create-chunks runs a coordinator of its own: leave out --coordinator")
	}
	base := strings.TrimRight(c.Coordinator, "/")
	n := c.Backlog + c.Tasks
	seedStart := time.Now()
	s := seeded{workload: fmt.Sprintf("bench-%x", time.Now().UnixNano())}
	var (
		err     error
		owner   map[string]string // of each job, with c.Accounts
		weights map[string]int
	)
	switch {
	case c.Protocol == ProtocolGRPC:
		s.trees, err = seedTrees(ctx, base, c, s.workload, n)
	case c.Accounts > 0:
		owner, weights, err = seedAccounts(ctx, c, s.workload, n)
	default:
		if c.Version != "" && !c.AnnounceLate {
			err = announce(ctx, base, c, s.workload)
		}
		if err == nil {
			s.jobID, err = seedJob(ctx, base, c, s.workload, n)
		}
	}
	if err != nil {
		return nil, err
	}
	form := "chunk tasks of job " + s.jobID
	switch {
	case c.Protocol == ProtocolGRPC:
		form = "single-task trees"
	case c.Accounts > 0:
		form = fmt.Sprintf("chunk tasks of %d jobs of %d accounts", len(owner), c.Accounts)
	}
	fmt.Fprintf(out, "coordinator %s: seeded %d pending %s in %v\n", base, n, form, time.Since(seedStart).Round(time.Millisecond))

	stop, err := startProfile(c.Profile)
	if err != nil {
		return nil, err
	}
	var res result
	if c.Protocol == ProtocolGRPC {
		res = driveGRPC(ctx, base, s.workload, c)
	} else {
		res = c.driveREST()(ctx, base, c.WorkerToken, []string{s.workload}, c)
	}
	stop()
	if res.err != nil {
		return nil, res.err
	}
	var pending int
	if c.Protocol == ProtocolGRPC {
		counts, err := countTrees(ctx, base, c.ClientToken, s.trees, c.Workers)
		if err != nil {
			return nil, err
		}
		pending = counts[client.TaskPending]
	} else {
		cl := client.New(base, c.ClientToken)
		defer cl.CloseIdleConnections()
		jobs := []string{s.jobID}
		if c.Accounts > 0 {
			jobs = slices.Sorted(maps.Keys(owner))
		}
		for _, id := range jobs {
			job, err := cl.GetJob(ctx, id)
			if err != nil {
				return nil, err
			}
			pending += job.Tasks.Pending
		}
	}
	report(out, c, res, pending)
	if c.JobWorkers != "" || c.Quorum > 0 {
		job, err := client.New(base, c.ClientToken).GetJob(ctx, s.jobID)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "job workers %q, quorum %d: %d chunks completed = %.0f chunks/s\n", job.Workers, job.Quorum,
			job.Tasks.Completed, float64(job.Tasks.Completed)/res.elapsed.Seconds())
	}
	if c.Accounts > 0 {
		reportShares(out, res, owner, weights)
	}
	return &s, nil
}

// seedJob creates one job of n hosted chunks of workload with POST /jobs. The no-op
// workers never fetch a chunk, so the URIs need not answer.
func seedJob(ctx context.Context, base string, c Config, workload string, n int) (string, error) {
	chunks := make([]client.ChunkRef, n)
	for i := range chunks {
		chunks[i] = client.ChunkRef{URI: fmt.Sprintf("https://bench.invalid/%d", i), SHA256: fmt.Sprintf("%064x", i)}
	}
	cl := client.New(base, c.ClientToken, client.WithTimeout(0))
	defer cl.CloseIdleConnections()
	job, err := cl.CreateJob(ctx, &client.JobRequest{Name: "bench", Workload: workload, TopK: 1, MaxAttempts: 3, LeaseSeconds: 600,
		Input: client.JobInput{Chunks: chunks}, Workers: c.JobWorkers, Quorum: c.Quorum}, "")
	if err != nil {
		return "", fmt.Errorf("seed a job of %d chunks: %w", n, err)
	}
	return job.JobID, nil
}

// grpcOptions are the options of every gRPC client of a run.
func grpcOptions(token string) []connect.ClientOption {
	opts := []connect.ClientOption{connect.WithGRPC()}
	if token != "" {
		opts = append(opts, connect.WithInterceptors(rpc.Bearer(token)))
	}
	return opts
}

// seedTrees submits n trees of one task of workload each, from c.Workers
// goroutines at once (Queue.Submit takes one tree a call), and returns
// their IDs.
func seedTrees(ctx context.Context, base string, c Config, workload string, n int) ([]string, error) {
	shard := c.Shard
	if shard == "" {
		shard = "s0"
	}
	hc := rpc.H2CClient()
	defer hc.CloseIdleConnections()
	q := scimeshv1connect.NewQueueClient(hc, base, grpcOptions(c.ClientToken)...)
	ids := make([]string, n)
	var next atomic.Int64
	errs := make([]error, c.Workers)
	var wg sync.WaitGroup
	for w := range c.Workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				resp, err := q.Submit(ctx, connect.NewRequest(&v1.SubmitRequest{Tasks: []*v1.TaskSpec{
					{Id: shard + ":t", Workload: workload, MaxAttempts: 3, LeaseSeconds: 600},
				}}))
				if err != nil {
					errs[w] = fmt.Errorf("seed tree %d of %d: %w", i+1, n, err)
					return
				}
				ids[i] = resp.Msg.RootId
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// noopResult is every no-op tree task's result.
var noopResult = structpb.NewNumberValue(1)

// driveGRPC is drive for gRPC: each worker polls one tree task (Poll,
// answering at once) and reports it done (Done), until c.Tasks lifecycles
// completed or ctx is done.
func driveGRPC(ctx context.Context, base, workload string, c Config) result {
	hc := rpc.H2CClient()
	defer hc.CloseIdleConnections()
	wc := scimeshv1connect.NewWorkerClient(hc, base, grpcOptions(c.WorkerToken)...)
	reqCtx := context.WithoutCancel(ctx)
	try := func(f func() error) (time.Duration, int, error) {
		return retry(func(err error) bool { return connect.CodeOf(err) == connect.CodeUnavailable }, f)
	}
	return work(ctx, c, func(id string, _ int) (lifecycle, error) {
		var task *connect.Response[v1.Task]
		claimed, claimRetried, err := try(func() (err error) {
			task, err = wc.Poll(reqCtx, connect.NewRequest(&v1.PollRequest{WorkerId: id, Workloads: []string{workload}}))
			return err
		})
		if err != nil {
			return lifecycle{}, fmt.Errorf("poll: %w", err)
		}
		t := task.Msg
		if t.TaskId == "" {
			return lifecycle{}, fmt.Errorf("poll found nothing with tasks left; the backlog ran out")
		}
		took, retried, err := try(func() error {
			_, err := wc.Done(reqCtx, connect.NewRequest(&v1.TaskStateTransition{TaskId: t.TaskId, WorkerId: id, Attempt: t.Attempt,
				Success: true, Result: noopResult}))
			return err
		})
		if err != nil {
			return lifecycle{}, fmt.Errorf("done %s: %w", t.TaskId, err)
		}
		return lifecycle{end: time.Now(), claim: claimed, result: took, tasks: 1, retried: claimRetried + retried}, nil
	})
}

// countTrees asks the coordinator for the state of every tree task of ids
// (Queue.Query, from workers goroutines at once) and counts them by state.
func countTrees(ctx context.Context, base, token string, ids []string, workers int) (map[string]int, error) {
	hc := rpc.H2CClient()
	defer hc.CloseIdleConnections()
	q := scimeshv1connect.NewQueueClient(hc, base, grpcOptions(token)...)
	var (
		next   atomic.Int64
		mu     sync.Mutex
		counts = map[string]int{}
		first  error
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				info, err := q.Query(ctx, connect.NewRequest(&v1.QueryRequest{TaskId: ids[i]}))
				mu.Lock()
				if err != nil {
					if first == nil {
						first = fmt.Errorf("query %s: %w", ids[i], err)
					}
					mu.Unlock()
					return
				}
				counts[info.Msg.State]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts, first
}

// announce makes the coordinator at base know that c's workers run
// c.Version of workload before the job is created, as workers that are
// connected when a job is submitted have said: a claim that finds
// nothing.
func announce(ctx context.Context, base string, c Config, workload string) error {
	cl := client.New(base, c.WorkerToken)
	defer cl.CloseIdleConnections()
	_, err := cl.ClaimMany(ctx, client.ClaimRequest{WorkerID: "bench-announce", Workloads: []string{workload},
		WorkloadVersions: workloadVersions([]string{workload}, c.Version)}, 1)
	return err
}
