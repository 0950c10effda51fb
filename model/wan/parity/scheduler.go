package parity

import (
	"context"

	"github.com/vdpp/vdpp/sched/schedparity"
)

func init() {
	registerChecker("scheduler_unipc", checkScheduler)
	registerChecker("scheduler_flow_euler", checkScheduler)
}

// checkScheduler runs a scheduler case with sched/schedparity, which compares timesteps
// and sigmas in ulp (<= 1) and samples in relative L2.
func checkScheduler(_ context.Context, _ *Env, c *Case) ([]Result, error) {
	rs, err := schedparity.CheckCase(c.Dir)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(rs))
	for i, r := range rs {
		status := StatusFail
		if r.Pass {
			status = StatusOK
		}
		out[i] = Result{Case: c.Name, Tensor: r.Tensor, Shape: r.Shape, RelL2: r.RelL2, MaxAbs: r.MaxAbs,
			MaxULP: r.MaxULP, Limit: r.Limit, Status: status, Pass: r.Pass, Error: r.Error}
	}
	return out, nil
}
