// Package s3test gives tests a real S3-compatible store: SeaweedFS's
// `weed mini`, started once per test binary, on loopback only, in a
// temporary directory, and an empty bucket of its own for each test.
//
// The weed binary is SCIMESH_WEED, else DefaultWeed (where tools/weed.sh
// builds it), else weed on PATH. Without one the tests that need it skip
// with a loud message; when CI is set, that is a failure instead. Call
// Main from TestMain: it stops the server when the tests end.
//
// The store's keys are in the test binary's own AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (set when the server starts), so that blob stores
// opened in the test process find them as they would in production; Env
// gives them to child processes.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/scimesh/scimesh/internal/testenv"
)

// EnvWeed names the weed binary to run.
const EnvWeed = "SCIMESH_WEED"

// DefaultWeed is where tools/weed.sh leaves the binary it builds.
const DefaultWeed = "/var/cache/scimesh/weed"

// Region is the region the store's URLs name.
const Region = "us-east-1"

var shared struct {
	mainCalled atomic.Bool
	seq        atomic.Int64

	once     sync.Once
	cmd      *exec.Cmd
	exited   chan struct{}
	dir      string
	endpoint string
	client   *s3.Client
	key      string
	secret   string
	err      error
}

// Main runs the tests and stops the server; use it as TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// RunFunc runs the tests by way of another helper that wraps them, as
// s3test.Run(s3test.RunFunc(func() int { return pgtest.Run(m) })).
type RunFunc func() int

// Run calls f.
func (f RunFunc) Run() int { return f() }

// Run runs the tests (m.Run) and stops the server, returning the exit
// code. m is a *testing.M, or a RunFunc.
func Run(m interface{ Run() int }) int {
	shared.mainCalled.Store(true)
	code := m.Run()
	if shared.cmd != nil {
		stop()
	}
	return code
}

// Bucket creates an empty bucket and returns its blob store URL,
// s3://NAME?endpoint=…&region=….
func Bucket(t testing.TB) string {
	t.Helper()
	start(t)
	name := fmt.Sprintf("t%d-%d", os.Getpid(), shared.seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := shared.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	return "s3://" + name + "?endpoint=" + shared.endpoint + "&region=" + Region
}

// Client returns a client of the store, signed with its keys, for tests
// that look inside a bucket.
func Client(t testing.TB) *s3.Client {
	t.Helper()
	start(t)
	return shared.client
}

// Env returns the environment variables that give a child process the
// store's keys.
func Env(t testing.TB) []string {
	t.Helper()
	start(t)
	return []string{"AWS_ACCESS_KEY_ID=" + shared.key, "AWS_SECRET_ACCESS_KEY=" + shared.secret, "AWS_REGION=" + Region}
}

// ErrNoWeed reports that no weed binary was found.
var ErrNoWeed = errors.New("no weed binary")

func binary() (string, error) {
	if p := os.Getenv(EnvWeed); p != "" {
		return p, nil
	}
	if _, err := os.Stat(DefaultWeed); err == nil {
		return DefaultWeed, nil
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w at $%s, %s or on PATH", ErrNoWeed, EnvWeed, DefaultWeed)
}

func start(t testing.TB) {
	t.Helper()
	shared.once.Do(func() {
		if !shared.mainCalled.Load() {
			shared.err = errors.New("s3test: call s3test.Main(m) from TestMain: it stops the server the tests start")
			return
		}
		shared.err = launch()
	})
	if errors.Is(shared.err, ErrNoWeed) {
		msg := "s3test: NO S3 STORE: " + shared.err.Error() + "; build one with tools/weed.sh to run the S3 tests"
		testenv.Missing(t, msg)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
}

// launch starts weed mini on free loopback ports and waits until its S3
// API answers a signed request.
func launch() error {
	bin, err := binary()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "scimesh-s3-")
	if err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	shared.dir = dir
	shared.key, shared.secret = "scimesh-test", fmt.Sprintf("secret-%d-%d", os.Getpid(), time.Now().UnixNano())
	// Each of weed's servers also listens on its port + 10000 (gRPC).
	ports, err := freePorts(6)
	if err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	s3Port := ports[0]
	args := []string{"mini", "-dir=" + filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-s3.port=" + strconv.Itoa(s3Port), "-master.port=" + strconv.Itoa(ports[1]),
		"-volume.port=" + strconv.Itoa(ports[2]), "-filer.port=" + strconv.Itoa(ports[3]),
		"-admin.port=" + strconv.Itoa(ports[4]), "-debug.port=" + strconv.Itoa(ports[5]),
		"-admin.port.legacy=0", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false"}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return fmt.Errorf("s3test: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+shared.key, "AWS_SECRET_ACCESS_KEY="+shared.secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: start %s: %w", bin, err)
	}
	shared.cmd = cmd
	shared.exited = make(chan struct{})
	go func() { cmd.Wait(); close(shared.exited) }()

	os.Setenv("AWS_ACCESS_KEY_ID", shared.key)
	os.Setenv("AWS_SECRET_ACCESS_KEY", shared.secret)
	shared.endpoint = "http://127.0.0.1:" + strconv.Itoa(s3Port)
	shared.client = s3.New(s3.Options{
		Region:                     Region,
		BaseEndpoint:               aws.String(shared.endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(shared.key, shared.secret, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		HTTPClient:                 &http.Client{Timeout: 10 * time.Second},
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := shared.client.ListBuckets(ctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-shared.exited:
			log, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("s3test: weed mini exited before it served S3:\n%s", tail(log))
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			stop()
			return fmt.Errorf("s3test: weed mini did not answer S3 requests at %s within 90 s (last: %v):\n%s", shared.endpoint, err, tail(log))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends weed mini and removes its directory.
func stop() {
	if shared.cmd == nil {
		return
	}
	_ = syscall.Kill(-shared.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-shared.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-shared.cmd.Process.Pid, syscall.SIGKILL)
		<-shared.exited
	}
	shared.cmd = nil
	os.RemoveAll(shared.dir)
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// freePorts returns n loopback ports, each free together with the port
// 10000 above it.
func freePorts(n int) ([]int, error) {
	var ports []int
	var hold []net.Listener
	defer func() {
		for _, l := range hold {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n && tries < 200; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			l.Close()
			continue
		}
		hold = append(hold, l, l2)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, errors.New("no free pairs of loopback ports")
	}
	return ports, nil
}
