package worker_test

import (
	"context"
	"fmt"
	"net"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/serve/worker"
	"github.com/vdpp/vdpp/tensor"
)

// A worker runs a batch the coordinator sends (here over an in-memory pipe): it reports
// each step, then returns the rows at the batch's end step.
func ExampleRun() {
	den, err := synthetic.New(model.Config{StepMS: 0})
	if err != nil {
		panic(err)
	}
	coord, conn := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
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
	batch := &pipeline.Item{Group: 1, Step: 0, Samples: []int64{0}, Latent: tensor.New(1, 1, 4, 2, 2),
		Cond: []model.Conditioning{{}}}
	if err := c.Send(wire.Run(batch, 2, 4, "")); err != nil { // steps [0,2) of a 4-step schedule
		panic(err)
	}
	for {
		m, err := c.Recv(0)
		if err != nil {
			panic(err)
		}
		op, _, _ := wire.Op(m)
		switch op {
		case wire.OpProgress:
			fmt.Println("step", m.Step, "done")
		case wire.OpResult:
			fmt.Println("batch", m.Sample, "back at step", m.Step)
			cancel()
			c.Close()
			fmt.Println("worker ended:", <-done)
			return
		}
	}
	// Output:
	// step 0 done
	// step 1 done
	// batch 1 back at step 2
	// worker ended: <nil>
}
