package comm

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Dial joins the world described by env and returns its TCP transport: rank 0 hosts the
// rendezvous store at MASTER_ADDR:MASTER_PORT; every rank listens for data connections on
// an ephemeral port, joins the store with that address, receives the address table and
// the run's secret, and connects to every other rank (the lower rank dials). A world of one
// needs no network. The whole set-up is bounded by opts.ConnectTimeout and ctx.
func Dial(ctx context.Context, env Env, opts Options) (Transport, error) {
	t, err := DialTCP(ctx, env, opts)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// DialTCP is Dial returning the concrete transport (which also offers Store).
func DialTCP(ctx context.Context, env Env, opts Options) (*TCPTransport, error) {
	opts = opts.withDefaults()
	if err := env.Validate(); err != nil {
		return nil, err
	}
	t := &TCPTransport{
		rank: env.Rank, world: env.WorldSize, opts: opts,
		peers:   make([]*tcpPeer, env.WorldSize),
		closing: make(chan struct{}), closed: make(chan struct{}),
		pending: map[net.Conn]struct{}{},
	}
	if env.WorldSize == 1 {
		return t, nil
	}
	if err := t.connect(ctx, env); err != nil {
		t.Close()
		return nil, fmt.Errorf("rank %d: join world of %d at %s: %w", env.Rank, env.WorldSize, env.MasterHostPort(), err)
	}
	return t, nil
}

func (t *TCPTransport) connect(ctx context.Context, env Env) error {
	ctx, cancel := context.WithTimeout(ctx, t.opts.ConnectTimeout)
	defer cancel()
	var err error
	if t.rank == 0 && !t.opts.ExternalStore {
		if t.server, err = ListenStore(env.ListenAddr(), t.world, t.opts.Logger); err != nil {
			return err
		}
		// Every few seconds until the world is complete: which ranks (and nodes) it waits
		// for, so a node that never comes is named while it is awaited.
		stopReport := t.reportWaiting(func() string { return t.server.Waiting(env.LocalWorldSize) })
		defer stopReport()
	}
	stopDialReport := func() {}
	if t.server == nil {
		addr := env.MasterHostPort()
		stopDialReport = t.reportWaiting(func() string {
			return fmt.Sprintf("rank %d: waiting for rank 0's rendezvous at %s (MASTER_ADDR:MASTER_PORT)", t.rank, addr)
		})
	}
	t.store, err = DialStore(ctx, env.MasterHostPort())
	stopDialReport()
	if err != nil {
		if t.rank != 0 {
			err = fmt.Errorf("%w: rank 0, which hosts the rendezvous at MASTER_ADDR:MASTER_PORT, did not arrive", err)
		}
		return err
	}
	host := t.opts.ListenHost
	if host == "" {
		if a, ok := t.store.LocalAddr().(*net.TCPAddr); ok {
			host = a.IP.String()
		}
	}
	if t.ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
		return fmt.Errorf("data listener: %w", err)
	}
	for r := range t.peers {
		if r != t.rank {
			t.peers[r] = newPeer(t, r)
		}
	}
	table, err := t.store.Join(ctx, t.rank, t.world, t.ln.Addr().String(), nodeName(t.store.LocalAddr()))
	if err != nil {
		return err
	}
	t.secret = table.Secret
	t.nodes = table.Nodes
	t.wg.Add(1)
	go t.acceptLoop()
	errs := make(chan error, t.world)
	for r := t.rank + 1; r < t.world; r++ {
		go func() {
			c, err := dialPeer(ctx, table.Addrs[r], t.rank, t.world, t.secret)
			if err == nil && !t.peers[r].attach(c) {
				c.Close()
				err = ErrClosed
			}
			if err != nil {
				err = fmt.Errorf("connect to rank %d at %s: %w", r, table.Addrs[r], err)
			}
			errs <- err
		}()
	}
	var first error
	for r := t.rank + 1; r < t.world; r++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	for r := 0; r < t.rank; r++ {
		select {
		case <-t.peers[r].ready:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to connect: %w", t.describe(r), ctxErr(ctx))
		}
	}
	if t.opts.HeartbeatTimeout > 0 {
		t.mu.Lock()
		select {
		case <-t.closing:
		default:
			t.wg.Add(1)
			go t.watchdog()
		}
		t.mu.Unlock()
	}
	return nil
}

// reportWaiting logs what waiting() says (when it says something) every
// opts.WaitReport until the returned stop is called.
func (t *TCPTransport) reportWaiting(waiting func() string) (stop func()) {
	if t.opts.WaitReport < 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(t.opts.WaitReport)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if w := waiting(); w != "" {
					t.opts.Logger.Info("rendezvous: " + w)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
