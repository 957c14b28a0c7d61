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

// A persistent workload's command runs once per slot and is handed chunk
// after chunk in frames over its stdin and stdout: docs/workload-protocol.md
// is the protocol's definition.

// protocolEnv tells a persistent process which protocol it is to speak.
const protocolEnv = "SCIMESH_PROTOCOL=frames/1"

// Limits of the frames a persistent process sends.
const (
	maxFrameHeader = 64       // "TYPE LENGTH\n"
	maxErrorFrame  = 64 << 10 // an error's message; the rest is dropped
	// stopWait is how long a process whose stdin was closed has to exit
	// before it is killed.
	stopWait = 10 * time.Second
)

// slotProcs are the persistent processes of one slot, by workload name.
// A slot runs one task at a time, so only that task uses them.
type slotProcs struct {
	w     *Worker
	dir   string // the slot's directory, the processes' working directory
	procs map[string]*persistentProc
}

// newSlotProcs returns the processes of slot number slot, in the
// directory WORK_DIR/slot-WORKER_ID-N, which no other worker sharing the
// work directory uses.
func (w *Worker) newSlotProcs(slot int) *slotProcs {
	dir := filepath.Join(w.cfg.WorkDir, "slot-"+safeName(w.cfg.ID)+"-"+strconv.Itoa(slot))
	return &slotProcs{w: w, dir: dir, procs: map[string]*persistentProc{}}
}

// close stops every process: its stdin is closed, which tells it to exit,
// and one still running after stopWait is killed.
func (sp *slotProcs) close() {
	var wg sync.WaitGroup
	for _, p := range sp.procs {
		wg.Go(p.stop)
	}
	wg.Wait()
	clear(sp.procs)
	if !sp.w.cfg.KeepWorkDirs {
		_ = os.RemoveAll(sp.dir)
	}
}

// persistentProc is one running persistent process.
type persistentProc struct {
	sh     *shell
	stdin  *os.File      // the worker's end
	stdout *os.File      // the worker's end
	out    *bufio.Reader // on stdout, kept from chunk to chunk
	exited chan struct{} // closed when the process has ended
	err    error         // how it ended, once exited is closed
	stderr *sharedLines
}

// get returns the slot's process of wl, starting it when there is none,
// it has ended, or it wrote to stdout after its last chunk's answer: what
// it wrote then would be read as the next chunk's output, maybe another
// job's, so it is killed instead.
func (sp *slotProcs) get(ctx context.Context, wl Workload, log *slog.Logger) (_ *persistentProc, err error) {
	if p := sp.procs[wl.Name]; p != nil {
		select {
		case <-p.exited:
			p.release()
			delete(sp.procs, wl.Name)
		default:
			if !p.wroteSinceAnswer() {
				return p, nil
			}
			log.Warn("the persistent command wrote to stdout after its last chunk's done or error frame, which the next chunk would read as its own output: it was killed, and a new one starts (docs/workload-protocol.md)",
				"workload", wl.Name, "pid", p.sh.pid())
			p.kill()
			p.release()
			delete(sp.procs, wl.Name)
		}
	}
	if err = os.MkdirAll(sp.dir, 0o750); err != nil {
		return nil, fmt.Errorf("create the slot's directory %s (check --work-dir): %w", sp.dir, err)
	}
	var ends [6]*os.File // stdin, stdout and stderr: each pipe's read end, then its write end
	for i := 0; i < len(ends); i += 2 {
		if ends[i], ends[i+1], err = os.Pipe(); err != nil {
			for _, f := range ends[:i] {
				f.Close()
			}
			return nil, fmt.Errorf("make the persistent command's pipes: %w", err)
		}
	}
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW := ends[0], ends[1], ends[2], ends[3], ends[4], ends[5]
	growPipe(stdinW, pipeSize)
	growPipe(stdoutW, pipeSize)
	p := &persistentProc{stdin: stdinW, stdout: stdoutR, exited: make(chan struct{}), stderr: newSharedLines(log)}
	env := sp.w.commandEnv(protocolEnv, "SCIMESH_WORKLOAD="+wl.Name, "SCIMESH_WORKER_ID="+sp.w.cfg.ID)
	// The process outlives any one task: it is the worker's to end
	// (stop, kill), not a task's context's.
	sh, err := startShell(context.WithoutCancel(ctx), shellSpec{command: wl.Command, dir: sp.dir, env: env, stdin: stdinR, stdout: stdoutW, stderr: stderrW})
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		return nil, fmt.Errorf("start the persistent command: %w", err)
	}
	go p.stderr.pump(stderrR)
	p.sh = sh
	p.out = bufio.NewReaderSize(stdoutR, bufSize)
	go func() {
		p.err = sh.wait()
		close(p.exited)
	}()
	log.Info("persistent command started", "workload", wl.Name, "pid", sh.pid(), "dir", sp.dir)
	sp.procs[wl.Name] = p
	return p, nil
}

