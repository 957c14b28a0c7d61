package slurm

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/scimesh/scimesh/internal/worker"
)

// Complete checks a and fills in its defaults: the concurrency from the
// CPUs, the margin before the walltime, this binary, absolute paths. given
// tells which flags were given, so that a value given out of bounds is
// refused rather than taken for the default. The worker's own arguments
// (WorkerArgs) are the caller's to check, against its flags.
func (a *Array) Complete(given func(flag string) bool) error {
	if a.Coordinator == "" {
		return errors.New("no coordinator: give --coordinator URL (as the compute nodes reach it) or set SCIMESH_COORDINATOR")
	}
	if u, err := url.Parse(a.Coordinator); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--coordinator %q: give an http:// or https:// URL", a.Coordinator)
	}
	if _, err := worker.ParseWorkloads(a.Workloads, nil, nil); err != nil {
		return err
	}
	if a.Jobs < 1 {
		return fmt.Errorf("--jobs %d: give how many workers to run, at least 1", a.Jobs)
	}
	if !given("time") {
		return errors.New("no walltime: give --time HH:MM:SS, each job's time limit")
	}
	d, err := ParseWalltime(a.TimeText)
	if err != nil {
		return err
	}
	a.Walltime = d
	if a.ReleaseBefore == 0 {
		a.ReleaseBefore = min(max(d/10, 10*time.Second), 2*time.Minute)
	}
	a.ReleaseBefore = a.ReleaseBefore.Round(time.Second)
	if a.ReleaseBefore < time.Second || a.ReleaseBefore > d-worker.DefaultDeadlineLease {
		return fmt.Errorf("--release-before %v: give at least 1s, and leave more than %v of the %v walltime to work in", a.ReleaseBefore, worker.DefaultDeadlineLease, d)
	}
	if given("cpus-per-task") && a.CPUsPerTask < 1 {
		return fmt.Errorf("--cpus-per-task %d: give at least 1", a.CPUsPerTask)
	}
	switch {
	case given("concurrency") && a.Concurrency < 1:
		return fmt.Errorf("--concurrency %d: give at least 1", a.Concurrency)
	case a.Concurrency == 0 && a.CPUsPerTask > 0:
		a.Concurrency = a.CPUsPerTask
	case a.Concurrency == 0:
		a.Concurrency = 1
	}
	if a.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this scimesh binary's path (give --binary): %w", err)
		}
		a.Binary = exe
	}
	if a.Binary, err = filepath.Abs(a.Binary); err != nil {
		return fmt.Errorf("--binary: %w", err)
	}
	if a.TokenFile != "" {
		if a.TokenFile, err = filepath.Abs(a.TokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if err := CheckTokenFile(a.TokenFile); err != nil {
			return err
		}
	}
	return a.CheckText()
}
