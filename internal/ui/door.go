package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Limits bounds what clients can make the server spend: logins that fail
// and live streams. A client is the address a request comes from (its
// /64 for IPv6), or, from a trusted proxy, the address the proxy names
// (Config.TrustedProxies). Zero fields take the defaults below.
type Limits struct {
	// LoginFailures is how many failed logins a client has before it is
	// locked out for Lockout, doubled with each further failure up to
	// MaxLockout; its failures are forgotten after LoginWindow without
	// one. A locked-out client's logins are answered 429 with
	// Retry-After, unchecked, the right password included.
	LoginFailures int
	LoginWindow   time.Duration
	Lockout       time.Duration
	MaxLockout    time.Duration
	// GlobalFailures is the burst of failed logins the server takes
	// from every client together, refilled by one each GlobalRefill: once
	// spent, logins from clients that have not logged in for 12 hours
	// are answered 429 (many addresses cannot share out a guess a
	// second beyond it).
	GlobalFailures int
	GlobalRefill   time.Duration
	// LivePerClient and Live bound the live streams open at once, per
	// client and in all; one over is answered 429.
	LivePerClient int
	Live          int
}

// The default limits.
const (
	DefaultLoginFailures  = 5
	DefaultLoginWindow    = time.Hour
	DefaultLockout        = time.Second
	DefaultMaxLockout     = 15 * time.Minute
	DefaultGlobalFailures = 30
	DefaultGlobalRefill   = time.Second
	DefaultLivePerClient  = 32
	DefaultLive           = 512
)

// loginMemory is how long a client that logged in stays exempt from the
// global limit on failures, so that an attack from elsewhere does not
// lock out the people using the UI.
const loginMemory = 12 * time.Hour

// maxClients bounds the clients the door remembers; over it (after
// forgetting the ones with nothing to remember) a new client is refused
// a login or a live stream. A client is remembered for a failure (which
// the global limit paces), a login, or a live stream (which Live bounds).
const maxClients = 50_000

func (l *Limits) withDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.LoginFailures, DefaultLoginFailures)
	defD(&l.LoginWindow, DefaultLoginWindow)
	defD(&l.Lockout, DefaultLockout)
	defD(&l.MaxLockout, DefaultMaxLockout)
	def(&l.GlobalFailures, DefaultGlobalFailures)
	defD(&l.GlobalRefill, DefaultGlobalRefill)
	def(&l.LivePerClient, DefaultLivePerClient)
	def(&l.Live, DefaultLive)
}

func (l *Limits) validate() error {
	var errs []error
	for _, v := range []struct {
		name string
		n    int
	}{{"login failures", l.LoginFailures}, {"global failures", l.GlobalFailures}, {"live streams per client", l.LivePerClient}, {"live streams", l.Live}} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("ui: %s %d: want a positive number (0: the default)", v.name, v.n))
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"login window", l.LoginWindow}, {"lockout", l.Lockout}, {"longest lockout", l.MaxLockout}, {"global refill", l.GlobalRefill}} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("ui: %s %v: want a positive duration (0: the default)", v.name, v.d))
		}
	}
	if l.LivePerClient > 0 && l.Live > 0 && l.LivePerClient > l.Live {
		errs = append(errs, fmt.Errorf("ui: %d live streams per client, over the %d in all", l.LivePerClient, l.Live))
	}
	return errors.Join(errs...)
}

// refusal is a 429: why, and when to try again; budget marks a login
// refused for the server's budget of failures; toLog, when not 0, is how
// many logins of a locked-out client were refused since the last line
// that said so (one is due).
type refusal struct {
	msg    string
	retry  time.Duration
	budget bool
	toLog  int
}

func (r *refusal) write(w http.ResponseWriter) {
	w.Header().Set("Retry-After", fmt.Sprint(retrySeconds(r.retry)))
	writeError(w, http.StatusTooManyRequests, r.msg, "")
}

// retrySeconds is a Retry-After: whole seconds, at least 1.
func retrySeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// visitor is what the door remembers of one client.
type visitor struct {
	key netip.Addr
	// turn lets one of the client's logins be checked at a time, so that
	// a client sending many at once has no more checked than its
	// failures allow.
	turn chan struct{}
	refs int // requests holding it

	fails        int
	lastFail     time.Time
	blockedUntil time.Time
	lastLogin    time.Time
	live         int
	// refused counts the logins refused while locked out since
	// refusedLogged, when a line last said so.
	refused       int
	refusedLogged time.Time
}

