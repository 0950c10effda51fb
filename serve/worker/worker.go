// Package worker is the worker side of vdpp's inference server: the loop a worker rank
// (a `vdpp worker serve` process, or goroutines of the server with an in-process launcher)
// runs on its connection to the coordinator. Which model it runs is the caller's: Config
// carries a function that builds the pipeline.Stepper of a schedule.
//
// Contract:
//   - Each batch the coordinator sends runs steps [Item.Step, end) with one Stepper.Step per
//     step for all its rows, reporting each step (progress, with its compute time), then
//     sends the rows back (result). Batches run one at a time, in the order they came.
//   - A row the coordinator cancels is dropped at the next step boundary (dropped); when
//     every row of the batch being computed is cancelled, the step's context is cancelled
//     too, so the model stops at its next check within the step (between windows, rows or
//     calls; a compiled network call itself runs to its end); a batch
//     whose rows were all dropped ends with empty. A model error is reported (failed) and
//     the worker goes on; only a broken connection ends it.
//   - A unit message makes the rank a member of a cfg x cp unit: it joins the unit's comm
//     transport through the store the coordinator hosts and splits every step with the
//     unit's other ranks exactly as `vdpp generate --cfg --cp` does (pipeline.Place, and
//     Placement.Configure for each batch's frames). The coordinator sends every member the same batches; only the
//     leader (index 0) reports them. Cancels are ignored in a unit (rows are dropped by
//     the coordinator when the batch comes back: the members must step the same rows), and
//     a broken unit transport ends Run with an error, so the coordinator re-runs the batch
//     rather than failing it.
//   - The worker pings every Heartbeat and gives up on a coordinator silent for
//     HeartbeatTimeout. A coordinator that closes the connection, or ctx ending, ends Run
//     with nil.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/tensor"
)

// Config is one worker rank on an authenticated connection (wire.Dial).
type Config struct {
	Conn net.Conn
	Rank int
	// Stepper builds the stepper of a schedule of the given total steps and run spec (the
	// jobs' sampler and LoRAs, wire.SpecOf) and what releases it (nil: nothing); it is
	// called from one goroutine, once per distinct schedule while at most MaxSteppers are
	// kept (the least recently used is released first).
	Stepper func(steps int, spec string) (*pipeline.Stepper, func(), error)
	// Heartbeat is the ping interval; HeartbeatTimeout how long the coordinator may be
	// silent before the worker gives up. Defaults wire.DefaultHeartbeat and
	// wire.DefaultHeartbeatTimeout.
	Heartbeat, HeartbeatTimeout time.Duration
	// AfterBatch, when set, runs after each batch (the server returns freed memory).
	AfterBatch func()
	Log        *slog.Logger
}

// batch is a batch a worker runs, or (unit set) the unit it computes in from now on.
type batch struct {
	it    *pipeline.Item
	end   int
	steps int
	spec  string // the job's run spec (wire.SpecOf)
	unit  *unit
}

// stepperKey is what a step runner is built for: the schedule's steps and the run spec.
type stepperKey struct {
	steps int
	spec  string
}

// unit is the rank's place in its cfg x cp unit.
type unit struct {
	index int
	place pipeline.Placement
}

// Run runs the batches the coordinator sends on cfg.Conn until ctx ends or the coordinator
// goes away (then nil); it closes the connection when it returns.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = wire.DefaultHeartbeat
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = wire.DefaultHeartbeatTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.AfterBatch == nil {
		cfg.AfterBatch = func() {}
	}
	c := cfg.Conn
	wc := wire.NewConn(c, cfg.HeartbeatTimeout)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	w := &worker{cfg: cfg, wc: wc, steppers: map[stepperKey]*keptStepper{}, cancels: map[int64]map[int]bool{}}
	inbox := make(chan batch, 64)
	errc := make(chan error, 3)
	go func() { errc <- w.read(ctx, inbox) }()
	go func() { errc <- w.heartbeat(ctx) }()
	go func() { errc <- w.compute(ctx, inbox) }()
	err := <-errc
	cancel()
	w.closeUnit()
	if errors.Is(err, io.EOF) || parent.Err() != nil {
		return nil // the coordinator closed the connection, or we were told to stop
	}
	return fmt.Errorf("serve: worker %d: %w", cfg.Rank, err)
}

