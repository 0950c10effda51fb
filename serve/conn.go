package serve

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/wire"
)

// workerConn is the coordinator's end of one worker's connection.
type workerConn struct {
	rank, pid   int
	wc          *wire.Conn
	out         chan comm.Message
	done        chan struct{}
	once        sync.Once
	outstanding map[int64]*batch // guarded by Coordinator.mu
}

func cancelMessage(id int64, row int) comm.Message {
	return comm.Message{Sample: id, Tensors: []comm.NamedTensor{wire.Ctl(wire.OpCancel), wire.Rows([]int{row})}}
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
func (c *Coordinator) ServeWorkers(ln net.Listener, secret []byte, heartbeat, timeout time.Duration) error {
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	if timeout <= 0 {
		timeout = DefaultHeartbeatTimeout
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
			if rank < 0 || rank >= c.cfg.NProc {
				c.cfg.Log.Warn("refused a worker with an unknown rank", "rank", rank)
				conn.Close()
				return
			}
			w := &workerConn{rank: rank, pid: pid, wc: wire.NewConn(conn, timeout), out: make(chan comm.Message, 1024),
				done: make(chan struct{}), outstanding: map[int64]*batch{}}
			if !c.join(w) {
				return
			}
			defer c.wg.Done()
			go c.writeLoop(w, heartbeat)
			c.readLoop(w, timeout)
		}()
	}
}

// join registers w as its rank's connection and counts its read loop in wg (the caller
// calls wg.Done when the loop ends). It refuses (false, w closed) once Close has begun.
func (c *Coordinator) join(w *workerConn) bool {
	c.mu.Lock()
	old := c.workers[w.rank]
	if c.closed {
		c.mu.Unlock()
		w.close()
		return false
	}
	c.wg.Add(1)
	c.workers[w.rank] = w
	c.cfg.Log.Info("worker joined", "rank", w.rank, "pid", w.pid, "live", len(c.workers))
	if old != nil {
		c.lostLocked(old, "replaced by a new connection")
	}
	c.dispatchLocked()
	c.mu.Unlock()
	return true
}

func (c *Coordinator) writeLoop(w *workerConn, heartbeat time.Duration) {
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

// readLoop handles a worker's messages until its connection fails, then re-plans its work.
// It runs counted in wg (see join), so Close waits for a message it has already received.
func (c *Coordinator) readLoop(w *workerConn, timeout time.Duration) {
	var err error
	for {
		var m comm.Message
		if m, err = w.wc.Recv(timeout); err != nil {
			break
		}
		if h := c.hooks.received; h != nil {
			h(m)
		}
		if err = c.handle(w, m); err != nil {
			break
		}
	}
	w.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.workers[w.rank] == w {
		delete(c.workers, w.rank)
		if !c.closed {
			c.cfg.Log.Warn("worker lost", "rank", w.rank, "pid", w.pid, "err", err, "live", len(c.workers))
			c.cfg.Metrics.workerLost.Inc()
			if c.onLost != nil {
				c.onLost(w.rank, w.pid)
			}
		}
	}
	c.lostLocked(w, fmt.Sprintf("rank %d lost: %v", w.rank, err))
}

// lostLocked re-queues everything w held and re-plans.
func (c *Coordinator) lostLocked(w *workerConn, why string) {
	w.close()
	for id, b := range w.outstanding {
		delete(w.outstanding, id)
		c.requeueLocked(b, why)
	}
	c.dispatchLocked()
}

func (c *Coordinator) handle(w *workerConn, m comm.Message) error {
	op, ctl, err := msgOp(m)
	if err != nil {
		return err
	}
	if op == opPing {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := w.outstanding[m.Sample]
	if b == nil {
		return fmt.Errorf("%w: op %d for unknown batch %d", ErrProtocol, op, m.Sample)
	}
	b.last = c.cfg.Now()
	switch op {
	case opProgress:
		if len(ctl) > 1 {
			c.cfg.Metrics.stepLatency.WithLabelValues(fmt.Sprint(b.stage)).Observe(float64(ctl[1]) / 1e6)
			work, _ := batchStallInfo(b)
			c.rate.observe(float64(ctl[1])/1e6, work)
		}
		for _, it := range b.items {
			if it != nil {
				it.job.stepsDone = int(m.Step) + 1
				c.touchLocked(it.job)
			}
		}
	case opDropped:
		for _, r := range wire.RowsOf(m) {
			if r >= 0 && r < len(b.items) && b.items[r] != nil {
				it := b.items[r]
				b.items[r] = nil
				it.batch = nil
				c.endLocked(it.job, StateCancelled, "")
			}
		}
		c.dispatchLocked()
	case opEmpty:
		delete(w.outstanding, b.id)
		c.requeueLocked(b, "worker returned no rows")
		c.dispatchLocked()
	case opFailed:
		delete(w.outstanding, b.id)
		msg := wire.TextOf(m)
		for r, it := range b.items {
			if it != nil {
				b.items[r] = nil
				it.batch = nil
				c.endLocked(it.job, StateFailed, fmt.Sprintf("rank %d: %s", w.rank, msg))
			}
		}
		c.dispatchLocked()
	case opResult:
		delete(w.outstanding, b.id)
		pit, err := pipeline.ItemFromMessage(m)
		if err == nil && pit.Step != b.end {
			err = fmt.Errorf("%w: batch %d came back at step %d, want %d", ErrProtocol, b.id, pit.Step, b.end)
		}
		if err != nil {
			c.requeueLocked(b, err.Error())
			return err
		}
		per := pit.Latent.Len() / max(1, len(pit.Samples))
		for i, s := range pit.Samples {
			r := int(s)
			if r < 0 || r >= len(b.items) || b.items[r] == nil {
				continue
			}
			it := b.items[r]
			b.items[r] = nil
			it.batch = nil
			it.latent = it.latent.Clone()
			copy(it.latent.Data, pit.Latent.Data[i*per:(i+1)*per])
			it.sched = pit.SchedState.Rows(len(pit.Samples), i, i+1)
			it.step = b.end
			it.attempts = 0
			switch {
			case it.job.cancelReq:
				c.endLocked(it.job, StateCancelled, "")
			case it.step >= it.job.rec.Params.Steps:
				c.completeLocked(it)
			default:
				c.readyLocked(it)
			}
		}
		c.requeueLocked(b, "row missing from the result")
		c.dispatchLocked()
	default:
		return fmt.Errorf("%w: unexpected op %d from rank %d", ErrProtocol, op, w.rank)
	}
	return nil
}
