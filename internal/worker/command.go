package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/scimesh/scimesh/internal/client"
)

// runCommand runs the operator's command of wl for task t: in its own
// directory and process group, the chunk streamed from in to its stdin,
// its stdout to out, its stderr lines to the task's log. Cancelling ctx
// kills the command and everything it started; so does kill, which the
// stdin feeder calls when the download breaks. Every process the command
// started that is left when it exits is killed too.
func (w *Worker) runCommand(ctx context.Context, kill context.CancelCauseFunc, wl Workload, t *client.Task, in *verifier, out io.Writer, log *slog.Logger) error {
	env, err := w.taskEnv(t)
	if err != nil {
		return err
	}
	dir, err := w.attemptDir(t.TaskID, t.Attempt)
	if err != nil {
		return err
	}
	defer w.removeAttemptDir(dir, log)

	ship := newShipper(restLogSink(w.client, t, w.cfg.ID), w.cfg.ID, log, w.cfg.LogInterval, w.cfg.LogBatch)
	var shipping sync.WaitGroup
	shipping.Go(func() { ship.run(context.WithoutCancel(ctx)) })
	defer func() {
		ship.close()
		shipping.Wait()
	}()
	stderr := &lineWriter{emit: ship.add}

	stdin, feed, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("make the command's stdin: %w", err)
	}
	sh, err := startShell(ctx, shellSpec{command: wl.Command, dir: dir, env: env, stdin: stdin, stdout: out, stderr: stderr})
	stdin.Close()
	if err != nil {
		feed.Close()
		return fmt.Errorf("start the command: %w", err)
	}
	log.Debug("command started", "pid", sh.pid(), "dir", dir)

	var feeding sync.WaitGroup
	feeding.Go(func() {
		// A command may stop reading before the end (EPIPE); the caller
		// reads the rest to check the input's sha256.
		_, _ = io.Copy(feed, in)
		feed.Close()
		if err := in.failed(); err != nil {
			kill(err)
		}
	})
	waitErr := sh.wait() // which kills whatever it left running
	if waitErr != nil || ctx.Err() != nil {
		in.abort()
	}
	feed.Close() // unblocks a write to a pipe that a leftover process held
	feeding.Wait()
	stderr.flush()

	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if waitErr != nil {
		return fmt.Errorf("%w%s", waitErr, tailText(stderr.lastLines()))
	}
	return nil
}

// tailText quotes a command's last stderr lines for an error message.
func tailText(lines []string) string {
	if len(lines) == 0 {
		return "; it wrote nothing to stderr"
	}
	const limit = 4 << 10
	text := strings.Join(lines, "\n")
	if len(text) > limit {
		text = "…" + text[len(text)-limit:]
	}
	return "; its last stderr lines:\n" + text
}

// maxEnvValue is the most a variable may hold on Linux (MAX_ARG_STRLEN,
// 128 KiB, name and "=" included).
const maxEnvValue = 128<<10 - 1

// taskEnv is the environment of a command run for t: what commandEnv
// passes on of the worker's own, plus the task's variables.
func (w *Worker) taskEnv(t *client.Task) ([]string, error) {
	params := []byte("{}")
	if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
		var buf bytes.Buffer
		if err := json.Compact(&buf, t.Parameters); err != nil {
			return nil, Permanent(fmt.Errorf("the task's parameters are not JSON: %w", err))
		}
		params = buf.Bytes()
	}
	if len("SCIMESH_PARAMETERS=")+len(params) > maxEnvValue {
		return nil, Permanent(fmt.Errorf("the job's parameters are %d bytes of JSON, more than the 128 KiB an environment variable can hold; put large data in the input instead", len(params)))
	}
	hasHeader := "false"
	if t.HasHeader {
		hasHeader = "true"
	}
	return w.commandEnv(
		"SCIMESH_TASK_ID="+t.TaskID,
		"SCIMESH_JOB_ID="+t.JobID,
		"SCIMESH_CHUNK_INDEX="+strconv.Itoa(t.ChunkIndex),
		"SCIMESH_ATTEMPT="+strconv.Itoa(t.Attempt),
		"SCIMESH_PARAMETERS="+string(params),
		"SCIMESH_WORKLOAD="+t.Workload,
		"SCIMESH_WORKER_ID="+w.cfg.ID,
		"SCIMESH_HAS_HEADER="+hasHeader,
		"SCIMESH_TOP_K="+strconv.Itoa(t.TopK),
		"SCIMESH_SCORE_COLUMN="+t.ScoreColumn,
		"SCIMESH_ORDER="+t.Order,
	), nil
}

// safeName makes a task ID one safe path element. IDs are SHARD:LOCAL of
// [A-Za-z0-9._:-], which stay as they are (':' is fine on Linux and macOS);
// any other byte becomes '_', and "." or ".." gets a leading '_', so that an
// ID can never name a directory outside the work directory.
func safeName(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// attemptDir makes the empty directory WORK_DIR/TASK_ID/ATTEMPT for an
// attempt of t, removing what a previous run may have left there.
func (w *Worker) attemptDir(taskID string, attempt int) (string, error) {
	dir := filepath.Join(w.cfg.WorkDir, safeName(taskID), strconv.Itoa(attempt))
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear the work directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create the work directory %s (check --work-dir): %w", dir, err)
	}
	return dir, nil
}

// removeAttemptDir removes an attempt's directory, and its task's when
// that is left empty, unless the operator keeps them.
func (w *Worker) removeAttemptDir(dir string, log *slog.Logger) {
	if w.cfg.KeepWorkDirs {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		log.Warn("could not remove the work directory", "dir", dir, "error", err)
		return
	}
	// The task's directory stays while it holds another attempt's.
	_ = os.Remove(filepath.Dir(dir))
}
