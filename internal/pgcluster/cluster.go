// Package pgcluster starts and stops a disposable PostgreSQL cluster from
// the installed server binaries (initdb and pg_ctl, on PATH or under
// /usr/lib/postgresql/*/bin): a data directory and a socket directory under
// one temporary directory, a server on 127.0.0.1 at a free port, trust
// authentication for user postgres. As root it runs the binaries as the
// postgres user, since initdb refuses to run as root.
//
// The test helper internal/pgtest starts one per test binary;
// `scimesh-bench --db postgres` starts one to measure against. It is not a
// way to run PostgreSQL in production: by default the cluster runs without
// fsync, and Stop throws its data away.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoServer reports that no PostgreSQL server binaries (initdb and pg_ctl)
// were found on PATH or under /usr/lib/postgresql/*/bin.
var ErrNoServer = errors.New("pgcluster: no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql/*/bin")

const (
	// serverUser is the account that runs initdb and the server when the
	// current process is root: initdb refuses to run as root.
	serverUser = "postgres"
	// dirPrefix starts the name of every cluster's temporary directory.
	dirPrefix = "scimesh-pg-"
	// ownerFile, in a cluster's directory, holds the ID of the process that
	// started the cluster, so a later start can tell a cluster orphaned by
	// a killed process from one in use.
	ownerFile = "owner.pid"
)

// Options tune a cluster started by Start. The zero value suits tests:
// fsync, synchronous_commit and full_page_writes are off and the WAL is kept
// small, which is fast and safe for a cluster that is thrown away.
type Options struct {
	// Durable keeps fsync, synchronous_commit, full_page_writes and the WAL
	// size at their defaults, for measurements that should reflect a
	// production server.
	Durable bool
	// MaxConnections is the server's max_connections; 0 means 300.
	MaxConnections int
	// Settings are extra server settings (name to value), passed as
	// -c name=value, e.g. {"shared_buffers": "512MB"}.
	Settings map[string]string
	// Dir is the directory to make the cluster's temporary directory in;
	// empty means os.TempDir(). Tests use a RAM disk when there is one.
	Dir string
	// Port is the port to listen on at 127.0.0.1; 0 picks a free one.
	// A test that points a program at the server before it exists sets it.
	Port int
}

// Cluster is a disposable PostgreSQL cluster: a data directory and a socket
// directory under one temporary directory, and a server listening on
// 127.0.0.1 at a free port with trust authentication for user postgres.
// Stop shuts the server down and removes the directory.
type Cluster struct {
	dir     string // the temporary directory holding everything below
	dataDir string
	sockDir string
	logPath string
	binDir  string
	port    int
	runAs   *account // nil: run the server binaries as the current user

	stopOnce sync.Once
	stopErr  error
}

