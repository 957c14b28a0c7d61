package sqlite

import "time"

// queued is the number of callers waiting in the writer's line, not
// counting those that left it.
func (c *committer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.queue {
		if m.state.Load() == memberQueued {
			n++
		}
	}
	return n
}

// isClosed reports whether close has been called.
func (c *committer) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// setBudget sets how long a group may stay open taking members (see
// groupBudget), for the groups begun from now on.
func (c *committer) setBudget(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.budget = d
}
