package parity

import (
	"context"
	"fmt"
	"math"

	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/sched/schedparity"
)

func init() {
	registerChecker("vae_encode", vaeCase(vae.EncodeCase))
	registerChecker("vae_decode", vaeCase(vae.DecodeCase))
	registerChecker("scheduler_unipc", schedulerCase)
	registerChecker("scheduler_flow_euler", schedulerCase)
}

// vaeCase checks a VAE case with the folder's VAE and the VAE package's own runner.
func vaeCase(run func(*vae.VAE, string) ([]vae.TensorError, error)) Checker {
	return func(_ context.Context, env *Env, c *Case) ([]Result, error) {
		v, err := env.Cached("vae", func() (any, func() error, error) {
			v, err := vae.Load(env.Folder.ComponentDir(wan.VAE), c.StringArg("weights_variant", ""), env.Backend)
			if err != nil {
				return nil, nil, err
			}
			return v, v.Close, nil
		})
		if err != nil {
			return nil, err
		}
		errs, err := run(v.(*vae.VAE), c.Dir)
		if err != nil {
			return nil, err
		}
		out := make([]Result, 0, len(errs))
		for _, e := range errs {
			r := Result{Tensor: e.Name, Shape: e.Shape, RelL2: e.RelL2, MaxAbs: e.MaxAbs, Limit: fmt.Sprintf("rel L2 <= %.0e", RelL2Limit), Status: StatusFail}
			if !math.IsNaN(e.RelL2) && e.RelL2 <= RelL2Limit {
				r.Status, r.Pass = StatusOK, true
			}
			out = append(out, r)
		}
		return out, nil
	}
}

// schedulerCase checks a scheduler case with package schedparity (schedules to 1 ulp,
// samples to rel L2 1e-4).
func schedulerCase(_ context.Context, _ *Env, c *Case) ([]Result, error) {
	res, err := schedparity.CheckCase(c.Dir)
	if err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(res))
	for _, r := range res {
		s := StatusFail
		if r.Pass {
			s = StatusOK
		}
		out = append(out, Result{Tensor: r.Tensor, Shape: r.Shape, RelL2: r.RelL2, MaxAbs: r.MaxAbs, Limit: r.Limit, Status: s, Pass: r.Pass, Error: r.Error})
	}
	return out, nil
}
