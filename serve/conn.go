package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/dispatch"
	"github.com/vdpp/vdpp/serve/wire"
)

// workerConn is the coordinator's end of one worker's connection.
type workerConn struct {
	rc   *dispatch.Worker // the dispatcher's view
	rank int
	wc   *wire.Conn
	out  chan comm.Message
	done chan struct{}
	once sync.Once
}

// enqueue queues m for the writer; a worker whose queue is full is broken and is closed.
func (w *workerConn) enqueue(m comm.Message) {
	select {
	case w.out <- m:
	case <-w.done:
	default:
		w.close()
	}
}

func (w *workerConn) close() {
	w.once.Do(func() {
		close(w.done)
		w.wc.Close()
	})
}

// ServeWorkers accepts worker connections on ln until it is closed. Each connection must
// present secret; a rank that connects again replaces its previous connection.
func (c *coordinator) ServeWorkers(ln net.Listener, secret []byte, heartbeat, timeout time.Duration) error {
	if heartbeat <= 0 {
		heartbeat = wire.DefaultHeartbeat
	}
	if timeout <= 0 {
		timeout = wire.DefaultHeartbeatTimeout
	}
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		c.mu.Lock()
		c.unitHost = host
		c.mu.Unlock()
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("serve: accept worker: %w", err)
		}
		go func() {
			rank, pid, err := wire.ReadHello(conn, secret)
			if err != nil {
				c.cfg.Log.Warn("refused a worker connection", "remote", conn.RemoteAddr(), "err", err)
				conn.Close()
				return
			}
			if u := c.units[rank]; u != nil {
				w := &workerConn{wc: wire.NewConn(conn, timeout), out: make(chan comm.Message, 1024), done: make(chan struct{})}
				if !c.joinUnit(w, u, rank, pid) {
					return
				}
				defer c.wg.Done()
				go c.writeLoop(w, heartbeat)
				c.readLoop(w, timeout)
				return
			}
			if !c.cfg.connects(rank) {
				c.cfg.Log.Warn("refused a worker with an unknown rank", "rank", rank)
				conn.Close()
				return
			}
			w := &workerConn{wc: wire.NewConn(conn, timeout), out: make(chan comm.Message, 1024), done: make(chan struct{})}
			if !c.joinConn(w, rank, pid) {
				return
			}
			defer c.wg.Done()
			go c.writeLoop(w, heartbeat)
			c.readLoop(w, timeout)
		}()
	}
}

// joinConn registers w as rank's connection (dispatcher.join) and counts its read loop in
// wg (the caller calls wg.Done when the loop ends). It refuses (false, w closed) once
// Close has begun.
func (c *coordinator) joinConn(w *workerConn, rank, pid int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	rc, ok := c.d.Join(rank, pid, c.cfg.Now())
	if !ok {
		w.close()
		return false
	}
	c.wg.Add(1)
	w.rc, w.rank = rc, rank
	c.conns[rc] = w
	close(c.joined)
	c.joined = make(chan struct{})
	c.flushLocked()
	return true
}

func (c *coordinator) writeLoop(w *workerConn, heartbeat time.Duration) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	ping := wire.Ping()
	for {
		var m comm.Message
		select {
		case <-w.done:
			return
		case m = <-w.out:
		case <-t.C:
			m = ping
		}
		if err := w.wc.Send(m); err != nil {
			w.close()
			return
		}
	}
}

// readLoop feeds a worker's messages to the dispatcher until its connection fails, then
// reports the loss. It runs counted in wg (see joinConn), so Close waits for a message it
// has already received.
func (c *coordinator) readLoop(w *workerConn, timeout time.Duration) {
	var err error
	for {
		var m comm.Message
		if m, err = w.wc.Recv(timeout); err != nil {
			break
		}
		if h := c.hooks.received; h != nil {
			h(w.rank, m)
		}
		c.hold(m)
		if err = c.handle(w, m); err != nil {
			break
		}
	}
	w.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.rc != nil {
		c.d.Lost(w.rc, err, c.cfg.Now())
		delete(c.conns, w.rc)
	}
	if u := c.units[w.rank]; u != nil && u.conns[w.rank] == w {
		c.breakUnitLocked(u, w.rank, err)
	}
	c.flushLocked()
}

// handle decodes a worker's message and feeds it to the dispatcher.
func (c *coordinator) handle(w *workerConn, m comm.Message) error {
	op, ctl, err := wire.Op(m)
	if err != nil {
		return err
	}
	if op == wire.OpPing {
		return nil
	}
	msg := dispatch.Msg{Op: dispatch.Op(op), Batch: m.Sample, Step: int(m.Step)}
	switch op {
	case wire.OpProgress:
		if len(ctl) > 1 {
			msg.Compute, msg.HasCompute = float64(ctl[1])/1e6, true
		}
	case wire.OpDropped:
		msg.Rows = wire.RowsOf(m)
	case wire.OpFailed:
		msg.Text = wire.TextOf(m)
	case wire.OpResult:
		msg.Item, msg.ItemErr = pipeline.ItemFromMessage(m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.rc == nil {
		return nil // a unit member's reports are its leader's
	}
	err = c.d.Message(w.rc, msg, c.cfg.Now())
	c.flushLocked()
	return err
}

// holdPoll is how often a held report looks for the hold file again.
const holdPoll = 10 * time.Millisecond

// hold waits while coordConfig.HoldFile exists if m reports a step past a job's first
// (anything but a ping or the progress of step 0), or until Close begins (a report already
// received is still handled).
func (c *coordinator) hold(m comm.Message) {
	if c.cfg.HoldFile == "" {
		return
	}
	if op, _, err := wire.Op(m); err != nil || op == wire.OpPing || (op == wire.OpProgress && m.Step < 1) {
		return
	}
	for {
		if _, err := os.Stat(c.cfg.HoldFile); errors.Is(err, fs.ErrNotExist) {
			return
		}
		select {
		case <-c.closing:
			return
		case <-time.After(holdPoll):
		}
	}
}
