package binary

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/scimesh/scimesh/internal/testenv"
)

// Proc is a running process of a binary.
type Proc struct {
	Cmd *exec.Cmd
	// URL is a coordinator's base URL, once Serve has found it.
	URL string
	// Stderr holds what the process wrote, to standard output and error.
	Stderr *testenv.Buffer
	exited chan struct{} // closed once the process has exited
	err    error         // its exit, set before exited is closed
}

// Exited is closed once the process has exited; Err then says how.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is how the process exited: nil for status 0. Call it once Exited is
// closed.
func (p *Proc) Err() error { return p.err }

// Wait waits until the process has exited and says how.
func (p *Proc) Wait() error {
	<-p.exited
	return p.err
}

// Start runs `path args…` in dir with env added to a clean environment
// (PATH, and HOME set to dir). It is killed at t's cleanup, and its output
// logged if t failed.
func Start(t testing.TB, path, dir string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	p := &Proc{Cmd: cmd, Stderr: &testenv.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.Stderr
	cmd.Stdout = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("scimesh %v output:\n%s", args, testenv.LastLines(p.Stderr.String(), 30))
		}
	})
	return p
}

// servingRe finds the URL a coordinator serves on in its log.
var servingRe = regexp.MustCompile(`msg=serving addr=\S+ url=(\S+)`)

// Serve starts `path serve --addr addr args…`, as Start does, and waits
// until it is ready, asking it with hc (such as a client that trusts the
// authority of its TLS certificate). With port 0 the kernel picks a free
// port, which the coordinator logs: unlike a port chosen beforehand, no
// test running alongside can take it meanwhile.
func Serve(t testing.TB, hc *http.Client, path, dir, addr string, env []string, args ...string) *Proc {
	t.Helper()
	p := Start(t, path, dir, env, append([]string{"serve", "--addr", addr}, args...)...)
	if !strings.HasSuffix(addr, ":0") {
		p.URL = "http://" + addr // known already: no need of the log line
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p.URL == "" {
			if m := servingRe.FindStringSubmatch(p.Stderr.String()); m != nil {
				p.URL = m[1]
			}
		}
		if p.URL != "" {
			resp, err := hc.Get(p.URL + "/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return p
				}
			}
		}
		select {
		case <-p.Exited():
			t.Fatalf("serve exited early (%v):\n%s", p.Err(), p.Stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 30s:\n%s", p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run runs `path args…` in dir, as Start does, to the end and returns its
// combined output.
func Run(ctx context.Context, path, dir string, env []string, args ...string) (string, error) {
	cmd := command(ctx, path, dir, env, args)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Output runs `path args…` in dir, as Start does, to the end and returns
// its standard output; its standard error comes with a failure.
func Output(ctx context.Context, path, dir string, env []string, args ...string) (string, error) {
	cmd := command(ctx, path, dir, env, args)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// command is `path args…` in dir with env added to a clean environment.
func command(ctx context.Context, path, dir string, env, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	return cmd
}
