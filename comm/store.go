package comm

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SecretLen is the length of the per-run secret the store hands to every rank.
const SecretLen = 32

// defaultStoreWait bounds a blocking store request that names no timeout.
const defaultStoreWait = 5 * time.Minute

// Store is the rendezvous store hosted by rank 0: ranks join with their data address and
// receive the full address table and the run's secret once the world is complete; after
// joining they may use a small key/value space (Set, Get, Wait, Add) guarded by the secret.
type Store struct {
	ln     net.Listener
	world  int
	secret []byte
	logger *slog.Logger

	mu      sync.Mutex
	addrs   []string // by rank; "" while missing
	nodes   []string // by rank: the node each joined from
	joined  int
	kv      map[string][]byte
	changed chan struct{} // closed and replaced on every change
	conns   map[net.Conn]struct{}
	closed  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// ListenStore listens on addr and serves a store for a world of the given size.
func ListenStore(addr string, world int, logger *slog.Logger) (*Store, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("comm: store listen on %s: %w", addr, err)
	}
	s, err := NewStore(ln, world, logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return s, nil
}

// NewStore serves a store on ln (which it then owns) for a world of the given size, with a
// fresh random secret.
func NewStore(ln net.Listener, world int, logger *slog.Logger) (*Store, error) {
	if world < 1 {
		return nil, fmt.Errorf("%w: world size %d < 1", ErrStore, world)
	}
	secret := make([]byte, SecretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("comm: store secret: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Store{
		ln: ln, world: world, secret: secret, logger: logger,
		addrs: make([]string, world), nodes: make([]string, world), kv: map[string][]byte{},
		changed: make(chan struct{}), conns: map[net.Conn]struct{}{}, closed: make(chan struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr returns the address the store listens on.
func (s *Store) Addr() net.Addr { return s.ln.Addr() }

// Close stops the store, drops every client connection and waits for its goroutines.
func (s *Store) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	return nil
}

func (s *Store) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.logger.Warn("comm: store accept", "err", err)
			return
		}
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers the requests of one client connection, one at a time.
func (s *Store) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		var req storeRequest
		if err := readJSONFrame(r, &req); err != nil {
			return
		}
		resp := s.handle(req)
		if resp.Error != "" {
			s.logger.Warn("comm: store refused a request", "remote", c.RemoteAddr().String(), "op", req.Op, "err", resp.Error)
		}
		if err := writeJSONFrame(c, resp); err != nil {
			return
		}
	}
}

func (s *Store) handle(req storeRequest) storeResponse {
	wait := defaultStoreWait
	if req.TimeoutMS > 0 {
		wait = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	if req.Op == opJoin {
		return s.join(req, wait)
	}
	if subtle.ConstantTimeCompare(req.Secret, s.secret) != 1 {
		return storeResponse{Error: "wrong or missing secret"}
	}
	switch req.Op {
	case opSet:
		s.mu.Lock()
		s.kv[req.Key] = req.Value
		s.notifyLocked()
		s.mu.Unlock()
		return storeResponse{}
	case opGet:
		s.mu.Lock()
		v, ok := s.kv[req.Key]
		s.mu.Unlock()
		return storeResponse{Value: v, Found: ok}
	case opAdd:
		s.mu.Lock()
		defer s.mu.Unlock()
		n := int64(0)
		if v, ok := s.kv[req.Key]; ok {
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return storeResponse{Error: fmt.Sprintf("key %q holds %q, not a counter", req.Key, v)}
			}
		}
		n += req.Delta
		s.kv[req.Key] = []byte(strconv.FormatInt(n, 10))
		s.notifyLocked()
		return storeResponse{Count: n}
	case opWait:
		var v []byte
		err := s.waitFor(wait, func() bool {
			var ok bool
			v, ok = s.kv[req.Key]
			return ok
		})
		if err != nil {
			return storeResponse{Error: fmt.Sprintf("store %v for key %q", err, req.Key), Timeout: errors.Is(err, ErrTimeout)}
		}
		return storeResponse{Value: v, Found: true}
	}
	return storeResponse{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

// join registers a rank and waits until the world is complete.
func (s *Store) join(req storeRequest, wait time.Duration) storeResponse {
	switch {
	case req.World != s.world:
		return storeResponse{Error: fmt.Sprintf("rank %d says world size %d, the store has %d", req.Rank, req.World, s.world)}
	case req.Rank < 0 || req.Rank >= s.world:
		return storeResponse{Error: fmt.Sprintf("rank %d out of range for world size %d", req.Rank, s.world)}
	case req.Addr == "":
		return storeResponse{Error: fmt.Sprintf("rank %d gave no address", req.Rank)}
	}
	s.mu.Lock()
	if prev := s.addrs[req.Rank]; prev != "" {
		s.mu.Unlock()
		return storeResponse{Error: fmt.Sprintf("rank %d already joined (from %s)", req.Rank, prev)}
	}
	s.addrs[req.Rank] = req.Addr
	s.nodes[req.Rank] = req.Node
	s.joined++
	s.notifyLocked()
	s.mu.Unlock()
	if err := s.waitFor(wait, func() bool { return s.joined == s.world }); err != nil {
		s.mu.Lock()
		msg := s.missingLocked()
		s.mu.Unlock()
		return storeResponse{Error: fmt.Sprintf("store %v: %s", err, msg), Timeout: errors.Is(err, ErrTimeout)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return storeResponse{Addrs: append([]string(nil), s.addrs...), Nodes: append([]string(nil), s.nodes...), Secret: s.secret}
}

// missingLocked says who did not arrive, and who did, from which node: "2 of 4 ranks
// arrived; missing ranks 2-3 (arrived: ranks 0-1 from node a, 10.0.0.1)".
// Waiting returns what the store waits for ("2 of 4 ranks arrived; waiting for node-rank 1:
// missing ranks 2-3 (arrived: ranks 0-1 from node a)"), "" once every rank has joined. localWorld, when > 0, is
// the ranks per node (a launcher's --nproc-per-node), which names the missing ranks' nodes.
func (s *Store) Waiting(localWorld int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joined == s.world {
		return ""
	}
	msg := s.missingLocked()
	if localWorld <= 0 {
		return msg
	}
	var nodes []int
	for r, a := range s.addrs {
		if n := r / localWorld; a == "" && (len(nodes) == 0 || nodes[len(nodes)-1] != n) {
			nodes = append(nodes, n)
		}
	}
	word := "node-rank "
	if len(nodes) > 1 {
		word = "node-ranks "
	}
	_, list, _ := strings.Cut(FormatRanks(nodes), " ") // "ranks 1-2" -> "1-2"
	return strings.Replace(msg, "; missing ", "; waiting for "+word+list+": missing ", 1)
}

func (s *Store) missingLocked() string {
	var missing []int
	byNode := map[string][]int{}
	var order []string
	for r, a := range s.addrs {
		if a == "" {
			missing = append(missing, r)
			continue
		}
		n := s.nodes[r]
		if n == "" {
			n = "?"
		}
		if _, ok := byNode[n]; !ok {
			order = append(order, n)
		}
		byNode[n] = append(byNode[n], r)
	}
	var arrived []string
	for _, n := range order {
		arrived = append(arrived, FormatRanks(byNode[n])+" from node "+n)
	}
	msg := fmt.Sprintf("%d of %d ranks arrived; missing %s", s.joined, s.world, FormatRanks(missing))
	if len(arrived) > 0 {
		msg += " (arrived: " + strings.Join(arrived, "; ") + ")"
	}
	return msg
}

// FormatRanks names a sorted list of ranks compactly: "rank 3", "ranks 0-3, 6".
func FormatRanks(ranks []int) string {
	if len(ranks) == 0 {
		return "no rank"
	}
	var parts []string
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(ranks[i]))
		default:
			parts = append(parts, strconv.Itoa(ranks[i])+"-"+strconv.Itoa(ranks[j]))
		}
		i = j + 1
	}
	word := "ranks "
	if len(ranks) == 1 {
		word = "rank "
	}
	return word + strings.Join(parts, ", ")
}

func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitFor waits until cond (called with s.mu held) is true, the wait passes or the store closes.
func (s *Store) waitFor(wait time.Duration, cond func() bool) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return &waitedError{wait}
		case <-s.closed:
			return ErrClosed
		}
	}
}

// waitedError is a store-side timeout: "waited 5s".
type waitedError struct{ after time.Duration }

func (e *waitedError) Error() string        { return "waited " + fmtDuration(e.after) }
func (e *waitedError) Is(target error) bool { return target == ErrTimeout }
