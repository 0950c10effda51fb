package plan

import (
	"context"
	"log/slog"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cli"
)

// CalibrateWorker is `vdpp worker calibrate`, the job a ProcessCalibrator launches (for
// `vdpp plan` and every --plan auto): every rank times an all-gather over the whole world
// (and a hand-off in a world of two); rank 0 writes the result to Out. Its fields are the
// job's flags; Args renders them from the flag set.
type CalibrateWorker struct {
	// Bytes is what each member contributes to the all-gather (and the hand-off's size).
	Bytes int64
	// Repeats is the timed repetitions, Gap the idle pause before each.
	Repeats int
	Gap     time.Duration
	// Out is the result file rank 0 writes (WriteGroupResult).
	Out string
	// Timeout bounds the connect and every receive.
	Timeout time.Duration
}

// DefaultCalibrateWorker are the job's defaults.
func DefaultCalibrateWorker() CalibrateWorker {
	return CalibrateWorker{Bytes: 4, Repeats: 50, Gap: 2 * time.Millisecond, Timeout: 60 * time.Second}
}

// RegisterFlags binds the job's options to fs, with o's current values as defaults.
func (o *CalibrateWorker) RegisterFlags(fs *cli.FlagSet) {
	fs.Int64Var(&o.Bytes, "bytes", o.Bytes, "bytes each member contributes to the all-gather (and of the hand-off)")
	fs.IntVar(&o.Repeats, "repeats", o.Repeats, "timed repetitions")
	fs.DurationVar(&o.Gap, "gap", o.Gap, "idle pause before each timed collective")
	fs.StringVar(&o.Out, "out", o.Out, "result file (rank 0)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "connect and receive timeout")
}

// Args are the arguments of the job: "worker calibrate" and every flag, rendered from the
// flag set (parsing them gives o back).
func (o CalibrateWorker) Args() []string {
	fs := cli.New("worker calibrate", nil, nil)
	c := o
	c.RegisterFlags(fs)
	return append([]string{"worker", "calibrate"}, fs.AsArgs()...)
}

// Run is one rank of the job in the launched world env.
func (o CalibrateWorker) Run(ctx context.Context, env comm.Env, log *slog.Logger) (err error) {
	tr, err := comm.Dial(ctx, env, comm.Options{RecvTimeout: o.Timeout, ConnectTimeout: o.Timeout, Logger: log})
	if err != nil {
		return err
	}
	defer func() { comm.CloseWith(tr, err) }()
	res, err := (&Calibrator{Repeats: o.Repeats, Gap: o.Gap}).GroupWorker(ctx, tr, o.Bytes)
	if err != nil {
		return err
	}
	if env.Rank != 0 || o.Out == "" {
		return nil
	}
	return WriteGroupResult(o.Out, res)
}
