package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Default heartbeat settings of coordinator and workers.
const (
	DefaultHeartbeat        = 500 * time.Millisecond
	DefaultHeartbeatTimeout = 3 * time.Second
)

// WorkerConfig is one worker rank of a server.
type WorkerConfig struct {
	Addr   string // the coordinator's worker listener
	Rank   int
	Secret []byte
	Spec   ModelSpec
	// Denoiser, when nil, is built from Spec.DenoiserConfig().
	Denoiser model.Denoiser
	// Heartbeat is the ping interval; HeartbeatTimeout how long the coordinator may be
	// silent before the worker gives up. Defaults DefaultHeartbeat, DefaultHeartbeatTimeout.
	Heartbeat, HeartbeatTimeout time.Duration
	Log                         *slog.Logger
	// Conn, when set, is used instead of dialling Addr (tests).
	Conn net.Conn
}

// workBatch is a batch a worker runs.
type workBatch struct {
	it    *pipeline.Item
	end   int
	steps int
}

// RunWorker connects to the coordinator and runs the batches it sends until ctx ends or the
// coordinator goes away. Each batch runs steps [it.Step, end) with a pipeline.Stepper, one
// denoiser call per step for all rows; rows cancelled by the coordinator are dropped at the
// next step boundary. A coordinator that closes the connection ends the worker with nil.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	den := cfg.Denoiser
	var smp family.Sampler
	if f, ok := family.Lookup(cfg.Spec.Name); ok && den == nil {
		var err error
		smp, err = f.Open(cfg.Spec.Dir, family.Options{Variant: cfg.Spec.Variant, Backend: cfg.Spec.Backend,
			Roles: family.Roles{Denoise: true}, Sim: cfg.Spec.DenoiserConfig()})
		if err != nil {
			return fmt.Errorf("serve: worker %d: %w", cfg.Rank, err)
		}
		defer smp.Close()
	} else if den == nil {
		var err error
		if den, err = model.New(cfg.Spec.DenoiserConfig()); err != nil {
			return fmt.Errorf("serve: worker %d: %w", cfg.Rank, err)
		}
	}
	c := cfg.Conn
	if c == nil {
		var err error
		if c, err = dialCoordinator(ctx, cfg.Addr, cfg.Rank, os.Getpid(), cfg.Secret); err != nil {
			return err
		}
	}
	wc := newWireConn(c, cfg.HeartbeatTimeout)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	w := &worker{cfg: cfg, wc: wc, den: den, sampler: smp, steppers: map[int]*pipeline.Stepper{}, cancels: map[int64]map[int]bool{}}
	inbox := make(chan workBatch, 64)
	errc := make(chan error, 3)
	go func() { errc <- w.read(ctx, inbox) }()
	go func() { errc <- w.heartbeat(ctx) }()
	go func() { errc <- w.compute(ctx, inbox) }()
	err := <-errc
	cancel()
	if errors.Is(err, io.EOF) || parent.Err() != nil {
		return nil // the coordinator closed the connection, or we were told to stop
	}
	return fmt.Errorf("serve: worker %d: %w", cfg.Rank, err)
}

type worker struct {
	cfg      WorkerConfig
	wc       *wireConn
	den      model.Denoiser
	sampler  family.Sampler            // the family's denoising role, when den is not given
	steppers map[int]*pipeline.Stepper // by total steps; used by the compute goroutine only

	mu      sync.Mutex
	cancels map[int64]map[int]bool // batch -> rows to drop
}

