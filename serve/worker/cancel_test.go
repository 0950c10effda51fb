package worker_test

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/serve/worker"
	"github.com/vdpp/vdpp/tensor"
)

// waiting is a denoiser whose call lasts until its context ends (a step much longer than
// the test); it tells entered when a call has begun.
type waiting struct{ entered chan struct{} }

func (d waiting) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	d.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (waiting) WeightBytes() int64 { return 0 }

// TestCancelWithinStep: when every row of the batch being computed is cancelled, the step
// itself stops (its context is cancelled) and the batch ends dropped and empty, instead of
// the cancel waiting for the step's end. In a synctest bubble: the step lasts until its
// context ends, on a fake clock.
func TestCancelWithinStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		den := waiting{entered: make(chan struct{}, 1)}
		coord, conn := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- worker.Run(ctx, worker.Config{Conn: conn, Rank: 0, Stepper: func(steps int, _ string) (*pipeline.Stepper, func(), error) {
				sc, err := sched.New(sched.DefaultSVDConfig(), steps)
				if err != nil {
					return nil, nil, err
				}
				return &pipeline.Stepper{Model: den, Sched: sc}, nil, nil
			}})
		}()
		c := wire.NewConn(coord, 0)
		batch := &pipeline.Item{Group: 1, Samples: []int64{0}, Latent: tensor.New(1, 1, 4, 2, 2), Cond: []model.Conditioning{{}}}
		if err := c.Send(wire.Run(batch, 5, 5, "")); err != nil {
			t.Fatal(err)
		}
		<-den.entered // the first step's model call is running
		if err := c.Send(wire.Cancel(1, 0)); err != nil {
			t.Fatal(err)
		}
		var ops []int
		for deadline := time.Now().Add(10 * time.Second); ; {
			m, err := c.Recv(time.Until(deadline))
			if err != nil {
				t.Fatalf("after %v: %v", ops, err)
			}
			op, _, _ := wire.Op(m)
			if op == wire.OpPing {
				continue
			}
			ops = append(ops, op)
			if op == wire.OpEmpty || op == wire.OpFailed || op == wire.OpResult {
				break
			}
		}
		if want := []int{wire.OpDropped, wire.OpEmpty}; len(ops) != 2 || ops[0] != want[0] || ops[1] != want[1] {
			t.Fatalf("ops %v, want dropped then empty", ops)
		}
		cancel()
		c.Close()
		if err := <-done; err != nil {
			t.Fatalf("worker ended with %v", err)
		}
	})
}

// quick is a denoiser that returns its input at once.
type quick struct{}

func (quick) Predict(_ context.Context, in model.Input) (*tensor.Dense, error) {
	return in.Latents.Clone(), nil
}
func (quick) WeightBytes() int64 { return 0 }

// TestUnreadableBatchFailsAlone: a batch whose hand-off this rank cannot read (here a cache
// rule it refuses) fails, answered as a model failure is, and the rank stays: the next
// batch runs. A hostile job must never take a worker down.
func TestUnreadableBatchFailsAlone(t *testing.T) {
	coord, conn := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Config{Conn: conn, Rank: 0, Stepper: func(steps int, _ string) (*pipeline.Stepper, func(), error) {
			sc, err := sched.New(sched.DefaultSVDConfig(), steps)
			if err != nil {
				return nil, nil, err
			}
			return &pipeline.Stepper{Model: quick{}, Sched: sc}, func() {}, nil
		}})
	}()
	c := wire.NewConn(coord, 0)
	next := func() int {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			m, err := c.Recv(time.Until(deadline))
			if err != nil {
				t.Fatal(err)
			}
			if op, _, _ := wire.Op(m); op != wire.OpPing && op != wire.OpProgress {
				return op
			}
		}
	}
	bad := wire.Run(&pipeline.Item{Group: 1, Samples: []int64{0}, Latent: tensor.New(1, 1, 4, 2, 2), Cond: []model.Conditioning{{}}}, 2, 2, "")
	for i, nt := range bad.Tensors {
		if nt.Name == "samples" {
			bad.Tensors[i].Tensor = &tensor.Dense{Shape: []int{1, 3}, Data: []float32{0, 0, 0.5}} // not a whole number
		}
	}
	if err := c.Send(bad); err != nil {
		t.Fatal(err)
	}
	if op := next(); op != wire.OpFailed {
		t.Fatalf("an unreadable batch: op %d, want failed", op)
	}
	good := &pipeline.Item{Group: 2, Samples: []int64{0}, Latent: tensor.New(1, 1, 4, 2, 2), Cond: []model.Conditioning{{}}}
	if err := c.Send(wire.Run(good, 2, 2, "")); err != nil {
		t.Fatal(err)
	}
	if op := next(); op != wire.OpResult {
		t.Fatalf("the next batch: op %d, want a result", op)
	}
	cancel()
	c.Close()
	if err := <-done; err != nil {
		t.Fatalf("worker ended with %v", err)
	}
}
