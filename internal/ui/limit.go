package ui

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Wrong logins are limited per client address: a burst of loginBurst,
// then one more every loginRefill. A right token does not count; but
// while an address waits, no token from it is looked at, right or wrong,
// or a guesser would be limited in nothing. The limit is this process's.
// Behind a proxy every browser comes from the proxy's address, so they
// share one allowance: a guesser there slows everyone's login by seconds,
// and gains no more guesses.
const (
	loginBurst  = 5
	loginRefill = 2 * time.Second
	// loginAddrs bounds the addresses remembered; past it, the oldest
	// allowance is forgotten (a guesser with that many addresses still
	// makes at most loginBurst guesses per address and refill).
	loginAddrs = 10_000
)

// loginLimiter counts wrong logins per client address: a token bucket
// each, kept as the time at which it is full again.
type loginLimiter struct {
	mu   sync.Mutex
	full map[string]time.Time // when the address's bucket is full again
	now  func() time.Time
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{full: map[string]time.Time{}, now: time.Now}
}

// wait returns how long addr must wait before its next login is read; 0
// when it may try now.
func (l *loginLimiter) wait(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	full, ok := l.full[addr]
	if !ok {
		return 0
	}
	// The bucket is empty while full is a whole burst or more ahead.
	if d := full.Sub(l.now()) - (loginBurst-1)*loginRefill; d > 0 {
		return d
	}
	return 0
}

// failed counts a wrong login from addr.
func (l *loginLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	full := l.full[addr]
	if full.Before(now) {
		full = now
	}
	if _, ok := l.full[addr]; !ok && len(l.full) >= loginAddrs {
		l.forgetOne(now)
	}
	l.full[addr] = full.Add(loginRefill)
}

// forgetOne drops the buckets that are full again, or, when none is, the
// one that will be full soonest.
func (l *loginLimiter) forgetOne(now time.Time) {
	var soonest string
	for a, t := range l.full {
		if !t.After(now) {
			delete(l.full, a)
		} else if soonest == "" || t.Before(l.full[soonest]) {
			soonest = a
		}
	}
	if len(l.full) >= loginAddrs {
		delete(l.full, soonest)
	}
}

// clientAddr is the address a request came from, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
