package domain

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// TreeSpec is a task tree as a client submits it: tasks named by placeholder
// IDs, wired together by the references among their args. Plan checks it.
type TreeSpec struct {
	Tasks []TreeTaskSpec
}

// TreeTaskSpec is one task of a submitted tree.
type TreeTaskSpec struct {
	// ID is a placeholder SHARD:NAME. Only SHARD counts: it names the shard
	// the task is created on; the server assigns the real ID.
	ID       string
	Workload string
	// Args are handed to the workload in order, each reference resolved to
	// the referenced task's result.
	Args []TreeArg
	// MaxAttempts, LeaseSeconds and Priority are 0 for the default.
	MaxAttempts, LeaseSeconds, Priority int
}

// TreeArg is one argument of a tree task: exactly one of Value and Ref is
// set. A Ref makes the referenced task an upstream of the task holding it.
type TreeArg struct {
	Value json.RawMessage `json:"value,omitempty"` // a JSON value
	Ref   string          `json:"ref,omitempty"`   // another task's ID (a placeholder before planning)
}

// TreePlan is a validated tree: who feeds whom, and the order to create the
// tasks in. Indexes are positions in TreeSpec.Tasks.
type TreePlan struct {
	// Root is the one task no other references.
	Root int
	// Shards holds the shard part of each task's placeholder ID.
	Shards []string
	// Downstream holds the task each task's result feeds; -1 for the root.
	Downstream []int
	// Upstreams holds the tasks each task references, in arg order.
	Upstreams [][]int
	// Order lists every task once, from the root to the leaves: a task
	// always comes after its downstream (breadth first, upstreams in arg
	// order), so a downstream exists before anything reports to it.
	Order []int
}

// Bounds of a submitted tree.
const (
	MaxTreeTasks       = 10_000 // tasks in one tree
	MaxPlaceholderSize = 256    // bytes in a placeholder ID
)

var shardRe = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ValidShard reports whether name is a well-formed shard name: 1-32 of
// [a-z0-9-].
func ValidShard(name string) bool { return shardRe.MatchString(name) }

// ShardOf returns the shard part of an ID SHARD:LOCAL (or of a placeholder).
func ShardOf(id string) string {
	shard, _, _ := strings.Cut(id, ":")
	return shard
}

// SplitPlaceholder splits a placeholder ID SHARD:NAME at its first colon. It
// reports false unless SHARD is a valid shard name, NAME is not empty and the
// whole ID is a valid ID of at most MaxPlaceholderSize bytes.
func SplitPlaceholder(id string) (shard, name string, ok bool) {
	shard, name, found := strings.Cut(id, ":")
	if !found || !ValidShard(shard) || name == "" || len(id) > MaxPlaceholderSize || !ValidID(id) {
		return "", "", false
	}
	return shard, name, true
}

// Plan validates s and returns how its tasks connect. knownShard says which
// shards the tasks may be placed on; nil accepts every valid shard name.
// Every error is an ErrInvalidArgument naming the task(s) at fault; when s
// breaks several rules, the same one is always reported first.
func (s *TreeSpec) Plan(knownShard func(string) bool) (*TreePlan, error) {
	n := len(s.Tasks)
	if n == 0 {
		return nil, Invalidf("the tree has no tasks; submit at least one")
	}
	if n > MaxTreeTasks {
		return nil, Invalidf("the tree has %d tasks; at most %d", n, MaxTreeTasks)
	}
	p := &TreePlan{
		Root:       -1,
		Shards:     make([]string, n),
		Downstream: make([]int, n),
		Upstreams:  make([][]int, n),
	}
	index := make(map[string]int, n)
	for i := range s.Tasks {
		t := &s.Tasks[i]
		shard, _, ok := SplitPlaceholder(t.ID)
		if !ok {
			return nil, Invalidf("task %d: id %q must be SHARD:NAME, SHARD 1-32 of a-z 0-9 -, NAME not empty, at most %d printable bytes in all",
				i, t.ID, MaxPlaceholderSize)
		}
		if j, dup := index[t.ID]; dup {
			return nil, Invalidf("tasks %d and %d both have id %q; placeholder IDs must be unique", j, i, t.ID)
		}
		index[t.ID] = i
		if knownShard != nil && !knownShard(shard) {
			return nil, Invalidf("task %q: shard %q is not in this mesh's topology", t.ID, shard)
		}
		p.Shards[i] = shard
		if err := t.Check(); err != nil {
			return nil, err
		}
	}

	for i := range p.Downstream {
		p.Downstream[i] = -1
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		for a, arg := range t.Args {
			if arg.Ref == "" {
				continue
			}
			u, ok := index[arg.Ref]
			switch {
			case !ok:
				return nil, Invalidf("task %q: args[%d] references %q, which is no task of this tree", t.ID, a, arg.Ref)
			case u == i:
				return nil, Invalidf("task %q: args[%d] references the task itself", t.ID, a)
			case p.Downstream[u] == i:
				return nil, Invalidf("task %q is referenced twice by task %q; a task feeds one arg of one other task", arg.Ref, t.ID)
			case p.Downstream[u] >= 0:
				return nil, Invalidf("task %q is referenced by both %q and %q; a task feeds one arg of one other task",
					arg.Ref, s.Tasks[p.Downstream[u]].ID, t.ID)
			}
			p.Downstream[u] = i
			p.Upstreams[i] = append(p.Upstreams[i], u)
		}
	}

	var roots []int
	for i, d := range p.Downstream {
		if d < 0 {
			roots = append(roots, i)
		}
	}
	switch {
	case len(roots) == 0:
		return nil, Invalidf("the tree has no root: every task is referenced by another, so the references form a cycle: %s",
			s.cycleFrom(0, p.Downstream))
	case len(roots) > 1:
		return nil, Invalidf("the tree has %d roots (%s); exactly one task must be referenced by no other",
			len(roots), s.names(roots))
	}
	p.Root = roots[0]

	p.Order = make([]int, 0, n)
	p.Order = append(p.Order, p.Root)
	for k := 0; k < len(p.Order); k++ {
		p.Order = append(p.Order, p.Upstreams[p.Order[k]]...)
	}
	if len(p.Order) < n {
		// With one root and every task referenced at most once, a task the
		// root does not reach has a downstream it does not reach either:
		// following downstreams from it ends in a cycle.
		reached := make([]bool, n)
		for _, i := range p.Order {
			reached[i] = true
		}
		for i := range reached {
			if !reached[i] {
				return nil, Invalidf("task %q is not connected to the root %q: the references form a cycle: %s",
					s.Tasks[i].ID, s.Tasks[p.Root].ID, s.cycleFrom(i, p.Downstream))
			}
		}
	}
	return p, nil
}