// wroteSinceAnswer reports whether the process, between chunks, has
// written to its stdout (or closed it) since its last answer: bytes the
// worker has read past the answer's end, or bytes in the pipe.
func (p *persistentProc) wroteSinceAnswer() bool {
	return p.out.Buffered() > 0 || pending(p.stdout)
}

// kill ends the process and everything it started, and waits until it has
// ended.
func (p *persistentProc) kill() {
	p.sh.kill()
	p.stdin.Close()
	<-p.exited
	_ = p.stdout.SetReadDeadline(time.Now().Add(waitDelay))
}

// stop closes the process's stdin and gives it stopWait to exit, then
// kills it.
func (p *persistentProc) stop() {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(stopWait):
		p.kill()
	}
	p.release()
}

// release closes the worker's ends of an ended process's pipes.
func (p *persistentProc) release() {
	p.stdin.Close()
	p.stdout.Close()
}

// taskFrame is the body of a task frame.
type taskFrame struct {
	TaskID      string          `json:"task_id"`
	JobID       string          `json:"job_id"`
	ChunkIndex  int             `json:"chunk_index"`
	Attempt     int             `json:"attempt"`
	Workload    string          `json:"workload"`
	Parameters  json.RawMessage `json:"parameters"`
	HasHeader   bool            `json:"has_header"`
	TopK        int             `json:"top_k"`
	ScoreColumn string          `json:"score_column"`
	Order       string          `json:"order"`
	WorkDir     string          `json:"work_dir"`
}