// idle says whether the door may forget c.
func (c *visitor) idle(now time.Time, l *Limits) bool {
	return c.refs == 0 && c.live == 0 && !now.Before(c.blockedUntil) &&
		(c.fails == 0 || now.Sub(c.lastFail) >= l.LoginWindow) &&
		(c.lastLogin.IsZero() || now.Sub(c.lastLogin) >= loginMemory)
}

// door keeps the clients' failed logins and live streams, and the
// server-wide budget of failed logins.
type door struct {
	lim     Limits
	now     func() time.Time
	proxies []netip.Prefix

	mu        sync.Mutex
	clients   map[netip.Addr]*visitor
	live      int
	tokens    float64 // the global budget of failures
	tokensAt  time.Time
	lastSweep time.Time
	// When the last refusal of each kind was logged: refusals cost an
	// attacker nothing, and each would otherwise be a line.
	loggedLive, loggedBudget time.Time
}

// refusalLogEvery is how often a kind of refusal is logged at most.
const refusalLogEvery = 10 * time.Second

// logDue says whether a refusal logged at *last may be logged again, and
// if so marks it logged now.
func (d *door) logDue(last *time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if !last.IsZero() && now.Sub(*last) < refusalLogEvery {
		return false
	}
	*last = now
	return true
}

func newDoor(lim Limits, proxies []netip.Prefix, now func() time.Time) *door {
	return &door{lim: lim, now: now, proxies: proxies, clients: map[netip.Addr]*visitor{}, tokens: float64(lim.GlobalFailures), tokensAt: now()}
}

// clientOf is the client a request comes from: its peer's address, or,
// when the peer is a trusted proxy, the nearest address in
// X-Forwarded-For that is not one. IPv6 clients are counted by /64: one
// host holds that many addresses. A peer address that does not parse is
// the zero address (every such request is one client).
func (d *door) clientOf(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap().WithZone("")
	if d.trusted(a) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h := strings.TrimSpace(hops[i])
			hop, err := netip.ParseAddr(h)
			if err != nil {
				if hp, perr := netip.ParseAddrPort(h); perr == nil {
					hop, err = hp.Addr(), nil
				}
			}
			if err != nil {
				break // a hop that does not parse: the last trusted one is the client
			}
			a = hop.Unmap().WithZone("")
			if !d.trusted(a) {
				break
			}
		}
	}
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

func (d *door) trusted(a netip.Addr) bool {
	for _, p := range d.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// showClient is a client as a log line names it.
func showClient(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is6():
		return a.String() + "/64"
	}
	return a.String()
}

// acquire returns the client of key, remembered until release; nil when
// the door remembers too many clients to take another.
func (d *door) acquire(key netip.Addr) *visitor {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acquireLocked(key)
}

func (d *door) acquireLocked(key netip.Addr) *visitor {
	c := d.clients[key]
	if c == nil {
		if len(d.clients) >= maxClients {
			d.sweepLocked()
			if len(d.clients) >= maxClients {
				return nil
			}
		}
		c = &visitor{key: key, turn: make(chan struct{}, 1)}
		d.clients[key] = c
	}
	c.refs++
	return c
}

func (d *door) release(c *visitor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releaseLocked(c)
}

func (d *door) releaseLocked(c *visitor) {
	c.refs--
	if c.idle(d.now(), &d.lim) {
		delete(d.clients, c.key)
	}
}

// sweepLocked forgets the clients with nothing to remember, at most
// every ten seconds.
func (d *door) sweepLocked() {
	now := d.now()
	if now.Sub(d.lastSweep) < 10*time.Second {
		return
	}
	d.lastSweep = now
	for k, c := range d.clients {
		if c.idle(now, &d.lim) {
			delete(d.clients, k)
		}
	}
}

// login is one login being checked: begin returns it, end says how it
// went.
type login struct {
	d      *door
	c      *visitor
	budget bool // took one of the global budget's failures
}