type worker struct {
	cfg      Config
	wc       *wire.Conn
	steppers map[stepperKey]*keptStepper // used by the compute goroutine only
	used     int64                       // the steppers' use clock
	unit     *unit                       // the rank's unit (nil: none); compute goroutine only
	inUnit   bool                        // a unit was joined; read goroutine only

	mu      sync.Mutex
	cancels map[int64]map[int]bool // batch -> rows to drop
	// cur is the batch being computed: its live rows and the cancel of its context, which
	// a cancel of every live row calls, so the model stops at its next check within the
	// step (between windows or calls) rather than at the step's end.
	cur *current
	// tr is the unit's transport, closed when Run ends.
	tr comm.Transport
}

// joinUnit joins the unit's transport through the store the coordinator hosts on port of
// its own host, and places the rank in the unit's cfg x cp mesh.
func (w *worker) joinUnit(ctx context.Context, index, cfg, cp, port int) (*unit, error) {
	host, _, err := net.SplitHostPort(w.cfg.Conn.RemoteAddr().String())
	if err != nil {
		return nil, fmt.Errorf("unit: coordinator address: %w", err)
	}
	mesh, err := comm.NewMesh(1, cfg, cp, 1, cfg*cp)
	if err != nil || index < 0 || index >= mesh.Size() {
		return nil, fmt.Errorf("%w: unit member %d of cfg %d x cp %d", wire.ErrProtocol, index, cfg, cp)
	}
	env := comm.Env{Rank: index, WorldSize: mesh.Size(), LocalRank: index, LocalWorldSize: mesh.Size(), MasterAddr: host, MasterPort: port}
	tr, err := comm.DialTCP(ctx, env, comm.Options{ExternalStore: true, Logger: w.cfg.Log, ConnectTimeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("unit: %w", err)
	}
	w.mu.Lock()
	w.tr = tr
	w.mu.Unlock()
	place, err := pipeline.Place(mesh, tr)
	if err != nil {
		return nil, fmt.Errorf("unit: %w", err)
	}
	w.cfg.Log.Info("joined a unit", "index", index, "mesh", mesh.String())
	return &unit{index: index, place: place}, nil
}

func (w *worker) closeUnit() {
	w.mu.Lock()
	tr := w.tr
	w.mu.Unlock()
	if tr != nil {
		tr.Close()
	}
}

// send sends m to the coordinator, unless the rank is a unit member other than the leader
// (the leader reports the unit's batches).
func (w *worker) send(m comm.Message) error {
	if w.unit != nil && w.unit.index != 0 {
		return nil
	}
	return w.wc.Send(m)
}

// unitBroken reports whether err is the loss of the unit's transport (a member died or
// stalled), which the coordinator must see as the rank's loss, not as a model failure.
func unitBroken(err error) bool {
	return errors.Is(err, comm.ErrPeerGone) || errors.Is(err, comm.ErrClosed) || errors.Is(err, comm.ErrTimeout)
}

// current is the batch a worker computes.
type current struct {
	id     int64
	live   map[int]bool // original row indices (Item.Samples)
	cancel context.CancelFunc
}

// setCurrent records the batch being computed (nil: none) and calls its cancel when
// every live row is already cancelled.
func (w *worker) setCurrent(c *current) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur = c
	w.cancelIfAllLocked()
}

// cancelIfAllLocked cancels the current batch's context when the cancels cover all its
// live rows; the caller holds mu.
func (w *worker) cancelIfAllLocked() {
	c := w.cur
	if c == nil || len(c.live) == 0 {
		return
	}
	set := w.cancels[c.id]
	for r := range c.live {
		if !set[r] {
			return
		}
	}
	c.cancel()
}

