package engine

import (
	"sync"
	"time"

	"github.com/scimesh/scimesh/internal/domain"
)

// Worker keys are looked up on every worker request, two reads of the
// database each (the key, then its account) without a cache: a fifth of
// a claim's cost in the single form. keyCache keeps the principals of
// keys looked up lately, for keyCacheTTL at most. Whatever can change a
// key's principal (a key revoked, trusted or untrusted; an account
// disabled or enabled) clears it, here at once (authChanged) and in the
// other processes that share the database through their work
// notifications (kind authNote); a process whose notifications were cut
// off clears it when it listens again. keyCacheTTL bounds what a lost
// notification costs. It keeps, the same way, the max_running of the
// accounts whose tasks open claims lease (Engine.runningLeft), which an
// account's change clears too.
const (
	keyCacheTTL = 10 * time.Second
	keyCacheMax = 10000
)

// authNote is the kind of the work notification that tells other
// processes to forget the principals they remember.
const authNote domain.TaskKind = "auth"

type keyCache struct {
	mu   sync.Mutex
	m    map[string]cached[domain.Principal] // by the key's hash
	caps map[string]cached[int]              // max_running, by account
	gen  uint64                              // moves at every clear, so that a lookup that raced one is not kept
}

type cached[V any] struct {
	v  V
	at time.Time // when it was looked up
}

func newKeyCache() *keyCache {
	return &keyCache{m: map[string]cached[domain.Principal]{}, caps: map[string]cached[int]{}}
}

// get returns the principal of hash remembered since now-keyCacheTTL,
// and the generation to put a fresh lookup under.
func (c *keyCache) get(hash string, now time.Time) (domain.Principal, bool, uint64) {
	return lookup(c, c.m, hash, now)
}

// put remembers p as the principal of hash, looked up at now, unless the
// cache was cleared since gen.
func (c *keyCache) put(hash string, p domain.Principal, now time.Time, gen uint64) {
	remember(c, c.m, hash, p, now, gen)
}

// maxRunning returns account's max_running remembered since
// now-keyCacheTTL, and the generation to put a fresh lookup under.
func (c *keyCache) maxRunning(account string, now time.Time) (int, bool, uint64) {
	return lookup(c, c.caps, account, now)
}

// putMaxRunning remembers n as account's max_running, looked up at now,
// unless the cache was cleared since gen.
func (c *keyCache) putMaxRunning(account string, n int, now time.Time, gen uint64) {
	remember(c, c.caps, account, n, now, gen)
}

// lookup returns what m of c remembers of k since now-keyCacheTTL, and
// c's generation.
func lookup[V any](c *keyCache, m map[string]cached[V], k string, now time.Time) (V, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := m[k]
	if ok && now.Sub(e.at) >= keyCacheTTL {
		delete(m, k)
		var zero V
		return zero, false, c.gen
	}
	return e.v, ok, c.gen
}

// remember puts v under k in m of c, looked up at now, unless c was
// cleared since gen.
func remember[V any](c *keyCache, m map[string]cached[V], k string, v V, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(m) >= keyCacheMax {
		clear(m)
	}
	m[k] = cached[V]{v: v, at: now}
}

// clear forgets every principal and max_running.
func (c *keyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
	clear(c.caps)
}

// authChanged is called after a commit that may change a worker key's
// principal: this process forgets what it remembers, and tells the
// others to.
func (e *Engine) authChanged() {
	e.keys.clear()
	if !e.relays {
		return
	}
	e.notes.add(authNote, "", 1)
	select {
	case e.outgoing <- struct{}{}:
	default:
	}
}