// runPersistent runs task t on the slot's process of wl: the chunk is
// downloaded and checked into a file in the attempt's directory, sent as
// a task frame and an input frame, and the output frames that come back
// go to keep until a done frame. An error frame fails the task and leaves
// the process up; anything else that goes wrong (the process exits,
// writes what is not a frame or an output keep refuses, or ctx ends: a
// timeout, a lost lease, the worker's shutdown) kills the process, to be
// started again for the next chunk.
func (w *Worker) runPersistent(ctx context.Context, wl Workload, t *client.Task, in *verifier, keep *table.TopK, sp *slotProcs, log *slog.Logger) (*table.Selection, error) {
	dir, err := w.attemptDir(t.TaskID, t.Attempt)
	if err != nil {
		return nil, err
	}
	defer w.removeAttemptDir(dir, log)
	buf := w.readers.Get().(*bufio.Reader)
	input, err := w.saveInput(dir, in, buf)
	buf.Reset(nil)
	w.readers.Put(buf)
	if err != nil {
		return nil, err
	}
	defer input.Close()
	fi, err := input.Stat()
	if err != nil {
		return nil, fmt.Errorf("read the input's file: %w", err)
	}
	params, err := taskParams(t)
	if err != nil {
		return nil, err
	}
	task, err := json.Marshal(taskFrame{
		TaskID: t.TaskID, JobID: t.JobID, ChunkIndex: t.ChunkIndex, Attempt: t.Attempt, Workload: t.Workload,
		Parameters: params, HasHeader: t.HasHeader, TopK: t.TopK, ScoreColumn: t.ScoreColumn, Order: t.Order, WorkDir: dir,
	})
	if err != nil {
		return nil, fmt.Errorf("write the task frame: %w", err)
	}

	p, err := sp.get(ctx, wl, w.log)
	if err != nil {
		return nil, err
	}
	ship := w.shipLogs(ctx, restLogSink(w.client, t, w.cfg.ID), log)
	p.stderr.to(ship.add)
	defer func() {
		p.stderr.to(nil)
		ship.close()
	}()

	sent := make(chan error, 1)
	go func() {
		buf := w.readers.Get().(*bufio.Reader)
		defer w.readers.Put(buf)
		sent <- sendChunk(p.stdin, task, input, fi.Size(), buf)
	}()
	type parse struct {
		best *table.Selection
		err  error
	}
	fr := &frameReader{r: p.out}
	parsed := make(chan parse, 1)
	go func() {
		best, err := keep.Select(fr)
		parsed <- parse{best, err}
	}()

	var r parse
	select {
	case r = <-parsed:
	case <-p.exited:
		// Its stdout ends with it, after what it answered, unless a
		// process it started holds it open: then waitDelay later.
		_ = p.stdout.SetReadDeadline(time.Now().Add(waitDelay))
		r = <-parsed
	case <-ctx.Done():
		p.kill()
		<-parsed
		return nil, context.Cause(ctx)
	}
	switch {
	case r.err == nil || fr.failure != "":
		// It answered (done or error), and is in step for the next
		// chunk once it has read all of this one.
		if err := waitSent(ctx, sent, p); err != nil {
			return nil, err
		}
		if fr.failure != "" {
			return nil, fmt.Errorf("the workload failed the chunk: %s", fr.failure)
		}
		return r.best, nil
	case fr.eof:
		// Its stdout ended: most likely it exited, and how says more.
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the persistent command ended with the chunk: %w%s", exitErr(p.err), tailText(p.stderr.lastLines()))
		case <-time.After(waitDelay):
		}
	}
	p.kill()
	var bad *protocolError
	if errors.As(r.err, &bad) || errors.As(fr.err, &bad) {
		return nil, fmt.Errorf("the persistent command broke the protocol (docs/workload-protocol.md), so it was killed: %w%s", bad, tailText(p.stderr.lastLines()))
	}
	return nil, fmt.Errorf("the workload's output is unusable, so the persistent command was killed: %w", r.err)
}

// exitErr words how a process ended that reported no error of its own.
func exitErr(err error) error {
	if err == nil {
		return errors.New("it exited with status 0")
	}
	return err
}

// waitSent waits for the chunk to have been written to the process, which
// answered already: one that answers without reading its input is out of
// step and is killed.
func waitSent(ctx context.Context, sent <-chan error, p *persistentProc) error {
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case err := <-sent:
		if err != nil {
			p.kill()
			return fmt.Errorf("send the chunk to the persistent command: %w", err)
		}
		return nil
	case <-ctx.Done():
		p.kill()
		return context.Cause(ctx)
	case <-timer.C:
		p.kill()
		return errors.New("the persistent command answered without reading all of its chunk, so it was killed (docs/workload-protocol.md)")
	}
}

// sendChunk writes a task frame and an input frame of size bytes from
// input, through buf (its large buffer, so that the command is woken
// seldom).
func sendChunk(w io.Writer, task []byte, input io.Reader, size int64, buf *bufio.Reader) error {
	if _, err := fmt.Fprintf(w, "task %d\n%s", len(task), task); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "input %d\n", size); err != nil {
		return err
	}
	// Hide w's ReadFrom, which would copy in small pieces: the copy goes
	// through buf.
	buf.Reset(io.LimitReader(input, size))
	_, err := buf.WriteTo(struct{ io.Writer }{w})
	buf.Reset(nil)
	return err
}

