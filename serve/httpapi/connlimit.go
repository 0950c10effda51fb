package httpapi

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP connection timeouts. Every connection is bounded in time: a client that sends its
// headers slowly, uploads slowly, reads slowly or idles between requests is closed. Event
// streams (SSE) lift the read and write deadlines and set their own per write
// (sseWriteTimeout), with a keep-alive comment every sseKeepAlive.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 60 * time.Second  // headers and the whole upload
	httpWriteTimeout      = 120 * time.Second // one response (a render extends it)
	httpIdleTimeout       = 30 * time.Second  // a keep-alive connection between requests
	httpMaxHeaderBytes    = 64 << 10
	sseWriteTimeout       = 10 * time.Second // one event or keep-alive comment
)

// Descriptor budget: the HTTP connections may use what the file-descriptor limit leaves
// after fdReserve (at least minFDReserve, a quarter of the limit when that is more), so a
// flood of clients cannot starve the store (bbolt, job files, renders, ffmpeg), the worker
// connections or the restart of a lost worker (its pipes and socket).
const (
	minFDReserve       = 256
	maxDefaultConns    = 4096
	perClientDivisor   = 4 // one client address may hold a quarter of the connections
	refusalWriteWindow = 50 * time.Millisecond
)

// ConnLimits bound the HTTP connections the server holds at once: Max over all clients,
// PerClient per client IP address. A connection over its client's cap is answered with a
// 503 and closed at once, before any request is read. One that finds all Max taken while
// its client holds fewer than PerClient takes the place of an idle (or not yet used)
// connection of the client holding the most, when that client holds at least two more
// than the newcomer's; only when there is none is it refused. So a flood from one address
// cannot lock other clients out. A zero field takes DefaultConnLimits's.
type ConnLimits struct {
	Max       int
	PerClient int
}

// DefaultConnLimits derives the limits from the process's file-descriptor limit nofile
// (the soft RLIMIT_NOFILE, which Go raises to the hard limit at start-up): Max leaves
// max(minFDReserve, nofile/4) descriptors for everything else and is at most
// maxDefaultConns; PerClient is a quarter of Max. DefaultConnLimits is pure.
func DefaultConnLimits(nofile uint64) ConnLimits {
	reserve := max(uint64(minFDReserve), nofile/4)
	avail := 0
	if nofile > reserve {
		avail = int(min(nofile-reserve, maxDefaultConns))
	}
	avail = max(avail, 8) // a tiny limit still serves a few clients
	return ConnLimits{Max: avail, PerClient: max(1, avail/perClientDivisor)}
}

// WithDefaults fills zero fields from DefaultConnLimits(nofile) and keeps PerClient <= Max.
func (l ConnLimits) WithDefaults(nofile uint64) ConnLimits {
	d := DefaultConnLimits(nofile)
	if l.Max <= 0 {
		l.Max = d.Max
	}
	if l.PerClient <= 0 {
		l.PerClient = max(1, l.Max/perClientDivisor)
	}
	l.PerClient = min(l.PerClient, l.Max)
	return l
}

// Admit reports whether a new connection may be accepted when total connections are open
// and its client already holds fromClient of them. Admit is pure.
func (l ConnLimits) Admit(total, fromClient int) bool {
	return total < l.Max && fromClient < l.PerClient
}

// EvictionVictim picks the client whose connection a newcomer from client key may take
// when all connections are taken: the one holding the most connections (the smallest key
// among equals), provided it holds at least two more than key does. EvictionVictim is
// pure.
func EvictionVictim(perClient map[string]int, key string) (string, bool) {
	best, bestN := "", 0
	for k, n := range perClient {
		if k != key && (n > bestN || n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best, bestN >= perClient[key]+2
}

// clientKey is the address a connection is counted under: its IP, without the port.
func clientKey(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitListener enforces ConnLimits on an HTTP listener. Accept never returns a refused
// connection: it answers it with a short 503 and closes it itself, so the server's accept
// loop is not slowed by errors.
type limitListener struct {
	net.Listener
	limits  ConnLimits
	refused prometheus.Counter
	evicted prometheus.Counter

	mu    sync.Mutex
	total int
	per   map[string]int
	conns map[string]map[*limitedConn]struct{}
}

// NewLimitListener enforces limits on ln; its metrics go to reg.
func NewLimitListener(ln net.Listener, limits ConnLimits, reg prometheus.Registerer) net.Listener {
	l := &limitListener{Listener: ln, limits: limits, per: map[string]int{}, conns: map[string]map[*limitedConn]struct{}{}}
	l.refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_http_connections_refused_total",
		Help: "HTTP connections refused at accept because of --max-conns or --max-conns-per-client."})
	l.evicted = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_http_connections_evicted_total",
		Help: "Idle HTTP connections of the client holding the most closed to admit another client's."})
	reg.MustRegister(l.refused, l.evicted, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vdpp_http_connections", Help: "HTTP connections open.",
	}, func() float64 { return float64(l.open()) }))
	return l
}

// refusal is written to a connection over the limits.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: application/json\r\nRetry-After: 1\r\nContent-Length: 60\r\n\r\n" +
	`{"error": "too many connections", "code": "too_many_conns"}` + "\n"

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr())
		l.mu.Lock()
		ok := l.limits.Admit(l.total, l.per[key])
		var victim *limitedConn
		if !ok && l.per[key] < l.limits.PerClient {
			victim = l.victimLocked(key)
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Close() // gives its place back
			l.evicted.Inc()
			l.mu.Lock()
			ok = l.limits.Admit(l.total, l.per[key])
			l.mu.Unlock()
		}
		if ok {
			lc := &limitedConn{Conn: c, l: l, key: key}
			l.mu.Lock()
			l.total++
			l.per[key]++
			if l.conns[key] == nil {
				l.conns[key] = map[*limitedConn]struct{}{}
			}
			l.conns[key][lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
		}
		l.refused.Inc()
		c.SetWriteDeadline(time.Now().Add(refusalWriteWindow))
		c.Write([]byte(refusal))
		c.Close() // its descriptor is free now; the kernel finishes the TCP close

	}
}

// victimLocked returns an idle or unused connection of the client EvictionVictim picks, or
// nil.
func (l *limitListener) victimLocked(key string) *limitedConn {
	k, ok := EvictionVictim(l.per, key)
	if !ok {
		return nil
	}
	var fresh *limitedConn
	for c := range l.conns[k] {
		switch http.ConnState(c.state.Load()) {
		case http.StateIdle:
			return c
		case http.StateNew:
			fresh = c
		}
	}
	return fresh
}

// trackState is the http.Server's ConnState hook: it records what each connection is doing.
func trackState(c net.Conn, st http.ConnState) {
	if lc, ok := c.(*limitedConn); ok {
		lc.state.Store(int32(st))
	}
}

func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

func (l *limitListener) release(c *limitedConn) {
	key := c.key
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns[key], c)
	if len(l.conns[key]) == 0 {
		delete(l.conns, key)
	}
	l.total--
	if l.per[key]--; l.per[key] <= 0 {
		delete(l.per, key)
	}
}

// limitedConn gives its slot back once, on the first Close.
type limitedConn struct {
	net.Conn
	l     *limitListener
	key   string
	once  sync.Once
	state atomic.Int32 // http.ConnState, from trackState
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// NewServer is the http.Server of h, with the connection timeouts above and the state
// tracking a NewLimitListener needs to evict idle connections; its own errors go to log at
// debug level.
func NewServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: httpMaxHeaderBytes, ConnState: trackState,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}