// begin waits for the client's turn (one login of a client is checked
// at a time) and says whether its login may be checked: nil and a
// refusal when the client is locked out, or is new and the server's
// budget of failures is spent. end must follow a login.
func (d *door) begin(ctx context.Context, key netip.Addr) (*login, *refusal, error) {
	c := d.acquire(key)
	if c == nil {
		return nil, &refusal{msg: "too many clients are failing to log in: try again later", retry: d.lim.Lockout, budget: true}, nil
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		d.release(c)
		return nil, nil, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	refuse := func(r *refusal) (*login, *refusal, error) {
		<-c.turn
		d.releaseLocked(c)
		return nil, r, nil
	}
	if now.Before(c.blockedUntil) {
		wait := c.blockedUntil.Sub(now)
		r := &refusal{msg: fmt.Sprintf("too many failed logins from this address: try again in %d s", retrySeconds(wait)), retry: wait}
		c.refused++
		if c.refusedLogged.IsZero() || now.Sub(c.refusedLogged) >= refusalLogEvery {
			r.toLog, c.refused, c.refusedLogged = c.refused, 0, now
		}
		return refuse(r)
	}
	l := &login{d: d, c: c}
	if c.lastLogin.IsZero() || now.Sub(c.lastLogin) >= loginMemory {
		d.refillLocked(now)
		if d.tokens < 1 {
			wait := time.Duration((1 - d.tokens) * float64(d.lim.GlobalRefill))
			return refuse(&refusal{msg: fmt.Sprintf("too many failed logins to this server: try again in %d s", retrySeconds(wait)), retry: wait, budget: true})
		}
		d.tokens--
		l.budget = true
	}
	return l, nil, nil
}

func (d *door) refillLocked(now time.Time) {
	if now.After(d.tokensAt) {
		d.tokens = min(float64(d.lim.GlobalFailures), d.tokens+float64(now.Sub(d.tokensAt))/float64(d.lim.GlobalRefill))
	}
	d.tokensAt = now
}

// loginResult is what end found: for a success, whether it is the
// client's first login in a while (the one logged); for a failure, the
// client's failures in the window and its lockout, if it has one now.
type loginResult struct {
	first    bool
	failures int
	lockout  time.Duration
}

// end records how the login went and ends the client's turn.
func (l *login) end(ok bool) loginResult {
	d, c := l.d, l.c
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.releaseLocked(c)
	defer func() { <-c.turn }()
	now := d.now()
	var res loginResult
	if ok {
		if l.budget {
			d.tokens = min(float64(d.lim.GlobalFailures), d.tokens+1) // a success spends none
		}
		res.first = c.lastLogin.IsZero() || now.Sub(c.lastLogin) >= loginMemory
		c.lastLogin = now
		return res
	}
	if c.fails > 0 && now.Sub(c.lastFail) >= d.lim.LoginWindow {
		c.fails = 0
	}
	c.fails++
	c.lastFail = now
	res.failures = c.fails
	if over := c.fails - d.lim.LoginFailures; over >= 0 {
		res.lockout = d.lim.MaxLockout
		if over < 32 {
			res.lockout = min(d.lim.MaxLockout, d.lim.Lockout<<over)
		}
		c.blockedUntil = now.Add(res.lockout)
	}
	return res
}

// openLive counts a live stream of key's client: the returned function
// ends it. A refusal when the client or the server has as many as the
// limits allow.
func (d *door) openLive(key netip.Addr) (func(), *refusal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live >= d.lim.Live {
		return nil, &refusal{msg: fmt.Sprintf("the server has %d live streams open, its limit: try again later", d.live), retry: 5 * time.Second}
	}
	c := d.acquireLocked(key)
	if c == nil {
		return nil, &refusal{msg: "the server has too many clients: try again later", retry: 5 * time.Second}
	}
	if c.live >= d.lim.LivePerClient {
		d.releaseLocked(c)
		return nil, &refusal{msg: fmt.Sprintf("this client has %d live streams open, the limit: close some of the UI's tabs", c.live), retry: 5 * time.Second}
	}
	c.live++
	d.live++
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			c.live--
			d.live--
			d.releaseLocked(c)
		})
	}, nil
}