func (w *worker) read(ctx context.Context, inbox chan<- workBatch) error {
	for {
		m, err := w.wc.recv(w.cfg.HeartbeatTimeout)
		if err != nil {
			return err
		}
		op, ctl, err := msgOp(m)
		if err != nil {
			return err
		}
		switch op {
		case opPing:
		case opCancel:
			w.mu.Lock()
			set := w.cancels[m.Sample]
			if set == nil {
				set = map[int]bool{}
				w.cancels[m.Sample] = set
			}
			for _, r := range msgRows(m) {
				set[r] = true
			}
			w.mu.Unlock()
		case opRun:
			if len(ctl) < 3 {
				return fmt.Errorf("%w: run without end and steps", ErrProtocol)
			}
			it, err := pipeline.ItemFromMessage(m)
			if err != nil {
				return err
			}
			select {
			case inbox <- workBatch{it: it, end: int(ctl[1]), steps: int(ctl[2])}:
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			return fmt.Errorf("%w: unexpected op %d", ErrProtocol, op)
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
			if err := w.wc.send(comm.Message{Tensors: []comm.NamedTensor{ctlTensor(opPing)}}); err != nil {
				return err
			}
		}
	}
}

func (w *worker) compute(ctx context.Context, inbox <-chan workBatch) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b := <-inbox:
			if err := w.runBatch(ctx, b); err != nil {
				return err
			}
		}
	}
}

func (w *worker) stepper(steps int) (*pipeline.Stepper, error) {
	if s, ok := w.steppers[steps]; ok {
		return s, nil
	}
	if w.sampler != nil {
		sc, err := w.sampler.Scheduler(steps)
		if err != nil {
			return nil, err
		}
		s, err := w.sampler.Stepper(sc)
		if err != nil {
			return nil, err
		}
		w.steppers[steps] = s
		return s, nil
	}
	sc, err := NewScheduler(w.cfg.Spec, steps)
	if err != nil {
		return nil, err
	}
	s := &pipeline.Stepper{Model: w.den, Sched: sc}
	w.steppers[steps] = s
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
func (w *worker) runBatch(ctx context.Context, b workBatch) error {
	it := b.it
	st, err := w.stepper(b.steps)
	if err == nil && (b.end > b.steps || it.Step < 0 || it.Step >= b.end) {
		err = fmt.Errorf("%w: batch %d steps [%d,%d) of %d", ErrProtocol, it.Group, it.Step, b.end, b.steps)
	}
	for err == nil && it.Step < b.end {
		if set := w.takeCancelled(it.Group, false); len(set) > 0 {
			var dropped []int
			it, dropped = dropRows(it, set)
			if len(dropped) > 0 {
				if err := w.wc.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{ctlTensor(opDropped), rowsTensor(dropped)}}); err != nil {
					return err
				}
			}
			if len(it.Samples) == 0 {
				break
			}
		}
		t0 := time.Now()
		if err = st.Step(ctx, it); err != nil {
			break
		}
		us := float32(time.Since(t0).Microseconds())
		if err := w.wc.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{ctlTensor(opProgress, us)}}); err != nil {
			return err
		}
		it.Step++
	}
	w.takeCancelled(it.Group, true)
	memRelease.soon() // the batch's step activations are garbage once it is sent
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.cfg.Log.Error("batch failed", "batch", it.Group, "err", err)
		return w.wc.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{ctlTensor(opFailed), textTensor(err.Error())}})
	case len(it.Samples) == 0:
		return w.wc.send(comm.Message{Sample: it.Group, Step: int32(it.Step), Tensors: []comm.NamedTensor{ctlTensor(opEmpty)}})
	default:
		m := it.ToMessage()
		m.Tensors = append(m.Tensors, ctlTensor(opResult))
		return w.wc.send(m)
	}
}

// dropRows removes the rows whose original index (it.Samples) is in set; it returns the
// compacted item and the dropped indices.
func dropRows(it *pipeline.Item, set map[int]bool) (*pipeline.Item, []int) {
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
	for j, i := range keep {
		states = append(states, it.SchedState.Rows(len(it.Samples), i, i+1))
		out.Samples = append(out.Samples, it.Samples[i])
		copy(out.Latent.Data[j*per:(j+1)*per], it.Latent.Data[i*per:(i+1)*per])
		if it.Cond != nil {
			out.Cond = append(out.Cond, it.Cond[i])
		}
	}
	out.SchedState, _ = sched.StackRows(states) // rows of one state: the same names and shared values
	return out, dropped
}