func (w *worker) read(ctx context.Context, inbox chan<- batch) error {
	for {
		m, err := w.wc.Recv(w.cfg.HeartbeatTimeout)
		if err != nil {
			return err
		}
		op, ctl, err := wire.Op(m)
		if err != nil {
			return err
		}
		switch op {
		case wire.OpPing:
		case wire.OpCancel:
			if w.inUnit {
				continue // the members must step the same rows: the coordinator drops them
			}
			w.mu.Lock()
			set := w.cancels[m.Sample]
			if set == nil {
				set = map[int]bool{}
				w.cancels[m.Sample] = set
			}
			for _, r := range wire.RowsOf(m) {
				set[r] = true
			}
			w.cancelIfAllLocked()
			w.mu.Unlock()
		case wire.OpRun:
			if len(ctl) < 3 {
				return fmt.Errorf("%w: run without end and steps", wire.ErrProtocol)
			}
			it, err := pipeline.ItemFromMessage(m)
			if err != nil {
				// A batch this rank cannot read fails, as a model failure does; the rank
				// stays for the next one.
				w.cfg.Log.Error("batch refused", "batch", m.Sample, "err", err)
				if err := w.send(comm.Message{Sample: m.Sample, Step: m.Step, Tensors: []comm.NamedTensor{wire.Ctl(wire.OpFailed), wire.Text(err.Error())}}); err != nil {
					return err
				}
				continue
			}
			select {
			case inbox <- batch{it: it, end: int(ctl[1]), steps: int(ctl[2]), spec: wire.SpecOf(m)}:
			case <-ctx.Done():
				return ctx.Err()
			}
		case wire.OpUnit:
			if len(ctl) < 5 || w.inUnit {
				return fmt.Errorf("%w: unit message %v", wire.ErrProtocol, ctl)
			}
			u, err := w.joinUnit(ctx, int(ctl[1]), int(ctl[2]), int(ctl[3]), int(ctl[4]))
			if err != nil {
				return err
			}
			w.inUnit = true
			select {
			case inbox <- batch{unit: u}:
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			return fmt.Errorf("%w: unexpected op %d", wire.ErrProtocol, op)
		}
	}
}

func (w *worker) heartbeat(ctx context.Context) error {
	t := time.NewTicker(w.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := w.wc.Send(wire.Ping()); err != nil {
				return err
			}
		}
	}
}

func (w *worker) compute(ctx context.Context, inbox <-chan batch) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b := <-inbox:
			if b.unit != nil {
				w.unit = b.unit
				continue
			}
			if err := w.runBatch(ctx, b); err != nil {
				return err
			}
		}
	}
}

// MaxSteppers is how many step runners a worker keeps (a runner with LoRAs holds their
// tensors and its own compiled graphs).
const MaxSteppers = 8

// keptStepper is a kept step runner, with what releases it and when it was last used.
type keptStepper struct {
	st      *pipeline.Stepper
	release func()
	used    int64
}

func (w *worker) stepper(steps int, spec string) (*pipeline.Stepper, error) {
	k := stepperKey{steps, spec}
	w.used++
	if s, ok := w.steppers[k]; ok {
		s.used = w.used
		return s.st, nil
	}
	if len(w.steppers) >= MaxSteppers {
		var oldest stepperKey
		first := true
		for key, s := range w.steppers {
			if first || s.used < w.steppers[oldest].used {
				oldest, first = key, false
			}
		}
		if r := w.steppers[oldest].release; r != nil {
			r()
		}
		delete(w.steppers, oldest)
	}
	s, release, err := w.cfg.Stepper(steps, spec)
	if err != nil {
		return nil, err
	}
	w.steppers[k] = &keptStepper{st: s, release: release, used: w.used}
	return s, nil
}

// takeCancelled returns the rows of batch id cancelled since the last call.
func (w *worker) takeCancelled(id int64, done bool) map[int]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.cancels[id]
	if done {
		delete(w.cancels, id)
	} else if set != nil {
		w.cancels[id] = map[int]bool{}
	}
	return set
}

