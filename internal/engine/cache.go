package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
	"github.com/scimesh/scimesh/internal/store"
	"github.com/scimesh/scimesh/internal/table"
)

// The chunk cache remembers chunk outputs under cacheKey: the hash of
// everything an output depends on. An output is remembered when a worker
// that says which version of the workload it ran completes a chunk, for
// the job's owner alone, and only from a trusted worker: a job that only
// trusted workers may run can then take any remembered output.

// cacheKey is the key of the output of a chunk of job j whose input has
// the hash inputSHA256, run by version of j's workload: the owner, the
// workload, its version, the parameters (compact JSON), the score column,
// the order, the input and whether it has a header line, each with its
// length before it, so that no two lists of parts run together alike.
func cacheKey(j *domain.Job, version, inputSHA256 string) string {
	var params bytes.Buffer
	if err := json.Compact(&params, j.Parameters); err != nil {
		params.Reset()
		params.Write(j.Parameters) // stored valid; as it is, should it not be
	}
	h := sha256.New()
	for _, part := range []string{j.Owner, j.Workload, version, params.String(), j.ScoreColumn, string(j.Order),
		inputSHA256, strconv.FormatBool(j.HasHeader)} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cacheEntry is what the chunk cache remembers of chunk task t, just
// completed by p with an output of rows rows, or nil when it remembers
// nothing: the job does not use the cache, or the worker is untrusted.
func (e *Engine) cacheEntry(ctx context.Context, q store.Querier, t *domain.Task, p CompleteTaskParams, rows int, now time.Time) (*store.CacheEntry, error) {
	j, err := e.jobSettingsIn(ctx, q, t.JobID)
	if err != nil {
		return nil, err
	}
	if j.NoCache || !p.trusted {
		return nil, nil
	}
	return &store.CacheEntry{Key: cacheKey(j, p.Version, t.InputSHA256), TaskID: t.ID, Rows: rows, TopK: j.TopK, CreatedAt: now}, nil
}

// Creation-time hits hold the outputs they reuse until the job's tasks
// are written: at most cacheHoldBytes of them, past which the other
// chunks run as if the cache had missed.
const cacheHoldBytes = 256 << 20

// cacheKeysRead is how many keys one read of the chunk cache asks for.
const cacheKeysRead = 1000

// announcedVersion returns the one version of workload that connected
// workers announce, or "" when none or several do: which of several a
// job would run is not known when it is created.
func (e *Engine) announcedVersion(ctx context.Context, workload string) (string, error) {
	ws, err := e.store.WorkerList(ctx, &store.WorkerListParams{Since: e.now().Add(-WorkersWindow), Limit: maxWorkersRead})
	if err != nil {
		return "", mapStoreErr(err)
	}
	version := ""
	for _, w := range ws {
		v := w.Versions[workload]
		switch {
		case v == "" || v == version:
		case version == "":
			version = v
		default:
			return "", nil
		}
	}
	return version, nil
}

// reuseOutputs sets Cached on the inputs of job j whose outputs the chunk
// cache remembers for the version of j's workload that connected workers
// announce, and returns how many it set: each output as a fresh run would
// give it, the best top_k rows of one that kept at least that many, or
// every row. It sets j.CacheVersion to the version it looked up.
func (e *Engine) reuseOutputs(ctx context.Context, j *domain.Job, inputs []chunkInput) (int, error) {
	if j.NoCache {
		return 0, nil
	}
	version, err := e.announcedVersion(ctx, j.Workload)
	if err != nil || version == "" {
		return 0, err
	}
	j.CacheVersion = version
	keep, err := table.NewTopK(j.ScoreColumn, j.Order, j.TopK)
	if err != nil {
		return 0, err
	}
	n, held := 0, 0
	for start := 0; start < len(inputs); start += cacheKeysRead {
		batch := inputs[start:min(start+cacheKeysRead, len(inputs))]
		keys := make([]string, len(batch))
		for i, in := range batch {
			keys[i] = cacheKey(j, version, in.SHA256)
		}
		found, err := e.store.CacheGet(ctx, keys)
		if err != nil {
			return 0, mapStoreErr(fmt.Errorf("read the chunk cache: %w", err))
		}
		for i, key := range keys {
			c, ok := found[key]
			if !ok || (c.Rows < j.TopK && c.Rows >= c.TopK) { // kept fewer than asked, not for want of rows
				continue
			}
			out, err := e.cachedOutput(ctx, c, keep, j.TopK)
			if err != nil {
				return n, err
			}
			if out == nil {
				continue // its task went meanwhile: the chunk runs
			}
			if held += len(out); held > cacheHoldBytes {
				j.CacheVersion = "" // the rest were not looked up: claims look them up
				return n, nil
			}
			batch[i].Cached = out
			n++
		}
	}
	return n, nil
}

// cachedOutput returns the output entry c remembers as a run keeping
// topK rows gives it, or nil when its task is gone or holds no output.
func (e *Engine) cachedOutput(ctx context.Context, c store.CacheEntry, keep *table.TopK, topK int) ([]byte, error) {
	t, err := e.store.TaskGet(ctx, c.TaskID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.State != domain.TaskCompleted) {
		return nil, nil
	}
	if err != nil {
		return nil, mapStoreErr(fmt.Errorf("read the cached output of task %s: %w", c.TaskID, err))
	}
	if c.Rows <= topK {
		return t.Result, nil
	}
	sel, err := keep.Select(bytes.NewReader(t.Result))
	if err != nil {
		return nil, fmt.Errorf("select the best %d rows of the cached output of task %s: %w", topK, c.TaskID, err)
	}
	var b bytes.Buffer
	if err := sel.WriteCSV(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// serveFromCache completes from the chunk cache the chunk tasks of views,
// just leased to worker p.WorkerID, whose outputs it remembers for the
// versions of their workloads the worker announces (p.Versions), and
// returns the others, for the worker to run. A task the cache cannot
// complete (its entry or output is gone, a read fails) runs. The chunks
// of a job created while its workers announced that version were looked
// up then, and are not looked up again: a claim pays for no lookup that
// the job's creation made already.
func (e *Engine) serveFromCache(ctx context.Context, p ClaimTasksParams, views []*TaskView) []*TaskView {
	if len(p.Versions) == 0 {
		return views
	}
	var keys []string
	var asked []*TaskView // the task of each key
	for _, v := range views {
		version := p.Versions[v.Workload]
		if v.Kind != domain.KindChunk || v.Job == nil || v.Job.NoCache || version == "" || version == v.Job.CacheVersion {
			continue
		}
		keys = append(keys, cacheKey(v.Job, version, v.InputSHA256))
		asked = append(asked, v)
	}
	if len(keys) == 0 {
		return views
	}
	found, err := e.store.CacheGet(ctx, keys)
	if err != nil {
		e.log.WarnContext(ctx, "could not read the chunk cache for a claim; its tasks run", "tasks", len(keys), "error", err)
		return views
	}
	var items []CompleteTaskParams
	for i, key := range keys {
		c, ok := found[key]
		j := asked[i].Job
		if !ok || (c.Rows < j.TopK && c.Rows >= c.TopK) {
			continue
		}
		keep, err := table.NewTopK(j.ScoreColumn, j.Order, j.TopK)
		var out []byte
		if err == nil {
			out, err = e.cachedOutput(ctx, c, keep, j.TopK)
		}
		if err != nil {
			e.log.WarnContext(ctx, "could not read a remembered output; the task runs", "task_id", asked[i].ID, "error", err)
		}
		if out == nil {
			continue
		}
		items = append(items, CompleteTaskParams{TaskID: asked[i].ID, WorkerID: p.WorkerID, Attempt: asked[i].Attempt,
			Output: out, owner: p.WorkerID, fromCache: true})
	}
	if len(items) == 0 {
		return views
	}
	res, err := e.completeTasks(ctx, items)
	if err != nil {
		e.log.WarnContext(ctx, "could not complete tasks from the chunk cache; they run", "tasks", len(items), "error", err)
		return views
	}
	done := map[string]bool{} // no longer the worker's to run: completed, or failed by a check
	for i, r := range res {
		if r.Err == nil {
			done[items[i].TaskID] = true
		}
	}
	return slices.DeleteFunc(views, func(v *TaskView) bool { return done[v.ID] })
}
