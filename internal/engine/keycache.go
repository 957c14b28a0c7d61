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
// notification costs.
const (
	keyCacheTTL = 10 * time.Second
	keyCacheMax = 10000
)

// authNote is the kind of the work notification that tells other
// processes to forget the principals they remember.
const authNote domain.TaskKind = "auth"

type keyCache struct {
	mu  sync.Mutex
	m   map[string]keyEntry // by the key's hash
	gen uint64              // moves at every clear, so that a lookup that raced one is not kept
}

type keyEntry struct {
	p  domain.Principal
	at time.Time
}

func newKeyCache() *keyCache { return &keyCache{m: map[string]keyEntry{}} }

// get returns the principal of hash remembered since now-keyCacheTTL,
// and the generation to put a fresh lookup under.
func (c *keyCache) get(hash string, now time.Time) (p domain.Principal, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if ok && now.Sub(e.at) >= keyCacheTTL {
		delete(c.m, hash)
		ok = false
	}
	return e.p, ok, c.gen
}

// put remembers p as the principal of hash, looked up at now, unless the
// cache was cleared since gen.
func (c *keyCache) put(hash string, p domain.Principal, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(c.m) >= keyCacheMax {
		clear(c.m)
	}
	c.m[hash] = keyEntry{p: p, at: now}
}

// clear forgets every principal.
func (c *keyCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
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