// Start creates a cluster with initdb and starts it with pg_ctl,
// using the server binaries found on PATH or under
// /usr/lib/postgresql/*/bin (ErrNoServer when there are none). As root it
// runs them as the postgres user. The caller must call Stop.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{binDir: binDir}
	if os.Geteuid() == 0 {
		if c.runAs, err = lookupAccount(serverUser); err != nil {
			return nil, fmt.Errorf("pgcluster: running as root, so initdb must run as user %q, but: %w", serverUser, err)
		}
	}
	parent := opts.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	c.reapOrphans(parent)
	if c.dir, err = os.MkdirTemp(parent, dirPrefix); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(c.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	// MkdirTemp makes the directory 0700; the server's account must be able
	// to enter it to reach its data and socket directories.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c.dataDir = filepath.Join(c.dir, "data")
	c.sockDir = filepath.Join(c.dir, "sock")
	c.logPath = filepath.Join(c.dir, "server.log")
	if err := c.prepareDirs(); err != nil {
		return nil, err
	}
	if err := c.run(ctx, "initdb", "-D", c.dataDir, "-A", "trust", "-U", "postgres",
		"--no-sync", "-E", "UTF8", "--no-locale"); err != nil {
		return nil, err
	}
	// The port is free when chosen but may be taken before the server binds
	// it; try a few.
	for attempt := 1; ; attempt++ {
		c.port = opts.Port
		if c.port == 0 {
			if c.port, err = freePort(); err != nil {
				return nil, fmt.Errorf("pgcluster: find a free port: %w", err)
			}
		}
		err = c.run(ctx, "pg_ctl", "-D", c.dataDir, "-l", c.logPath, "-w", "-t", "60",
			"-o", c.serverFlags(opts), "start")
		if err == nil {
			break
		}
		if attempt == 3 || opts.Port != 0 || !strings.Contains(c.logTail(), "could not bind") {
			return nil, fmt.Errorf("%w\nserver log (%s):\n%s", err, c.logPath, c.logTail())
		}
	}
	if err := c.ping(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// prepareDirs makes the data and socket directories and the log file, owned
// by the account that runs the server.
func (c *Cluster) prepareDirs() error {
	if err := os.Mkdir(c.dataDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.Mkdir(c.sockDir, 0o755); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.WriteFile(c.logPath, nil, 0o644); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.runAs == nil {
		return nil
	}
	for _, p := range []string{c.dataDir, c.sockDir, c.logPath} {
		if err := os.Chown(p, c.runAs.uid, c.runAs.gid); err != nil {
			return fmt.Errorf("pgcluster: give %s to user %s: %w", p, serverUser, err)
		}
	}
	return nil
}

// serverFlags is the -o argument of pg_ctl start. pg_ctl hands it to a
// shell, hence the quoting of the socket directory.
func (c *Cluster) serverFlags(opts Options) string {
	maxConns := opts.MaxConnections
	if maxConns <= 0 {
		maxConns = 300
	}
	flags := []string{
		"-k", shellQuote(c.sockDir),
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=" + strconv.Itoa(maxConns),
	}
	if !opts.Durable {
		// Without fsync a checkpoint is cheap; checkpointing often keeps the
		// WAL, which may live on a RAM disk, small.
		flags = append(flags, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_wal_size=256MB", "-c", "min_wal_size=32MB")
	}
	names := make([]string, 0, len(opts.Settings))
	for name := range opts.Settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		flags = append(flags, "-c", shellQuote(name+"="+opts.Settings[name]))
	}
	return strings.Join(flags, " ")
}

// run runs one of the server binaries as the server's account and returns
// its output in the error when it fails.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = c.dir // the caller's directory may be closed to the server's account
	cmd.Env = serverEnv()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// pg_ctl start leaves the server running; should it keep our output
	// pipe open, Wait must not hang on it.
	cmd.WaitDelay = 10 * time.Second
	c.runAs.apply(cmd)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgcluster: %s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// ping waits until the server accepts connections to database postgres.
func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: server on port %d does not answer: %w\nserver log:\n%s", c.port, err, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail returns the end of the server log, for error messages.
func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// Port is the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// URL is the postgres:// URL of database name on the cluster, as user
// postgres over TCP.
func (c *Cluster) URL(name string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates an empty database called name on the cluster and
// returns its URL. Names are limited to 1-63 of [a-z0-9_], starting with a
// letter or underscore.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := CreateDatabase(ctx, c.URL("postgres"), name); err != nil {
		return "", err
	}
	return c.URL(name), nil
}

// DropDatabase drops database name, closing its connections first.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	return DropDatabase(ctx, c.URL("postgres"), name)
}

// Stop shuts the server down at once (its data is not kept) and removes the
// cluster's directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if _, err := os.Stat(filepath.Join(c.dataDir, "postmaster.pid")); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			errs = append(errs, c.run(ctx, "pg_ctl", "-D", c.dataDir, "-m", "immediate", "-w", "stop"))
			cancel()
		}
		if c.dir != "" {
			if err := os.RemoveAll(c.dir); err != nil {
				errs = append(errs, fmt.Errorf("pgcluster: remove cluster directory: %w", err))
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// reapOrphans stops and removes the clusters in parent whose starting
// process is gone: killed (by a test timeout, say) before it could call
// Stop. It does its best and reports nothing.
func (c *Cluster) reapOrphans(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being set up
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		orphan := &Cluster{dir: dir, dataDir: filepath.Join(dir, "data"), binDir: c.binDir, runAs: c.runAs}
		_ = orphan.Stop()
	}
}

var dbNameRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CreateDatabase creates an empty database called name on the server that
// adminURL reaches (a cluster's, or any other whose user may create
// databases). Names are as for (*Cluster).CreateDatabase.
func CreateDatabase(ctx context.Context, adminURL, name string) error {
	if !dbNameRe.MatchString(name) {
		return fmt.Errorf("pgcluster: database name %q must be 1-63 of [a-z0-9_], not starting with a digit", name)
	}
	return adminExec(ctx, adminURL, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// DropDatabase drops database name on the server that adminURL reaches,
// closing the connections still open to it.
func DropDatabase(ctx context.Context, adminURL, name string) error {
	return adminExec(ctx, adminURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func adminExec(ctx context.Context, adminURL, sql string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("pgcluster: connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgcluster: %s: %w", sql, err)
	}
	return nil
}

// DatabaseURL is adminURL pointing at database name instead. It accepts
// URLs (postgres://, postgresql://) and keyword/value strings.
func DatabaseURL(adminURL, name string) (string, error) {
	if strings.HasPrefix(adminURL, "postgres://") || strings.HasPrefix(adminURL, "postgresql://") {
		u, err := url.Parse(adminURL)
		if err != nil {
			return "", fmt.Errorf("pgcluster: parse %s: %w", redact(adminURL), err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In a keyword/value string a later keyword wins.
	return adminURL + " dbname=" + name, nil
}

// redact hides the password of a URL, for messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// findBinDir returns the directory holding initdb and pg_ctl: that of
// pg_ctl on PATH, else the newest /usr/lib/postgresql/VERSION/bin.
func findBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "pg_ctl")) && isExecutable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	return "", ErrNoServer
}

// versionOf is the major version in /usr/lib/postgresql/VERSION/bin.
func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverEnv is the environment of the server binaries: ours without PG*
// variables, which would override the explicit flags, and with the C locale.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
