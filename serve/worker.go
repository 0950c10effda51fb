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
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/serve/worker"
)

// WorkerConfig is one worker rank of a server.
type WorkerConfig struct {
	Addr   string // the coordinator's worker listener
	Rank   int
	Secret []byte
	Spec   ModelSpec
	// Denoiser, when not nil, replaces the family's denoising role (tests).
	Denoiser model.Denoiser
	// Heartbeat is the ping interval; HeartbeatTimeout how long the coordinator may be
	// silent before the worker gives up. Defaults wire.DefaultHeartbeat, wire.DefaultHeartbeatTimeout.
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

// RunRemoteWorker is a worker rank on another node than the coordinator (a launched
// `vdpp serve` of rank > 0): it loads the model once, then connects to the coordinator at
// cfg.Addr and runs its batches, and whenever the connection ends (the coordinator
// restarted, the link went down and its heartbeats stopped) connects again, retrying every
// second, until ctx ends. The coordinator takes a rank that comes back as it takes a
// restarted worker: the jobs it lost were requeued and run again.
func RunRemoteWorker(ctx context.Context, cfg WorkerConfig) error {
	steppers, closeModel, err := workerSteppers(cfg.Spec, cfg.Denoiser)
	if err != nil {
		return fmt.Errorf("serve: worker %d: %w", cfg.Rank, err)
	}
	defer closeModel()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := wire.Dial(dctx, cfg.Addr, cfg.Rank, os.Getpid(), cfg.Secret)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("coordinator not reachable; retrying", "addr", cfg.Addr, "err", err)
			continue
		}
		log.Info("connected to the coordinator", "addr", cfg.Addr)
		err = worker.Run(ctx, worker.Config{Conn: c, Rank: cfg.Rank, Stepper: steppers,
			Heartbeat: cfg.Heartbeat, HeartbeatTimeout: cfg.HeartbeatTimeout, Log: cfg.Log,
			AfterBatch: memRelease.soon})
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("lost the coordinator; reconnecting", "addr", cfg.Addr, "err", err)
	}
}

// workerSteppers returns the stepper factory of a worker serving spec: the family's
// scheduler, with the family's denoising role, or den when it is not nil (tests wrap a
// denoiser to make it hang or wait).
func workerSteppers(spec ModelSpec, den model.Denoiser) (func(steps int, run string) (*pipeline.Stepper, func(), error), func(), error) {
	r, err := spec.resolve()
	if err != nil {
		return nil, nil, err
	}
	smp, err := r.Open(spec.options(family.Roles{Denoise: den == nil}))
	if err != nil {
		return nil, nil, err
	}
	return func(steps int, run string) (*pipeline.Stepper, func(), error) {
		p, err := job.ParseRunSpec(run)
		if err != nil {
			return nil, nil, err
		}
		p.Steps = steps
		sc, err := smp.Scheduler(family.Params(p))
		if err != nil {
			return nil, nil, err
		}
		if den != nil {
			return &pipeline.Stepper{Model: den, Sched: sc}, nil, nil
		}
		if !p.LoRAs.Empty() {
			// The job's LoRAs, applied in every call over the weights every job shares.
			lr, ok := smp.(family.LoRARunner)
			if !ok {
				return nil, nil, fmt.Errorf("serve: the %s family applies no LoRA per job", smp.Family())
			}
			return lr.StepperLoRA(sc, p.LoRAs, spec.LoRADir)
		}
		st, err := smp.Stepper(sc)
		return st, nil, err
	}, func() { smp.Close() }, nil
}
