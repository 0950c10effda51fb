package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
)

// DefaultLaunch runs `<this executable> args...` as nproc ranks through comm.Launch, with
// their output on stderr.
func DefaultLaunch(ctx context.Context, nproc int, args []string) error {
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: nproc, NNodes: 1, Command: args, Stdout: os.Stderr, Stderr: os.Stderr})
}

// AutoRequest is what `--plan auto` (generate, bench, serve) plans: a model's workload on
// some devices, for a goal.
type AutoRequest struct {
	// Model is the resolved --model; Backend and Sim open its denoiser (Sim configures a
	// simulator); Seed draws the conditioning of the measured step.
	Model   family.Resolved
	Backend string
	Sim     model.Config
	Seed    int64
	// Weights are the load options of the model's weights (--weights-dtype and the files).
	Weights family.WeightOptions
	// Workload is the planned workload (Steps, Frames, Height, Width, Channels: the latent's).
	Workload Workload
	// Devices is the number of processes to plan for (0: 7).
	Devices int
	Goal    Goal
	// Launch starts the processes the collectives are measured between (nil: DefaultLaunch).
	Launch LaunchFunc
	// Keep, when set, limits the choice to the meshes it accepts (vdpp serve's workers run
	// pp x dp only).
	Keep func(Mesh) bool
}

// AutoMesh asks the planner for the best mesh of r.Devices devices for r's workload and
// goal: a paced simulator's step (model.Paced) costs its Sim.StepMS, other models are
// measured here; the all-gathers over 2..devices processes and the hand-off are measured
// between real processes started by r.Launch, as `vdpp plan` does. It returns the chosen
// prediction (its mesh: PP, CFG, CP, DP).
func AutoMesh(ctx context.Context, r AutoRequest) (Prediction, error) {
	launch := r.Launch
	if launch == nil {
		launch = DefaultLaunch
	}
	devices := r.Devices
	if devices == 0 {
		devices = 7
	}
	w := r.Workload
	shape := []int{w.Frames, w.Channels, w.Height, w.Width}
	cal := &Calibrator{}
	latent := int64(4 * max(1, w.MicroBatch) * w.Frames * w.Channels * w.Height * w.Width)
	var costs Costs
	o := family.Options{Backend: r.Backend, Roles: family.Roles{Denoise: true}, Sim: r.Sim, Weights: r.Weights}
	s, err := r.Model.Open(o)
	if err != nil {
		return Prediction{}, err
	}
	defer s.Close()
	sc, err := s.Scheduler(family.Params{Steps: w.Steps}) // the step costs do not depend on the sampler
	if err != nil {
		return Prediction{}, err
	}
	st, err := s.Stepper(sc)
	if err != nil {
		return Prediction{}, err
	}
	if _, paced := st.ModelAt(0).(model.Paced); paced {
		// A simulator whose step costs its --step-ms budget: nothing to measure but the link.
		link, _, err := cal.MeasureLink(ctx, latent)
		if err != nil {
			return Prediction{}, err
		}
		costs = SyntheticCosts(r.Sim.StepMS, w.Frames, link)
	} else {
		weights, err := FamilyWeights(r.Model, family.Options{Backend: r.Backend, Weights: r.Weights}, w.Steps, s)
		if err != nil {
			return Prediction{}, err
		}
		// A conditioned model's step needs conditioning rows (as `vdpp plan` gives them).
		if rc, ok := s.(family.RandomConditioner); ok {
			cal.Cond = rc.RandomConditioning(rand.New(rand.NewPCG(uint64(r.Seed), 0)), shape)
		}
		c, err := cal.Calibrate(ctx, modelName(r.Model), st.ModelAt(0), shape, weights)
		if err != nil {
			return Prediction{}, err
		}
		costs = c.Costs
	}
	if devices >= 2 {
		// The same path as `vdpp plan`: all-gathers and the hand-off between real processes.
		pc, err := (&ProcessCalibrator{Launch: launch, Gap: StepGap(w, costs.Step, devices)}).Measure(ctx, devices, latent)
		if err != nil {
			return Prediction{}, err
		}
		costs = pc.Apply(costs)
	}
	res, err := Plan(Request{Workload: w, Devices: devices, Costs: costs, Goal: r.Goal})
	if err != nil {
		return Prediction{}, err
	}
	for _, p := range res.Configs {
		if r.Keep == nil || r.Keep(p.Mesh) {
			return p, nil
		}
	}
	return Prediction{}, fmt.Errorf("plan: --plan auto: no feasible mesh for %d devices", devices)
}

// modelName names a resolved model in a calibration: its folder, else its family.
func modelName(m family.Resolved) string {
	if m.Dir != "" {
		return m.Dir
	}
	if m.Family != nil {
		return m.Family.Name()
	}
	return ""
}