// runBatch runs one batch; only a broken connection is returned as an error (a model
// failure is reported to the coordinator and the worker goes on).
func (w *worker) runBatch(ctx context.Context, b batch) error {
	it := b.it
	st, err := w.stepper(b.steps, b.spec)
	if err == nil && (b.end > b.steps || it.Step < 0 || it.Step >= b.end) {
		err = fmt.Errorf("%w: batch %d steps [%d,%d) of %d", wire.ErrProtocol, it.Group, it.Step, b.end, b.steps)
	}
	if err == nil && w.unit != nil {
		// The unit's split, as generate's ranks set it: the cfg pair (and the cp frames of
		// this batch's latent).
		err = w.unit.place.Configure(st, it.Latent.Shape[1])
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	live := func() *current {
		c := &current{id: it.Group, live: map[int]bool{}, cancel: cancel}
		for _, s := range it.Samples {
			c.live[int(s)] = true
		}
		return c
	}
	w.setCurrent(live())
	defer w.setCurrent(nil)
	for err == nil && it.Step < b.end {
		if set := w.takeCancelled(it.Group, false); len(set) > 0 {
			var dropped []int
			it, dropped = DropRows(it, set)
			if len(dropped) > 0 {
				if err := w.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{wire.Ctl(wire.OpDropped), wire.Rows(dropped)}}); err != nil {
					return err
				}
				w.setCurrent(live())
			}
			if len(it.Samples) == 0 {
				break
			}
		}
		t0 := time.Now()
		if err = st.Step(bctx, it); err != nil {
			if bctx.Err() != nil && ctx.Err() == nil {
				err = nil // every row was cancelled within the step: the loop drops them
				continue
			}
			break
		}
		us := float32(time.Since(t0).Microseconds())
		if err := w.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{wire.Ctl(wire.OpProgress, us)}}); err != nil {
			return err
		}
		it.Step++
	}
	w.takeCancelled(it.Group, true)
	w.cfg.AfterBatch() // the batch's step activations are garbage once it is sent
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if w.unit != nil && unitBroken(err) {
			return fmt.Errorf("batch %d: unit transport lost: %w", it.Group, err)
		}
		w.cfg.Log.Error("batch failed", "batch", it.Group, "err", err)
		return w.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{wire.Ctl(wire.OpFailed), wire.Text(err.Error())}})
	case len(it.Samples) == 0:
		return w.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{wire.Ctl(wire.OpEmpty)}})
	default:
		m := it.ToMessage()
		m.Tensors = append(m.Tensors, wire.Ctl(wire.OpResult))
		return w.send(m)
	}
}

// DropRows removes the rows whose original index (it.Samples) is in set; it returns the
// compacted item and the dropped indices. DropRows is pure.
func DropRows(it *pipeline.Item, set map[int]bool) (*pipeline.Item, []int) {
	var keep []int
	var dropped []int
	for i, s := range it.Samples {
		if set[int(s)] {
			dropped = append(dropped, int(s))
		} else {
			keep = append(keep, i)
		}
	}
	if len(dropped) == 0 {
		return it, nil
	}
	per := it.Latent.Len() / len(it.Samples)
	shape := append([]int{len(keep)}, it.Latent.Shape[1:]...)
	out := &pipeline.Item{Group: it.Group, Step: it.Step, Guidance: it.Guidance, Windows: it.Windows, Latent: tensor.New(shape...)}
	var states []sched.State
	var caches []*pipeline.ItemCache
	var ones []int
	for j, i := range keep {
		states = append(states, it.SchedState.Rows(len(it.Samples), i, i+1))
		caches, ones = append(caches, it.Cache.Rows(i, i+1)), append(ones, 1)
		out.Samples = append(out.Samples, it.Samples[i])
		copy(out.Latent.Data[j*per:(j+1)*per], it.Latent.Data[i*per:(i+1)*per])
		if it.Cond != nil {
			out.Cond = append(out.Cond, it.Cond[i])
		}
	}
	out.SchedState, _ = sched.StackRows(states)       // rows of one state: the same names and shared values
	out.Cache, _ = pipeline.StackCaches(caches, ones) // rows of one cache: the same rule
	return out, dropped
}