// protocolError is a frame, or what should have been one, that the
// protocol does not allow.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// frameReader reads the bodies of a chunk's output frames as one stream,
// which ends (io.EOF) at its done frame. An error frame ends it too, with
// failure set to its message; a frame of any other kind, or bytes that
// are no frame, are a protocolError.
type frameReader struct {
	r       *bufio.Reader
	left    int64 // of the current output frame
	failure string
	eof     bool // stdout ended
	err     error
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	for f.left == 0 {
		kind, n, err := f.header()
		if err != nil {
			f.err = err
			return 0, err
		}
		switch kind {
		case "output":
			f.left = n
		case "done":
			if n != 0 {
				f.err = &protocolError{fmt.Sprintf("a done frame of %d bytes; it has none", n)}
				return 0, f.err
			}
			f.err = io.EOF
			return 0, io.EOF
		case "error":
			msg, err := io.ReadAll(io.LimitReader(f.r, min(n, maxErrorFrame)))
			if err == nil && n > maxErrorFrame {
				_, err = f.r.Discard(int(n - maxErrorFrame))
			}
			if err != nil {
				f.err = fmt.Errorf("read an error frame: %w", err)
				return 0, f.err
			}
			f.failure = strings.TrimSpace(string(bytes.ToValidUTF8(msg, []byte("?"))))
			if f.failure == "" {
				f.failure = "(an empty error frame)"
			}
			f.err = io.EOF
			return 0, io.EOF
		default:
			f.err = &protocolError{fmt.Sprintf("a frame of type %q; a chunk's answer is output, done or error frames", kind)}
			return 0, f.err
		}
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= int64(n)
	if err == io.EOF {
		f.eof = true
		err = &protocolError{"the output ended inside a frame"}
	}
	if err != nil {
		f.err = err
	}
	return n, err
}

// header reads a frame's header line, "TYPE LENGTH\n".
func (f *frameReader) header() (string, int64, error) {
	var line []byte
	for {
		c, err := f.r.ReadByte()
		f.eof = err == io.EOF
		if f.eof && len(line) == 0 {
			return "", 0, &protocolError{"the output ended before the chunk's done frame"}
		}
		if err != nil {
			return "", 0, &protocolError{"the output ended inside a frame's header"}
		}
		if c == '\n' {
			break
		}
		if line = append(line, c); len(line) > maxFrameHeader {
			return "", 0, &protocolError{fmt.Sprintf("%q… is not a frame header (TYPE LENGTH); only frames may be written to stdout, diagnostics go to stderr", line)}
		}
	}
	kind, size, ok := strings.Cut(string(line), " ")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || n < 0 || kind == "" {
		return "", 0, &protocolError{fmt.Sprintf("%q is not a frame header (TYPE LENGTH); only frames may be written to stdout, diagnostics go to stderr", line)}
	}
	return kind, n, nil
}

// sharedLines is a persistent process's stderr: its lines go to the task
// it is working on (to), or to the worker's log between tasks. pump reads
// the pipe; to first takes in whatever the process wrote before it was
// called, so that a line written before a chunk's done frame is that
// chunk's.
type sharedLines struct {
	mu   sync.Mutex
	w    lineWriter
	task func(string) // nil between tasks
	log  *slog.Logger
	pipe *os.File // the read end, once pump runs
}

func newSharedLines(log *slog.Logger) *sharedLines {
	s := &sharedLines{log: log}
	s.w.emit = func(line string) {
		if s.task != nil {
			s.task(line)
			return
		}
		s.log.Info("persistent command", "stderr", line)
	}
	return s
}

// to sends the lines to emit from now on, and those waiting in the pipe
// first to where they went so far; nil sends them to the log. A task's
// lines, a last one without "\n" included, are its own, and so are the
// last lines its error quotes.
func (s *sharedLines) to(emit func(string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drain()
	if emit == nil {
		s.w.flush()
	} else {
		s.w.tail, s.w.tailNext = s.w.tail[:0], 0
	}
	s.task = emit
}

// lastLines are the last lines of the current task, those waiting in the
// pipe included.
func (s *sharedLines) lastLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drain()
	return s.w.lastLines()
}

// lockedWriter writes to s's lines under its lock.
type lockedWriter struct{ s *sharedLines }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.w.Write(p)
}
