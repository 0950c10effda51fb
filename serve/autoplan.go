package serve

import (
	"context"
	"log/slog"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/plan"
)

// autoServed reports whether `vdpp serve --plan auto` may choose mesh m: pp x dp only, as a
// cfg pair refuses unguided jobs and a cp unit short or windowed ones, which the server's
// clients may send; --cfg and --cp are the operator's explicit choice.
func autoServed(m plan.Mesh) bool { return m.CFG == 1 && m.CP == 1 }

// AutoMesh is `vdpp serve --plan auto`: the planner's best pp x dp mesh of cfg.NProc
// devices for the model --model names (modelName) and its native job (its default frames,
// size, steps and guidance; 60 samples), chosen as `vdpp generate --plan auto` and `vdpp
// bench --plan auto` choose (plan.AutoMesh: the model's step measured here, the hand-off
// and collectives between real processes).
func AutoMesh(ctx context.Context, modelName string, cfg Config, goal string, log *slog.Logger) (comm.Mesh, error) {
	g, err := plan.ParseGoal(goal)
	if err != nil {
		return comm.Mesh{}, badOptions("--goal: %w", err)
	}
	m, err := family.Resolve(modelName)
	if err != nil {
		return comm.Mesh{}, err
	}
	sim := model.Config{StepMS: cfg.Spec.StepMS, Cost: cfg.Spec.Cost, HiddenChannels: 32}
	sh, err := plan.ResolveShape(m, sim, plan.Shape{})
	if err != nil {
		return comm.Mesh{}, err
	}
	sim.LatentChannels = sh.LatentChannels
	desc, err := m.Describe()
	if err != nil {
		return comm.Mesh{}, err
	}
	// A job leaves its guidance at the model's default unless it sets it.
	def := desc.Defaults
	const samples = 60
	best, err := plan.AutoMesh(ctx, plan.AutoRequest{Model: m, Backend: cfg.Spec.Backend, Sim: sim, Weights: cfg.Spec.Weights,
		Workload: plan.Workload{Steps: sh.Steps, Samples: samples, Frames: sh.LatentFrames, Height: sh.LatentHeight, Width: sh.LatentWidth,
			Channels: sh.LatentChannels, Guided: def.MaxGuidance > 1 || def.GuidanceScale > 1, MicroBatch: 1, Warmup: 4},
		Devices: cfg.NProc, Goal: g, Keep: autoServed})
	if err != nil {
		return comm.Mesh{}, err
	}
	mesh := comm.Mesh{PP: best.PP, CFG: 1, CP: 1, DP: best.DP}
	log.Info("--plan auto chose the workers' mesh", "goal", goal, "devices", cfg.NProc, "mesh", mesh.String(),
		"predicted_first_sample_s", best.FirstSampleMS/1000, "predicted_samples_per_s", best.ThroughputPerS,
		"workload", "the model's native job")
	return mesh, nil
}
