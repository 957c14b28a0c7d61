package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func tval(v string) TreeArg  { return TreeArg{Value: json.RawMessage(v)} }
func tref(id string) TreeArg { return TreeArg{Ref: id} }

func ttask(id string, args ...TreeArg) TreeTaskSpec {
	return TreeTaskSpec{ID: id, Workload: "sum", Args: args}
}

func ttree(tasks ...TreeTaskSpec) *TreeSpec { return &TreeSpec{Tasks: tasks} }

// knownS012 knows shards s0, s1 and s2.
func knownS012(s string) bool { return s == "s0" || s == "s1" || s == "s2" }

func TestTreePlanErrors(t *testing.T) {
	t.Parallel()
	chain := func(n int) *TreeSpec {
		s := &TreeSpec{}
		for i := range n {
			tk := ttask(fmt.Sprintf("s0:t%d", i))
			if i+1 < n {
				tk.Args = []TreeArg{tref(fmt.Sprintf("s0:t%d", i+1))}
			}
			s.Tasks = append(s.Tasks, tk)
		}
		return s
	}
	with := func(f func(*TreeTaskSpec)) *TreeSpec {
		tk := ttask("s0:a", tval("1"))
		f(&tk)
		return ttree(tk)
	}
	tests := []struct {
		name string
		spec *TreeSpec
		want string // substring of the error
	}{
		{"empty", ttree(), "no tasks"},
		{"too many", chain(MaxTreeTasks + 1), "10001 tasks; at most 10000"},
		{"empty id", ttree(ttask("")), `task 0: id ""`},
		{"no colon", ttree(ttask("s0a")), `id "s0a" must be SHARD:NAME`},
		{"no name", ttree(ttask("s0:")), `id "s0:" must be SHARD:NAME`},
		{"no shard", ttree(ttask(":a")), `id ":a" must be SHARD:NAME`},
		{"upper shard", ttree(ttask("S0:a")), `id "S0:a"`},
		{"long shard", ttree(ttask(strings.Repeat("s", 33) + ":a")), "must be SHARD:NAME"},
		{"long id", ttree(ttask("s0:" + strings.Repeat("n", 254))), "at most 256"},
		{"control byte", ttree(ttask("s0:a\nb")), `id "s0:a\nb"`},
		{"second bad id", ttree(ttask("s0:a", tref("bad")), ttask("bad")), `task 1: id "bad"`},
		{"duplicate", ttree(ttask("s0:a", tref("s1:b")), ttask("s1:b"), ttask("s0:a")), `tasks 0 and 2 both have id "s0:a"`},
		{"unknown shard", ttree(ttask("s0:a", tref("s9:b")), ttask("s9:b")), `task "s9:b": shard "s9" is not in`},
		{"no workload", with(func(t *TreeTaskSpec) { t.Workload = "" }), `task "s0:a": workload is required`},
		{"bad workload", with(func(t *TreeTaskSpec) { t.Workload = "rm -rf /" }), `task "s0:a": workload "rm -rf /"`},
		{"long workload", with(func(t *TreeTaskSpec) { t.Workload = strings.Repeat("w", 129) }), `task "s0:a": workload`},
		{"max_attempts -1", with(func(t *TreeTaskSpec) { t.MaxAttempts = -1 }), `task "s0:a": max_attempts is -1`},
		{"max_attempts 101", with(func(t *TreeTaskSpec) { t.MaxAttempts = 101 }), `task "s0:a": max_attempts is 101`},
		{"lease 4", with(func(t *TreeTaskSpec) { t.LeaseSeconds = 4 }), `task "s0:a": lease_seconds is 4`},
		{"lease 3601", with(func(t *TreeTaskSpec) { t.LeaseSeconds = 3601 }), `task "s0:a": lease_seconds is 3601`},
		{"priority -1001", with(func(t *TreeTaskSpec) { t.Priority = -1001 }), `task "s0:a": priority is -1001`},
		{"priority 1001", with(func(t *TreeTaskSpec) { t.Priority = 1001 }), `task "s0:a": priority is 1001`},
		{"arg both", with(func(t *TreeTaskSpec) { t.Args = []TreeArg{tval("1"), {Value: json.RawMessage("2"), Ref: "s0:b"}} }),
			`task "s0:a": args[1] is both a value and a reference`},
		{"arg neither", with(func(t *TreeTaskSpec) { t.Args = []TreeArg{{}} }), `task "s0:a": args[0] is neither`},
		{"arg empty value", with(func(t *TreeTaskSpec) { t.Args = []TreeArg{{Value: json.RawMessage{}}} }), `task "s0:a": args[0] is neither`},
		{"arg bad json", with(func(t *TreeTaskSpec) { t.Args = []TreeArg{tval("{")} }), `task "s0:a": args[0] is not valid JSON`},
		{"arg two values", with(func(t *TreeTaskSpec) { t.Args = []TreeArg{tval("1 2")} }), `task "s0:a": args[0] is not valid JSON`},
		{"dangling ref", ttree(ttask("s0:a", tref("s0:zz"))), `task "s0:a": args[0] references "s0:zz", which is no task`},
		{"self ref", ttree(ttask("s0:a", tval("1"), tref("s0:a"))), `task "s0:a": args[1] references the task itself`},
		{"referenced twice by one", ttree(ttask("s0:a", tref("s0:b"), tref("s0:b")), ttask("s0:b")),
			`task "s0:b" is referenced twice by task "s0:a"`},
		{"referenced by two", ttree(ttask("s0:r", tref("s0:a"), tref("s0:c")), ttask("s0:a", tref("s0:b")), ttask("s0:b"), ttask("s0:c", tref("s0:b"))),
			`task "s0:b" is referenced by both "s0:a" and "s0:c"`},
		{"no root 2-cycle", ttree(ttask("s0:a", tref("s0:b")), ttask("s0:b", tref("s0:a"))),
			`no root: every task is referenced by another, so the references form a cycle: "s0:a" → "s0:b" → "s0:a"`},
		{"no root 3-cycle with tail", ttree(ttask("s0:a", tref("s0:b")), ttask("s0:b", tref("s0:c")), ttask("s0:c", tref("s0:a"), tref("s0:d")), ttask("s0:d")),
			`form a cycle: "s0:a" → "s0:c" → "s0:b" → "s0:a"`},
		{"long cycle", tcycle(12), `no root: every task is referenced by another, so the references form a cycle: "s0:t0" → "s0:t11" → "s0:t10" → "s0:t9" → "s0:t8" → "s0:t7" → "s0:t6" → "s0:t5" → "s0:t4" → "s0:t3" → …`},
		{"two roots", ttree(ttask("s0:a"), ttask("s0:b")), `2 roots ("s0:a", "s0:b")`},
		{"three roots", ttree(ttask("s0:a", tref("s0:x")), ttask("s0:x"), ttask("s1:b"), ttask("s2:c")), `3 roots ("s0:a", "s1:b", "s2:c")`},
		{"many roots", tunlinked(12), `12 roots ("s0:t0", "s0:t1", "s0:t2", "s0:t3", "s0:t4", "s0:t5", "s0:t6", "s0:t7", "s0:t8", "s0:t9" and 2 more)`},
		{"cycle beside root", ttree(ttask("s0:root", tval("1")), ttask("s0:b", tref("s0:c")), ttask("s0:c", tref("s0:b"))),
			`task "s0:b" is not connected to the root "s0:root": the references form a cycle: "s0:b" → "s0:c" → "s0:b"`},
		{"cycle with tail beside root", ttree(ttask("s0:root"), ttask("s0:t"), ttask("s0:b", tref("s0:c"), tref("s0:t")), ttask("s0:c", tref("s0:b"))),
			`task "s0:t" is not connected to the root "s0:root": the references form a cycle: "s0:b" → "s0:c" → "s0:b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tt.spec.Plan(knownS012)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Plan() = %v, %v; want ErrInvalidArgument containing %q", p, err, tt.want)
			}
			if p != nil {
				t.Fatalf("Plan() returned a plan with error %v", err)
			}
		})
	}
}

// tcycle returns n tasks, each referencing the next, the last the first.
func tcycle(n int) *TreeSpec {
	s := &TreeSpec{}
	for i := range n {
		s.Tasks = append(s.Tasks, ttask(fmt.Sprintf("s0:t%d", i), tref(fmt.Sprintf("s0:t%d", (i+1)%n))))
	}
	return s
}

// tunlinked returns n unconnected tasks.
func tunlinked(n int) *TreeSpec {
	s := &TreeSpec{}
	for i := range n {
		s.Tasks = append(s.Tasks, ttask(fmt.Sprintf("s0:t%d", i)))
	}
	return s
}

func TestTreePlanValid(t *testing.T) {
	t.Parallel()
	wide := &TreeSpec{Tasks: []TreeTaskSpec{ttask("s0:root")}}
	wideUp := make([][]int, 101)
	wideDown := []int{-1}
	wideOrder := []int{0}
	for i := 1; i <= 100; i++ {
		id := fmt.Sprintf("s%d:leaf%d", i%3, i)
		wide.Tasks[0].Args = append(wide.Tasks[0].Args, tref(id))
		wide.Tasks = append(wide.Tasks, ttask(id, tval(fmt.Sprint(i))))
		wideUp[0] = append(wideUp[0], i)
		wideDown = append(wideDown, 0)
		wideOrder = append(wideOrder, i)
	}
	longChain := &TreeSpec{}
	for i := range MaxTreeTasks {
		tk := ttask(fmt.Sprintf("s0:t%d", i))
		if i > 0 {
			tk.Args = []TreeArg{tref(fmt.Sprintf("s0:t%d", i-1))}
		}
		longChain.Tasks = append(longChain.Tasks, tk)
	}

	tests := []struct {
		name      string
		spec      *TreeSpec
		root      int
		down      []int
		up        [][]int
		order     []int
		shards    []string // nil: not checked
		checkOnly bool     // only the invariants (large trees)
	}{
		{
			name: "single",
			spec: ttree(TreeTaskSpec{ID: "s0:only", Workload: "w", MaxAttempts: 100, LeaseSeconds: 3600, Priority: -1000}),
			root: 0, down: []int{-1}, up: [][]int{nil}, order: []int{0}, shards: []string{"s0"},
		},
		{
			name: "single with values",
			spec: ttree(TreeTaskSpec{ID: "s1:a:b:c", Workload: "w", Args: []TreeArg{tval(`{"x":[1,2]}`), tval("null"), tval(` "s" `)},
				MaxAttempts: 1, LeaseSeconds: 5, Priority: 1000}),
			root: 0, down: []int{-1}, up: [][]int{nil}, order: []int{0}, shards: []string{"s1"},
		},
		{
			// listed leaf first: c ← b ← a, a is the root.
			name: "chain",
			spec: ttree(ttask("s0:c", tval("1")), ttask("s0:b", tref("s0:c")), ttask("s0:a", tref("s0:b"))),
			root: 2, down: []int{1, 2, -1}, up: [][]int{nil, {0}, {1}}, order: []int{2, 1, 0},
		},
		{
			name: "wide fan-in",
			spec: wide, root: 0, down: wideDown, up: wideUp, order: wideOrder,
		},
		{
			// r(s0) ← x(s1) ← {l1(s2), l2(s0)}; r ← y(s2) ← l3(s1); mixed values.
			name: "three shards",
			spec: ttree(
				ttask("s2:l1", tval("1")),
				ttask("s0:r", tref("s1:x"), tval(`"sep"`), tref("s2:y")),
				ttask("s1:l3"),
				ttask("s1:x", tref("s2:l1"), tref("s0:l2")),
				ttask("s2:y", tref("s1:l3")),
				ttask("s0:l2"),
			),
			root:   1,
			down:   []int{3, -1, 4, 1, 1, 3},
			up:     [][]int{nil, {3, 4}, nil, {0, 5}, {2}, nil},
			order:  []int{1, 3, 4, 0, 5, 2},
			shards: []string{"s2", "s0", "s1", "s1", "s2", "s0"},
		},
		{name: "longest chain", spec: longChain, checkOnly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tt.spec.Plan(knownS012)
			if err != nil {
				t.Fatalf("Plan() = %v, want a plan", err)
			}
			if err := checkTreePlan(tt.spec, p); err != nil {
				t.Fatal(err)
			}
			if tt.checkOnly {
				return
			}
			if p.Root != tt.root {
				t.Errorf("Root = %d, want %d", p.Root, tt.root)
			}
			if !slices.Equal(p.Downstream, tt.down) {
				t.Errorf("Downstream = %v, want %v", p.Downstream, tt.down)
			}
			if !reflect.DeepEqual(p.Upstreams, tt.up) {
				t.Errorf("Upstreams = %v, want %v", p.Upstreams, tt.up)
			}
			if !slices.Equal(p.Order, tt.order) {
				t.Errorf("Order = %v, want %v", p.Order, tt.order)
			}
			if tt.shards != nil && !slices.Equal(p.Shards, tt.shards) {
				t.Errorf("Shards = %v, want %v", p.Shards, tt.shards)
			}
		})
	}
}

func TestTreePlanNilKnownShard(t *testing.T) {
	t.Parallel()
	s := ttree(ttask("far-away-7:a", tref("s0:b")), ttask("s0:b"))
	if _, err := s.Plan(nil); err != nil {
		t.Fatalf("Plan(nil) = %v, want every valid shard accepted", err)
	}
	if _, err := s.Plan(func(string) bool { return false }); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Plan(none known) = %v, want ErrInvalidArgument", err)
	}
}

func TestTreeSplitPlaceholder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, shard, name string
		ok              bool
	}{
		{"s0:a", "s0", "a", true},
		{"s0:a:b", "s0", "a:b", true},
		{"a-1:x y", "a-1", "x y", true},
		{"s0", "", "", false},
		{"s0:", "", "", false},
		{":a", "", "", false},
		{"S0:a", "", "", false},
		{"s_0:a", "", "", false},
		{"s0:a\x00", "", "", false},
	}
	for _, tt := range tests {
		shard, name, ok := SplitPlaceholder(tt.id)
		if shard != tt.shard || name != tt.name || ok != tt.ok {
			t.Errorf("SplitPlaceholder(%q) = %q, %q, %v; want %q, %q, %v", tt.id, shard, name, ok, tt.shard, tt.name, tt.ok)
		}
	}
}

// checkTreePlan verifies the invariants every plan must hold for spec.
func checkTreePlan(spec *TreeSpec, p *TreePlan) error {
	n := len(spec.Tasks)
	if len(p.Downstream) != n || len(p.Upstreams) != n || len(p.Shards) != n || len(p.Order) != n {
		return fmt.Errorf("plan sizes %d/%d/%d/%d, want %d", len(p.Downstream), len(p.Upstreams), len(p.Shards), len(p.Order), n)
	}
	roots := 0
	for i, d := range p.Downstream {
		if d == -1 {
			roots++
			if i != p.Root {
				return fmt.Errorf("task %d has no downstream but Root = %d", i, p.Root)
			}
			continue
		}
		if d < 0 || d >= n || !slices.Contains(p.Upstreams[d], i) {
			return fmt.Errorf("task %d: downstream %d does not list it among its upstreams", i, d)
		}
	}
	if roots != 1 {
		return fmt.Errorf("%d roots, want 1", roots)
	}
	for i, ups := range p.Upstreams {
		var refs []int
		for _, a := range spec.Tasks[i].Args {
			if a.Ref != "" {
				refs = append(refs, slices.IndexFunc(spec.Tasks, func(t TreeTaskSpec) bool { return t.ID == a.Ref }))
			}
		}
		if !slices.Equal(ups, refs) {
			return fmt.Errorf("task %d: upstreams %v, want the refs in arg order %v", i, ups, refs)
		}
		for _, u := range ups {
			if p.Downstream[u] != i {
				return fmt.Errorf("task %d lists upstream %d whose downstream is %d", i, u, p.Downstream[u])
			}
		}
	}
	if p.Order[0] != p.Root {
		return fmt.Errorf("order starts with %d, want the root %d", p.Order[0], p.Root)
	}
	pos := make([]int, n)
	for i := range pos {
		pos[i] = -1
	}
	for k, i := range p.Order {
		if i < 0 || i >= n || pos[i] >= 0 {
			return fmt.Errorf("order %v is not a permutation", p.Order)
		}
		pos[i] = k
	}
	for i, d := range p.Downstream {
		if d >= 0 && pos[i] < pos[d] {
			return fmt.Errorf("task %d comes before its downstream %d in order %v", i, d, p.Order)
		}
	}
	for i, sp := range p.Shards {
		if !strings.HasPrefix(spec.Tasks[i].ID, sp+":") {
			return fmt.Errorf("task %d: shard %q does not match id %q", i, sp, spec.Tasks[i].ID)
		}
	}
	return nil
}

// treeFromBytes builds a small tree from b, often invalid. The first byte
// picks the task count; per task, one byte picks its shard (sometimes unknown
// or malformed) and its parent among the earlier tasks, so most trees are
// connected, and one more byte mutates it (bad settings, a duplicate ID, a
// stray reference, a bad arg) about one time in five.
func treeFromBytes(b []byte) *TreeSpec {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	n := int(next() % 12)
	shards := []string{"s0", "s1", "s2", "s0", "s1", "s2", "s0", "s1", "s2", "s0", "s1", "s2", "s0", "s1", "s9", "BAD"}
	s := &TreeSpec{Tasks: make([]TreeTaskSpec, n)}
	for i := range s.Tasks {
		c := next()
		s.Tasks[i] = TreeTaskSpec{ID: fmt.Sprintf("%s:t%d", shards[c%16], i), Workload: "w"}
		if i > 0 {
			parent := &s.Tasks[int(c>>3)%i]
			if c&0x80 != 0 {
				parent.Args = append(parent.Args, tval(fmt.Sprint(c)))
			}
			parent.Args = append(parent.Args, tref(s.Tasks[i].ID))
		}
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		c := next()
		other := s.Tasks[int(c>>4)%n].ID
		switch c % 64 {
		case 0:
			t.Workload = ""
		case 1:
			t.MaxAttempts = 101
		case 2:
			t.LeaseSeconds = 1
		case 3:
			t.Priority = -2000
		case 4:
			t.ID = other // a duplicate, or itself
		case 5, 6:
			t.Args = append(t.Args, tref(other)) // a second downstream, a cycle or a self-reference
		case 7:
			t.Args = append(t.Args, tref("s0:missing"))
		case 8:
			t.Args = append(t.Args, TreeArg{})
		case 9:
			t.Args = append(t.Args, tval(string(b[:min(len(b), 3)])))
		case 10:
			t.Args = append(t.Args, TreeArg{Value: json.RawMessage("1"), Ref: other})
		case 11:
			if len(t.Args) > 0 { // drop the last ref: a second root
				t.Args = t.Args[:len(t.Args)-1]
			}
		case 12:
			t.ID = strings.Replace(t.ID, ":", "", 1)
		case 13:
			s.Tasks[0].Args = append(s.Tasks[0].Args, tref(s.Tasks[n-1].ID)) // maybe a cycle through the root
		}
	}
	return s
}

func FuzzTreePlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 5, 0})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 3, 1, 1, 100, 1, 0})     // pair
	f.Add([]byte{3, 0, 0, 1, 0, 2, 0, 3, 2, 1, 2, 3, 1, 0}) // chain-ish
	f.Add([]byte{4, 0, 0, 0, 0, 0, 0, 0, 0, 9, 3, 1, 2, 3, 9, 0, 9, 0, 9, 0})
	f.Add([]byte{5, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 3, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("the quick brown fox jumps over the lazy dog"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := treeFromBytes(b)
		p, err := s.Plan(knownS012)
		if err != nil {
			if p != nil || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Plan() = %v, %v; want nil and an ErrInvalidArgument", p, err)
			}
			return
		}
		if err := checkTreePlan(s, p); err != nil {
			t.Fatalf("plan of %+v: %v", s.Tasks, err)
		}
	})
}

// TestTreeFromBytes guards the fuzz target's generator: it must reach valid
// trees often enough for the plan invariants to be exercised, and every plan
// it yields must hold them.
func TestTreeFromBytes(t *testing.T) {
	t.Parallel()
	x := uint32(1)
	valid, multi := 0, 0
	for range 20_000 {
		b := make([]byte, 40)
		for i := range b {
			x = x*1664525 + 1013904223 // a fixed LCG: the same bytes every run
			b[i] = byte(x >> 24)
		}
		s := treeFromBytes(b)
		p, err := s.Plan(knownS012)
		if err != nil {
			continue
		}
		valid++
		if len(s.Tasks) > 2 {
			multi++
		}
		if err := checkTreePlan(s, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d valid trees, %d with 3+ tasks", valid, multi)
	if valid < 1000 || multi < 500 {
		t.Fatalf("generator made %d valid trees, %d with 3+ tasks; want at least 1000 and 500", valid, multi)
	}
}
