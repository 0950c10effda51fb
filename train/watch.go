package train

import (
	stdcontext "context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// Default heartbeat settings of WatchedPeers.
const (
	DefaultHeartbeat        = time.Second
	DefaultHeartbeatTimeout = 10 * time.Second
)

// errStopped is the cause of a watch ended by Stop.
var errStopped = errors.New("train: heartbeats stopped")

// WatchedPeers are Peers over a group of every rank whose collectives also end, within
// seconds, when another rank stops sending heartbeats (a process killed, stopped or cut
// off): every rank sends one to every other rank each interval on a channel of its own,
// and a rank that hears nothing from a peer for timeout ends its collectives with an error
// naming that peer. A collective can otherwise only time out after the transport's receive
// timeout, which must exceed the longest step.
type WatchedPeers struct {
	g     *comm.Group
	abort stdcontext.Context
	stop  stdcontext.CancelCauseFunc
	wg    sync.WaitGroup
}

// Watch starts the heartbeats of the group g (every rank of tr's world, in rank order) on
// tr and returns the watched Peers; Stop ends them. interval and timeout <= 0 take the
// defaults.
func Watch(tr comm.Transport, g *comm.Group, interval, timeout time.Duration) (*WatchedPeers, error) {
	if interval <= 0 {
		interval = DefaultHeartbeat
	}
	if timeout <= 0 {
		timeout = DefaultHeartbeatTimeout
	}
	tt, ok := tr.(comm.TaggedTransport)
	if !ok {
		return nil, fmt.Errorf("train: transport %T has no tagged channels for heartbeats", tr)
	}
	hb, err := comm.NewNamedGroup(tr, g.Name+"-heartbeat", g.Ranks)
	if err != nil {
		return nil, err
	}
	if hb.Tag() == g.Tag() {
		return nil, fmt.Errorf("train: the heartbeat channel of %v collides with its collectives' (tag %d)", g, g.Tag())
	}
	abort, stop := stdcontext.WithCancelCause(stdcontext.Background())
	w := &WatchedPeers{g: g, abort: abort, stop: stop}
	me := tr.Rank()
	tag := hb.Tag()
	w.wg.Add(1)
	go func() { // the heartbeats this rank sends
		defer w.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for n := int32(0); ; n++ {
			for _, p := range g.Ranks {
				if p == me {
					continue
				}
				if err := tr.Send(abort, p, comm.Message{Step: n, Tag: tag}); err != nil {
					if abort.Err() == nil {
						stop(fmt.Errorf("rank %d is gone (%w)", p, err))
					}
					return
				}
			}
			select {
			case <-abort.Done():
				return
			case <-t.C:
			}
		}
	}()
	for _, p := range g.Ranks {
		if p == me {
			continue
		}
		w.wg.Add(1)
		go func() { // the heartbeats of peer p
			defer w.wg.Done()
			for {
				ctx, cancel := stdcontext.WithTimeout(abort, timeout)
				_, err := tt.RecvTag(ctx, p, tag)
				cancel()
				if abort.Err() != nil {
					return
				}
				if err != nil {
					if errors.Is(err, comm.ErrTimeout) {
						err = fmt.Errorf("rank %d sent no heartbeat for %s: it is stopped, hung or cut off (%w)", p, timeout, err)
					} else {
						err = fmt.Errorf("rank %d is gone (%w)", p, err)
					}
					stop(err)
					return
				}
			}
		}()
	}
	return w, nil
}

// Stop ends the heartbeats and waits for the watch's goroutines.
func (w *WatchedPeers) Stop() {
	w.stop(errStopped)
	w.wg.Wait()
}

// Rank is the local rank's index in the group.
func (w *WatchedPeers) Rank() int { return w.g.Rank() }

// Size is the number of ranks.
func (w *WatchedPeers) Size() int { return w.g.Size() }

// AllGather is comm.AllGather over the group, ended early by a silent peer.
func (w *WatchedPeers) AllGather(ctx stdcontext.Context, t *tensor.Dense) ([]*tensor.Dense, error) {
	ctx, cancel := w.merge(ctx)
	defer cancel()
	out, err := comm.AllGather(ctx, w.g, t)
	return out, w.explain(err)
}

// Barrier is comm.Barrier over the group, ended early by a silent peer.
func (w *WatchedPeers) Barrier(ctx stdcontext.Context) error {
	ctx, cancel := w.merge(ctx)
	defer cancel()
	return w.explain(comm.Barrier(ctx, w.g))
}

// merge returns ctx, also cancelled when the watch fails.
func (w *WatchedPeers) merge(ctx stdcontext.Context) (stdcontext.Context, stdcontext.CancelFunc) {
	ctx, cancel := stdcontext.WithCancel(ctx)
	stopAfter := stdcontext.AfterFunc(w.abort, cancel)
	return ctx, func() {
		stopAfter()
		cancel()
	}
}

// explain replaces a collective's error by the watch's finding (which peer is gone or
// silent) when the watch has one: the collective failed because of it, or will.
func (w *WatchedPeers) explain(err error) error {
	if err == nil {
		return nil
	}
	if cause := stdcontext.Cause(w.abort); cause != nil && !errors.Is(cause, errStopped) {
		return cause
	}
	return err
}