// Check validates one task's own fields: its workload, settings and
// args, but not its ID nor its references, which only the whole tree
// can check (Plan).
func (t *TreeTaskSpec) Check() error {
	if t.Workload == "" {
		return Invalidf("task %q: workload is required: name the workload that runs it", t.ID)
	}
	if !ValidWorkload(t.Workload) {
		return Invalidf("task %q: workload %q must be 1-128 characters of A-Z a-z 0-9 . _ : -", t.ID, t.Workload)
	}
	if err := optionalInRange(t.ID, "max_attempts", t.MaxAttempts, MinMaxAttempts, MaxMaxAttempts); err != nil {
		return err
	}
	if err := optionalInRange(t.ID, "lease_seconds", t.LeaseSeconds, MinLeaseSeconds, MaxLeaseSeconds); err != nil {
		return err
	}
	if t.Priority < MinPriority || t.Priority > MaxPriority {
		return Invalidf("task %q: priority is %d; it must be between %d and %d", t.ID, t.Priority, MinPriority, MaxPriority)
	}
	for a, arg := range t.Args {
		hasValue := len(arg.Value) > 0
		switch {
		case hasValue && arg.Ref != "":
			return Invalidf("task %q: args[%d] is both a value and a reference; set one", t.ID, a)
		case !hasValue && arg.Ref == "":
			return Invalidf("task %q: args[%d] is neither a value nor a reference; set one", t.ID, a)
		case hasValue && !json.Valid(arg.Value):
			return Invalidf("task %q: args[%d] is not valid JSON", t.ID, a)
		}
	}
	return nil
}

// optionalInRange checks a setting where 0 means the default.
func optionalInRange(id, name string, v, lo, hi int) error {
	if v != 0 && (v < lo || v > hi) {
		return Invalidf("task %q: %s is %d; it must be 0 (the default) or between %d and %d", id, name, v, lo, hi)
	}
	return nil
}

// maxNamed bounds the tasks an error message lists.
const maxNamed = 10

// names quotes the IDs of the tasks at idx, at most maxNamed of them.
func (s *TreeSpec) names(idx []int) string {
	var b strings.Builder
	for k, i := range idx {
		if k == maxNamed {
			fmt.Fprintf(&b, " and %d more", len(idx)-k)
			break
		}
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", s.Tasks[i].ID)
	}
	return b.String()
}

// cycleFrom follows downstreams from task i, which must lead into a cycle,
// and describes that cycle as "a" → "b" → "a", each task feeding the next.
func (s *TreeSpec) cycleFrom(i int, downstream []int) string {
	seen := make(map[int]bool)
	for !seen[i] {
		seen[i] = true
		i = downstream[i]
		if i < 0 {
			return "(none found)" // unreachable when the caller's premise holds
		}
	}
	var b strings.Builder
	start := i
	for k := 0; ; k++ {
		if k == maxNamed {
			b.WriteString(" → …")
			break
		}
		if k > 0 {
			b.WriteString(" → ")
		}
		fmt.Fprintf(&b, "%q", s.Tasks[i].ID)
		i = downstream[i]
		if i == start {
			fmt.Fprintf(&b, " → %q", s.Tasks[i].ID)
			break
		}
	}
	return b.String()
}
