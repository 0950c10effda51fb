package main

import (
	"context"
	"log/slog"

	"github.com/vdpp/vdpp/bench"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/serve"
)

// autoServed reports whether `vdpp serve --plan auto` may choose mesh m: pp x dp only, as a
// cfg pair refuses unguided jobs and a cp unit short or windowed ones, which the server's
// clients may send; --cfg and --cp are the operator's explicit choice.
func autoServed(m plan.Mesh) bool { return m.CFG == 1 && m.CP == 1 }

// serveAutoMesh is `vdpp serve --plan auto`: the planner's best pp x dp mesh of cfg.NProc
// devices for the served model's native job (its default frames, size, steps and
// guidance), chosen as `vdpp generate --plan auto` and `vdpp bench --plan auto` choose
// (bench.AutoMeshWhere: the model's step measured here, the hand-off and collectives
// between real processes).
func serveAutoMesh(ctx context.Context, modelName string, cfg serve.Config, goal string, log *slog.Logger) (comm.Mesh, error) {
	b := bench.DefaultOptions()
	b.Model, b.Backend, b.NProc, b.Goal = modelName, cfg.Spec.Backend, cfg.NProc, goal
	b.StepMS, b.Cost = cfg.Spec.StepMS, cfg.Spec.Cost
	b, err := b.Resolve()
	if err != nil {
		return comm.Mesh{}, err
	}
	m, err := b.ResolveModel()
	if err != nil {
		return comm.Mesh{}, err
	}
	desc, err := m.Describe()
	if err != nil {
		return comm.Mesh{}, err
	}
	// A job leaves its guidance at the model's default unless it sets it.
	def := desc.Defaults
	b.MinGuidance, b.MaxGuidance, b.GuidanceScale = max(def.MinGuidance, 1), max(def.MaxGuidance, 1), max(def.GuidanceScale, 1)
	auto, best, err := bench.AutoMeshWhere(ctx, b, nil, autoServed)
	if err != nil {
		return comm.Mesh{}, err
	}
	mesh := comm.Mesh{PP: auto.PP, CFG: 1, CP: 1, DP: auto.DP}
	log.Info("--plan auto chose the workers' mesh", "goal", goal, "devices", cfg.NProc, "mesh", mesh.String(),
		"predicted_first_sample_s", best.FirstSampleMS/1000, "predicted_samples_per_s", best.ThroughputPerS,
		"workload", "the model's native job")
	return mesh, nil
}
