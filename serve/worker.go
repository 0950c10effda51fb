package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/serve/worker"
)

// Default heartbeat settings of coordinator and workers.
const (
	DefaultHeartbeat        = wire.DefaultHeartbeat
	DefaultHeartbeatTimeout = wire.DefaultHeartbeatTimeout
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

// RunWorker loads the rank's model (the family's denoising role, or cfg.Denoiser),
// connects to the coordinator and runs the batches it sends (worker.Run) until ctx ends or
// the coordinator goes away. A coordinator that closes the connection ends the worker with
// nil.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	steppers, closeModel, err := workerSteppers(cfg.Spec, cfg.Denoiser)
	if err != nil {
		return fmt.Errorf("serve: worker %d: %w", cfg.Rank, err)
	}
	defer closeModel()
	c := cfg.Conn
	if c == nil {
		if c, err = wire.Dial(ctx, cfg.Addr, cfg.Rank, os.Getpid(), cfg.Secret); err != nil {
			return err
		}
	}
	return worker.Run(ctx, worker.Config{Conn: c, Rank: cfg.Rank, Stepper: steppers,
		Heartbeat: cfg.Heartbeat, HeartbeatTimeout: cfg.HeartbeatTimeout, Log: cfg.Log,
		AfterBatch: memRelease.soon})
}

// workerSteppers returns the stepper factory of a worker serving spec: a model family's
// denoising role when the family is known and den is nil, else den (built from
// spec.DenoiserConfig() when nil) with the spec's scheduler.
func workerSteppers(spec ModelSpec, den model.Denoiser) (func(steps int) (*pipeline.Stepper, error), func(), error) {
	if f, ok := family.Lookup(spec.Name); ok && den == nil {
		smp, err := f.Open(spec.Dir, family.Options{Variant: spec.Variant, Backend: spec.Backend,
			Roles: family.Roles{Denoise: true}, Sim: spec.DenoiserConfig()})
		if err != nil {
			return nil, nil, err
		}
		return func(steps int) (*pipeline.Stepper, error) {
			sc, err := smp.Scheduler(steps)
			if err != nil {
				return nil, err
			}
			return smp.Stepper(sc)
		}, func() { smp.Close() }, nil
	}
	if den == nil {
		var err error
		if den, err = model.New(spec.DenoiserConfig()); err != nil {
			return nil, nil, err
		}
	}
	return func(steps int) (*pipeline.Stepper, error) {
		sc, err := NewScheduler(spec, steps)
		if err != nil {
			return nil, err
		}
		return &pipeline.Stepper{Model: den, Sched: sc}, nil
	}, func() {}, nil
}
