package bench

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/plan"
)

// AutoMesh asks the planner for the best mesh of o.NProc devices (default 7) for o's
// workload and goal: a paced simulator's step (model.Paced) costs its --step-ms, other models are
// measured; the all-gathers over 2..devices processes and the hand-off are measured
// between real processes started by launch (DefaultLaunch when nil), as `vdpp plan` does. It returns o with the mesh set
// and the planner's choice.
func AutoMesh(ctx context.Context, o Options, launch LaunchFunc) (Options, plan.Prediction, error) {
	return AutoMeshWhere(ctx, o, launch, nil)
}

// AutoMeshWhere is AutoMesh choosing only among the meshes keep accepts (nil: every mesh),
// for a command whose ranks run some meshes only (vdpp serve's workers: pp x dp).
func AutoMeshWhere(ctx context.Context, o Options, launch LaunchFunc, keep func(plan.Mesh) bool) (Options, plan.Prediction, error) {
	if launch == nil {
		launch = DefaultLaunch
	}
	devices := o.NProc
	if devices == 0 {
		devices = 7
	}
	goal, err := plan.ParseGoal(o.Goal)
	if err != nil {
		return o, plan.Prediction{}, err
	}
	shape := o.LatentShape()
	w := plan.Workload{Steps: o.TotalSteps, Samples: o.NumSamples, Frames: o.LatentFrames, Height: o.LatentHeight,
		Width: o.LatentWidth, Channels: o.LatentChannels, Guided: o.Guided(), MicroBatch: o.MicroBatch, Warmup: o.Warmup()}
	cal := &plan.Calibrator{}
	latent := int64(4 * max(1, o.MicroBatch) * o.LatentFrames * o.LatentChannels * o.LatentHeight * o.LatentWidth)
	var costs plan.Costs
	s, st, err := openDenoiser(o)
	if err != nil {
		return o, plan.Prediction{}, err
	}
	defer s.Close()
	if _, paced := st.ModelAt(0).(model.Paced); paced {
		// A simulator whose step costs its --step-ms budget: nothing to measure but the link.
		link, _, err := cal.MeasureLink(ctx, latent)
		if err != nil {
			return o, plan.Prediction{}, err
		}
		costs = plan.SyntheticCosts(o.StepMS, o.LatentFrames, link)
	} else {
		m, err := o.ResolveModel()
		if err != nil {
			return o, plan.Prediction{}, err
		}
		weights, err := plan.FamilyWeights(m, family.Options{Backend: o.Backend}, o.TotalSteps, s)
		if err != nil {
			return o, plan.Prediction{}, err
		}
		// A conditioned model's step needs conditioning rows (as `vdpp plan` gives them).
		if rc, ok := s.(family.RandomConditioner); ok {
			cal.Cond = rc.RandomConditioning(rand.New(rand.NewPCG(uint64(o.Seed), 0)), shape)
		}
		c, err := cal.Calibrate(ctx, o.Model, st.ModelAt(0), shape, weights)
		if err != nil {
			return o, plan.Prediction{}, err
		}
		costs = c.Costs
	}
	if devices >= 2 {
		// The same path as `vdpp plan`: all-gathers and the hand-off between real processes.
		pc, err := (&plan.ProcessCalibrator{Launch: plan.LaunchFunc(launch), Gap: plan.StepGap(w, costs.Step, devices)}).Measure(ctx, devices, latent)
		if err != nil {
			return o, plan.Prediction{}, err
		}
		costs = pc.Apply(costs)
	}
	res, err := plan.Plan(plan.Request{Workload: w, Devices: devices, Costs: costs, Goal: goal})
	if err != nil {
		return o, plan.Prediction{}, err
	}
	var best plan.Prediction
	ok := false
	for _, p := range res.Configs {
		if keep == nil || keep(p.Mesh) {
			best, ok = p, true
			break
		}
	}
	if !ok {
		return o, plan.Prediction{}, fmt.Errorf("bench: --plan auto: no feasible mesh for %d devices", devices)
	}
	o.PP, o.CFG, o.CP, o.DP, o.NProc = best.PP, best.CFG, best.CP, best.DP, devices
	return o, best, nil
}
