package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/client"
	"github.com/scimesh/scimesh/internal/table"
)

// Buffers of a command's streams. A compute-bound command should have its
// core to itself: the worker reads its output in large pieces, so that a
// read catches up with many of its writes, and hands it its input as a
// file it reads without waking the worker at all.
const (
	// bufSize is the buffer the input is downloaded to its file with,
	// and then the read buffer of the command's stdout.
	bufSize = 1 << 20
	// pipeSize is the size asked for a command's stdout pipe on Linux
	// (F_SETPIPE_SZ; 1 MiB is the default pipe-max-size, so an
	// unprivileged worker gets it).
	pipeSize = 1 << 20
)

// inputName is the file in an attempt's directory that its chunk is
// downloaded to. It is removed from the directory once opened as the
// command's stdin (the command sees the directory empty, as it was),
// unless the operator keeps work directories.
const inputName = ".scimesh-input"

// runCommand runs the operator's command of wl for task t and returns the
// best rows of its output. The chunk is downloaded from in to a file in
// the attempt's directory and checked (size, sha256) before the command
// starts; that file, opened read-only, is the command's stdin. Its
// stdout goes through a pipe straight to keep, its stderr lines to the
// task's log. Cancelling ctx kills the command and everything it
// started, and so does an output keep refuses; every process the command
// started that is left when it exits is killed too.
func (w *Worker) runCommand(ctx context.Context, wl Workload, t *client.Task, in *verifier, keep *table.TopK, log *slog.Logger) (*table.Selection, error) {
	dir, err := w.attemptDir(t.TaskID, t.Attempt)
	if err != nil {
		return nil, err
	}
	defer w.removeAttemptDir(dir, log)
	// One buffer serves the download, then the output.
	buf := w.readers.Get().(*bufio.Reader)
	defer func() {
		buf.Reset(nil)
		w.readers.Put(buf)
	}()
	stdin, err := w.saveInput(dir, in, buf)
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	env, err := w.taskEnv(t)
	if err != nil {
		return nil, err
	}

	ship := w.shipLogs(ctx, restLogSink(w.client, t, w.cfg.ID), log)
	defer ship.close()
	stderr := &lineWriter{emit: ship.add}

	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	stdout, out, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the command's stdout: %w", err)
	}
	defer stdout.Close()
	growPipe(out, pipeSize)
	sh, err := startShell(runCtx, shellSpec{command: wl.Command, dir: dir, env: env, stdin: stdin, stdout: out, stderr: stderr})
	out.Close()
	stdin.Close()
	if err != nil {
		return nil, fmt.Errorf("start the command: %w", err)
	}
	log.Debug("command started", "pid", sh.pid(), "dir", dir)

	// The output is parsed as it comes; a bad output stops the command
	// at once. One found only at its end (empty, say) does not: the
	// command has closed its stdout, most likely by exiting, and how it
	// exited says more.
	type parse struct {
		best *table.Selection
		err  error
	}
	parsed := make(chan parse, 1)
	go func() {
		r := &endReader{r: stdout}
		buf.Reset(r)
		best, err := keep.Select(buf)
		if err != nil && !r.ended {
			stopRun(&outputError{err})
		}
		parsed <- parse{best, err}
	}()
	waitErr := sh.wait() // which kills whatever it left running
	// What it left and could not kill (outside Linux, a process that left
	// its group) may hold stdout open: the output ends waitDelay later.
	_ = stdout.SetReadDeadline(time.Now().Add(waitDelay))
	p := <-parsed
	stderr.flush()

	var bad *outputError
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case errors.As(context.Cause(runCtx), &bad):
		return nil, fmt.Errorf("the workload's output is unusable: %w", bad.err)
	case waitErr != nil:
		return nil, fmt.Errorf("%w%s", waitErr, tailText(stderr.lastLines()))
	case errors.Is(p.err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("the command exited, but processes it started kept its stdout open for %v more; they were left running%s", waitDelay, tailText(stderr.lastLines()))
	case p.err != nil:
		return nil, fmt.Errorf("the workload's output is unusable: %w", p.err)
	}
	return p.best, nil
}

// newReaderPool returns a pool of readers with buffers of bufSize for
// runCommand, so that a worker does not take and clear fresh memory (a
// page fault every 4 KiB) for each chunk.
func newReaderPool() *sync.Pool {
	return &sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
}

// endReader notes when r has come to its end, or failed.
type endReader struct {
	r     io.Reader
	ended bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.ended = true
	}
	return n, err
}

// saveInput downloads the task's input from in, through buf, to the file
// inputName in dir, checks its size and sha256, and returns the file
// opened read-only at its start. Its errors are the verifier's, or say
// that the file could not be written.
func (w *Worker) saveInput(dir string, in *verifier, buf *bufio.Reader) (*os.File, error) {
	path := filepath.Join(dir, inputName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the input's file (check --work-dir): %w", err)
	}
	// Hiding f's ReadFrom makes the copy read into buf's whole buffer
	// (os.File's own falls back to 32 KiB for a reader that is not a file
	// or socket).
	buf.Reset(in)
	_, err = buf.WriteTo(struct{ io.Writer }{f})
	if closeErr := f.Close(); err == nil && closeErr != nil {
		err = closeErr
	}
	if ferr := in.failed(); ferr != nil {
		return nil, ferr
	}
	if err != nil {
		return nil, fmt.Errorf("write the input to %s (check --work-dir's free space): %w", path, err)
	}
	if err := in.finish(); err != nil {
		return nil, err
	}
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open the input's file: %w", err)
	}
	if !w.cfg.KeepWorkDirs {
		_ = os.Remove(path) // the open file stays readable
	}
	return r, nil
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

// taskParams is t's parameters as compact JSON, {} when it has none.
func taskParams(t *client.Task) ([]byte, error) {
	if len(t.Parameters) == 0 || string(t.Parameters) == "null" {
		return []byte("{}"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, t.Parameters); err != nil {
		return nil, Permanent(fmt.Errorf("the task's parameters are not JSON: %w", err))
	}
	return buf.Bytes(), nil
}

// taskEnv is the environment of a command run for t: what commandEnv
// passes on of the worker's own, plus the task's variables.
func (w *Worker) taskEnv(t *client.Task) ([]string, error) {
	params, err := taskParams(t)
	if err != nil {
		return nil, err
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
