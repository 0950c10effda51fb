package comm

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// StoreClient speaks to a Store. Its methods are safe for concurrent use (requests are
// serialized on one connection). A request cut short by ctx closes the connection.
type StoreClient struct {
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	secret []byte
	broken error
	// ended, when set, is why the world ended (abort): requests fail with it.
	ended atomic.Pointer[error]
}

// abort fails the pending request and every later one with err.
func (c *StoreClient) abort(err error) {
	c.ended.CompareAndSwap(nil, &err)
	c.conn.Close()
}

// Table is the result of a join: every rank's data address and node, and the run's secret.
type Table struct {
	Addrs  []string
	Nodes  []string
	Secret []byte
}

// DialStore connects to the store at addr, retrying refused connections (rank 0 may not
// be listening yet) until ctx ends.
func DialStore(ctx context.Context, addr string) (*StoreClient, error) {
	var d net.Dialer
	backoff := 20 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			return &StoreClient{conn: c, r: bufio.NewReader(c)}, nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("comm: dial store %s: %w (last error: %v)", addr, ctxErr(ctx), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// ctxErr turns a context's end into ErrTimeout (deadline) or the context's error.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
	}
	return ctx.Err()
}

// LocalAddr returns the local end of the store connection (the interface that reaches the
// store).
func (c *StoreClient) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// Close closes the connection.
func (c *StoreClient) Close() error { return c.conn.Close() }

// do sends one request and reads its answer, bounded by ctx (default defaultStoreWait).
func (c *StoreClient) do(ctx context.Context, req storeRequest) (storeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.ended.Load(); e != nil {
		return storeResponse{}, *e
	}
	if c.broken != nil {
		return storeResponse{}, c.broken
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultStoreWait)
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return storeResponse{}, ctxErr(ctx)
	}
	// The store answers a blocking request at its timeout, a little before ours, and the
	// connection deadline is later still, so that answer (which says what is missing)
	// gets through. Cancellation (not the deadline) aborts the request at once.
	req.TimeoutMS = max(1, (wait - min(wait/10, 250*time.Millisecond)).Milliseconds())
	if req.Op != opJoin {
		req.Secret = c.secret
	}
	c.conn.SetDeadline(deadline.Add(2 * time.Second))
	stop := context.AfterFunc(ctx, func() {
		if ctx.Err() == context.Canceled {
			c.conn.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	var resp storeResponse
	err := writeJSONFrame(c.conn, req)
	if err == nil {
		err = readJSONFrame(c.r, &resp)
	}
	if err != nil {
		if ctx.Err() == context.Canceled {
			err = ctx.Err()
		}
		if e := c.ended.Load(); e != nil {
			err = *e
		}
		c.broken = fmt.Errorf("comm: store connection: %w", err)
		c.conn.Close()
		return storeResponse{}, c.broken
	}
	if resp.Error != "" && resp.Timeout {
		return resp, fmt.Errorf("%w: %s", ErrTimeout, resp.Error)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("%w: %s", ErrStore, resp.Error)
	}
	return resp, nil
}

// Join registers rank with its data address and waits until every rank of world has
// joined; it returns the address table and the run's secret. The node is how the others
// name this rank's machine in errors.
func (c *StoreClient) Join(ctx context.Context, rank, world int, addr, node string) (Table, error) {
	resp, err := c.do(ctx, storeRequest{Op: opJoin, Rank: rank, World: world, Addr: addr, Node: node})
	if err != nil {
		return Table{}, fmt.Errorf("comm: join as rank %d of %d: %w", rank, world, err)
	}
	if len(resp.Addrs) != world || len(resp.Secret) != SecretLen {
		return Table{}, fmt.Errorf("%w: join answer has %d addresses and a %d-byte secret", ErrStore, len(resp.Addrs), len(resp.Secret))
	}
	c.mu.Lock()
	c.secret = resp.Secret
	c.mu.Unlock()
	nodes := resp.Nodes
	if len(nodes) != world {
		nodes = make([]string, world)
	}
	return Table{Addrs: resp.Addrs, Nodes: nodes, Secret: resp.Secret}, nil
}

// Set stores value under key.
func (c *StoreClient) Set(ctx context.Context, key string, value []byte) error {
	if _, err := c.do(ctx, storeRequest{Op: opSet, Key: key, Value: value}); err != nil {
		return fmt.Errorf("comm: store set %q: %w", key, err)
	}
	return nil
}

// Get returns the value under key and whether it exists, without waiting.
func (c *StoreClient) Get(ctx context.Context, key string) ([]byte, bool, error) {
	resp, err := c.do(ctx, storeRequest{Op: opGet, Key: key})
	if err != nil {
		return nil, false, fmt.Errorf("comm: store get %q: %w", key, err)
	}
	return resp.Value, resp.Found, nil
}

// Wait returns the value under key, waiting until some rank sets it or ctx ends.
func (c *StoreClient) Wait(ctx context.Context, key string) ([]byte, error) {
	resp, err := c.do(ctx, storeRequest{Op: opWait, Key: key})
	if err != nil {
		return nil, fmt.Errorf("comm: store wait %q: %w", key, err)
	}
	return resp.Value, nil
}

// Add adds delta to the counter under key (missing = 0) and returns the new value.
func (c *StoreClient) Add(ctx context.Context, key string, delta int64) (int64, error) {
	resp, err := c.do(ctx, storeRequest{Op: opAdd, Key: key, Delta: delta})
	if err != nil {
		return 0, fmt.Errorf("comm: store add %q: %w", key, err)
	}
	return resp.Count, nil
}

// Barrier returns once n callers have called Barrier with the same name (use a fresh
// name for every barrier of a run).
func (c *StoreClient) Barrier(ctx context.Context, name string, n int) error {
	count, err := c.Add(ctx, "barrier/"+name, 1)
	if err != nil {
		return err
	}
	done := "barrier/" + name + "/done"
	if count == int64(n) {
		// All n have arrived: that is this caller's barrier passed. The Set only releases
		// the others, who may already be gone (a released store host can exit before this
		// reply reaches us); if it never lands, they see the error on their own Wait.
		_ = c.Set(ctx, done, []byte(strconv.Itoa(n)))
		return nil
	}
	_, err = c.Wait(ctx, done)
	return err
}
