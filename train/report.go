package train

import (
	"fmt"
	"io"
	"math"
	"time"
)

// Report is what `vdpp train --json FILE` writes (rank 0): the run's step rate and where
// each rank's time went.
type Report struct {
	Phase          string      `json:"phase"`
	Ranks          int         `json:"ranks"`
	GOMAXPROCS     int         `json:"gomaxprocs"`
	Batch          int         `json:"batch"`
	MicroBatch     int         `json:"micro_batch"`
	FromStep       int         `json:"from_step"`
	Step           int         `json:"step"`
	WallS          float64     `json:"wall_s"`
	SteadyS        float64     `json:"steady_s"`
	StepsPerS      float64     `json:"steps_per_s"`
	ClipsPerS      float64     `json:"clips_per_s"`
	FirstLoss      float64     `json:"first_loss"`
	LastLoss       float64     `json:"last_loss"`
	FirstHeldOut   *float64    `json:"first_heldout_loss,omitempty"`
	LastHeldOut    *float64    `json:"last_heldout_loss,omitempty"`
	Times          []RankTimes `json:"per_rank"`
	CPUSecondsStep float64     `json:"cpu_s_per_step"` // every rank's CPU time over the steps, per step
}

// NewReport is the Report of a run's result under options o, its processes running with
// gomaxprocs threads.
func NewReport(res Result, o Options, gomaxprocs int) Report {
	r := Report{Phase: res.Phase, Ranks: res.Ranks, GOMAXPROCS: gomaxprocs, Batch: o.Batch, MicroBatch: max(o.MicroBatch, 1),
		FromStep: res.FromStep, Step: res.Step, WallS: res.Wall.Seconds(), SteadyS: res.Steady.Seconds(),
		StepsPerS: res.StepsPerSecond(), FirstLoss: res.FirstLoss, LastLoss: res.LastLoss, Times: res.Times}
	r.ClipsPerS = r.StepsPerS * float64(o.Batch)
	if !math.IsNaN(res.FirstHeldOut) {
		a, b := res.FirstHeldOut, res.LastHeldOut
		r.FirstHeldOut, r.LastHeldOut = &a, &b
	}
	if n := res.Step - res.FromStep; n > 0 {
		for _, t := range res.Times {
			r.CPUSecondsStep += t.CPU / float64(n)
		}
	}
	return r
}

// WriteSummary writes what a run under o did, as `vdpp train` prints it: the steps and the
// losses (or that there was nothing to train), the held-out loss, the step rate and, for a
// data-parallel run, where each rank's time went.
func WriteSummary(w io.Writer, res Result, o Options) {
	if res.Step == res.FromStep {
		// No step ran, so there is no loss to report (e.g. --steps 0 to seed a run folder).
		fmt.Fprintf(w, "%s at step %d, nothing to train; checkpoint %s\n", res.Phase, res.Step, StatePath(o.Dir, o.Phase))
		return
	}
	fmt.Fprintf(w, "trained %s steps %d -> %d in %s (loss %.5f -> %.5f); checkpoint %s\n",
		res.Phase, res.FromStep, res.Step, res.Wall.Round(time.Second), res.FirstLoss, res.LastLoss, StatePath(o.Dir, o.Phase))
	if !math.IsNaN(res.FirstHeldOut) {
		fmt.Fprintf(w, "held-out loss %.5f -> %.5f (%d clips)\n", res.FirstHeldOut, res.LastHeldOut, o.HeldOut)
	}
	if sps := res.StepsPerSecond(); sps > 0 {
		fmt.Fprintf(w, "%d process(es): %.3f steps/s, %.2f clips/s (steady, after the first step)\n", res.Ranks, sps, sps*float64(o.Batch))
	}
	if len(res.Times) < 2 {
		return
	}
	fmt.Fprintf(w, "%-5s %10s %10s %10s %12s %10s %10s\n", "rank", "compute_s", "data_s", "wait_s", "allreduce_s", "apply_s", "cpu_s")
	for _, t := range res.Times {
		fmt.Fprintf(w, "%-5d %10.2f %10.2f %10.2f %12.2f %10.2f %10.2f\n", t.Rank, t.Compute, t.Data, t.Wait, t.AllReduce, t.Apply, t.CPU)
	}
}
