package bench

import (
	"context"

	"github.com/vdpp/vdpp/plan"
)

// AutoMesh asks the planner for the best mesh of o.NProc devices (default 7) for o's
// workload and goal (plan.AutoMesh: a paced simulator's step costs its --step-ms, other
// models are measured; the collectives and the hand-off are measured between real
// processes started by launch, DefaultLaunch when nil). It returns o with the mesh set and
// the planner's choice.
func AutoMesh(ctx context.Context, o Options, launch LaunchFunc) (Options, plan.Prediction, error) {
	return AutoMeshWhere(ctx, o, launch, nil)
}

// AutoMeshWhere is AutoMesh choosing only among the meshes keep accepts (nil: every mesh).
func AutoMeshWhere(ctx context.Context, o Options, launch LaunchFunc, keep func(plan.Mesh) bool) (Options, plan.Prediction, error) {
	if launch == nil {
		launch = DefaultLaunch
	}
	goal, err := plan.ParseGoal(o.Goal)
	if err != nil {
		return o, plan.Prediction{}, err
	}
	m, err := o.ResolveModel()
	if err != nil {
		return o, plan.Prediction{}, err
	}
	devices := o.NProc
	if devices == 0 {
		devices = 7
	}
	best, err := plan.AutoMesh(ctx, plan.AutoRequest{Model: m, Backend: o.Backend, Sim: o.simConfig(), Seed: o.Seed, Weights: o.Weights,
		Workload: plan.Workload{Steps: o.TotalSteps, Samples: o.NumSamples, Frames: o.LatentFrames, Height: o.LatentHeight,
			Width: o.LatentWidth, Channels: o.LatentChannels, Guided: o.Guided(), MicroBatch: o.MicroBatch, Warmup: o.Warmup()},
		Devices: devices, Goal: goal, Launch: plan.LaunchFunc(launch), Keep: keep})
	if err != nil {
		return o, plan.Prediction{}, err
	}
	o.PP, o.CFG, o.CP, o.DP, o.NProc = best.PP, best.CFG, best.CP, best.DP, devices
	return o, best, nil
}
