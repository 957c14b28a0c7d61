package engine

import "fmt"

// Scheduling is the order in which claims hand out runnable tasks.
type Scheduling string

// The orders of Scheduling.
const (
	// SchedulingFair shares workers between accounts by weight, and an
	// account's between its jobs, fewest leased first (SPEC §9).
	SchedulingFair Scheduling = "fair"
	// SchedulingFIFO hands out tasks by priority, then oldest job, then
	// chunk index, whoever owns them.
	SchedulingFIFO Scheduling = "fifo"
)

// ParseScheduling returns the Scheduling named s: "fair" or "fifo".
func ParseScheduling(s string) (Scheduling, error) {
	switch sc := Scheduling(s); sc {
	case SchedulingFair, SchedulingFIFO:
		return sc, nil
	}
	return "", fmt.Errorf("scheduling %q: use fair or fifo", s)
}
