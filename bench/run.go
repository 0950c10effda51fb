package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// LaunchFunc starts nproc local workers running `vdpp <args...>` and waits for all of them.
type LaunchFunc func(ctx context.Context, nproc int, args []string) error

// Runner runs `vdpp bench`: the K-rank pipeline as processes through the launcher and, in
// the same run, the one-rank baseline in this process.
type Runner struct {
	// Launch starts the workers; tests swap it. The default re-executes this binary
	// through comm.Launch.
	Launch LaunchFunc
	Log    *slog.Logger
}

// DefaultLaunch runs `<this executable> args...` as nproc ranks through comm.Launch, with
// worker output on stderr.
func DefaultLaunch(ctx context.Context, nproc int, args []string) error {
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: nproc, NNodes: 1, Command: args, Stdout: os.Stderr, Stderr: os.Stderr})
}

// Run executes the benchmark and returns its report. It writes the JSON, trace and SVG
// outputs named in o; the caller prints the Markdown table.
func (r *Runner) Run(ctx context.Context, o Options) (Report, error) {
	if err := o.Check(); err != nil {
		return Report{}, err
	}
	o, err := o.Resolve()
	if err != nil {
		return Report{}, err
	}
	switch o.Plan {
	case "":
	case "auto":
		if o.PP+o.CFG+o.CP+o.DP > 0 {
			return Report{}, badOptions("--plan auto chooses --pp/--cfg/--cp/--dp itself; give only --nproc")
		}
		auto, best, err := AutoMesh(ctx, o, r.Launch)
		if err != nil {
			return Report{}, err
		}
		if r.Log != nil {
			r.Log.Info("planner's choice", "mesh", best.Mesh.String(), "goal", o.Goal,
				"predicted_first_sample_ms", best.FirstSampleMS, "predicted_throughput", best.ThroughputPerS)
		}
		o = auto
	default:
		return Report{}, badOptions("--plan %q: only \"auto\" is known", o.Plan)
	}
	o, err = o.ResolveMesh()
	if err != nil {
		return Report{}, err
	}
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	launch := r.Launch
	if launch == nil {
		launch = DefaultLaunch
	}
	wallStart := time.Now()
	dir, err := os.MkdirTemp("", "vdpp-bench-")
	if err != nil {
		return Report{}, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	o.RunDir = dir

	m, err := o.ResolveModel()
	if err != nil {
		return Report{}, err
	}
	rule, err := o.CacheRule(m)
	if err != nil {
		return Report{}, err
	}
	plan, err := o.StagePlan(m, o.PP)
	if err != nil {
		return Report{}, err
	}
	log.Info("mesh", "pp", o.PP, "cfg", o.CFG, "cp", o.CP, "dp", o.DP, "processes", o.NProc, "guided", o.Guided(), "plan", pipeline.FormatPlan(plan), "cache", rule.String())
	run, err := launchMesh(ctx, o, launch, dir)
	if err != nil {
		return Report{}, err
	}
	var plain *meshRun
	if rule.On() {
		log.Info("the same mesh without the cache", "samples", o.NumSamples)
		uncached := o
		uncached.Cache = cacheflag.Default()
		uncached.RunDir = filepath.Join(dir, "uncached")
		if err := os.Mkdir(uncached.RunDir, 0o755); err != nil {
			return Report{}, fmt.Errorf("bench: %w", err)
		}
		r, err := launchMesh(ctx, uncached, launch, uncached.RunDir)
		if err != nil {
			return Report{}, fmt.Errorf("bench: uncached run: %w", err)
		}
		plain = &r
	}
	return report(ctx, o, run, plain, wallStart, log)
}

// meshRun is what the ranks of one run of the mesh reported: every rank's result and the
// recording ranks' final latents by sample.
type meshRun struct {
	results []rankResult
	finals  map[int64]*tensor.Dense
}

// launchMesh launches o's mesh as processes that write their results under dir, and reads
// them back.
func launchMesh(ctx context.Context, o Options, launch LaunchFunc, dir string) (meshRun, error) {
	o.RunDir = dir
	if err := launch(ctx, o.NProc, append([]string{"worker", "bench"}, o.WorkerArgs()...)); err != nil {
		return meshRun{}, fmt.Errorf("bench: pipeline run: %w", err)
	}
	results, err := readRankResults(dir, o.NProc)
	if err != nil {
		return meshRun{}, err
	}
	run := meshRun{results: results, finals: map[int64]*tensor.Dense{}}
	for _, res := range results {
		if res.FinalFile == "" {
			continue
		}
		if err := readFinals(filepath.Join(dir, res.FinalFile), res.FinalShape, res.FinalIDs, run.finals); err != nil {
			return meshRun{}, err
		}
	}
	return run, nil
}

// timing is the run's completion timing over the recording ranks.
func (run meshRun) timing(o Options) (Timing, error) {
	completionByID := map[int64]int64{}
	var perReplica []map[int64]int64
	for _, res := range run.results {
		if !res.Records {
			continue
		}
		for s, t := range res.Completions {
			completionByID[s] = t
		}
		perReplica = append(perReplica, res.Completions)
	}
	if len(run.finals) != o.NumSamples || len(completionByID) != o.NumSamples {
		return Timing{}, fmt.Errorf("bench: the recording ranks reported %d of %d samples", len(run.finals), o.NumSamples)
	}
	timing, err := ComputeTiming(run.results[0].StartNS, sortedCompletions(completionByID), o.WarmupSamples)
	if err != nil {
		return Timing{}, err
	}
	if timing.SteadySampleMS, err = SteadyPerSampleMS(perReplica, o.MicroBatch, o.WarmupSamples); err != nil {
		return Timing{}, err
	}
	return timing, nil
}

// report assembles the benchmark's report from every rank's result and the final latents
// of the recording ranks, runs the one-rank baseline in this process (unless
// o.NoBaseline), adds the uncached run's (plain, with --cache) and writes the outputs
// named in o.
func report(ctx context.Context, o Options, run meshRun, plain *meshRun, wallStart time.Time, log *slog.Logger) (Report, error) {
	results, finalsByID := run.results, run.finals
	timing, err := run.timing(o)
	if err != nil {
		return Report{}, err
	}

	rep := Report{
		Model: o.Model, Command: "vdpp bench " + strings.Join(slices.DeleteFunc(o.WorkerArgs(), func(a string) bool { return strings.HasPrefix(a, "--run-dir=") }), " "), Host: CurrentHost(),
		NProc: o.NProc, PP: o.PP, CFG: o.CFG, CP: o.CP, DP: o.DP,
		TotalSteps: o.TotalSteps, NumSamples: o.NumSamples, WarmupSamples: o.WarmupSamples,
		MicroBatch: o.MicroBatch, LatentShape: append([]int{1}, o.LatentShape()...), StepMS: o.StepMS,
	}
	var events []Event
	for _, res := range results {
		rep.StageSteps = append(rep.StageSteps, res.Stage)
		events = append(events, res.Events...)
	}
	rep.SetTiming(timing)
	rep.PerRank = steadyRankStats(events, o.NProc, int64(o.WarmupSamples))
	for _, res := range results {
		if res.Rank >= 0 && res.Rank < len(rep.PerRank) {
			rep.PerRank[res.Rank].WeightBytes = res.WeightBytes
			rep.PerRank[res.Rank].Weights = res.Weights
		}
	}

	if !o.NoBaseline {
		log.Info("baseline: one rank, every step", "samples", o.NumSamples, "guided", o.Guided())
		bstart, bcomp, bfinals, err := runBaseline(ctx, o)
		if err != nil {
			return Report{}, fmt.Errorf("bench: baseline: %w", err)
		}
		bt, err := ComputeTiming(bstart, sortedCompletions(bcomp), o.WarmupSamples)
		if err != nil {
			return Report{}, fmt.Errorf("bench: baseline: %w", err)
		}
		if bt.SteadySampleMS, err = SteadyPerSampleMS([]map[int64]int64{bcomp}, o.MicroBatch, o.WarmupSamples); err != nil {
			return Report{}, fmt.Errorf("bench: baseline: %w", err)
		}
		rep.SetBaselineTiming(bt)
		rep.ComputeSpeedup()
		equal, maxRel := true, 0.0
		for s, f := range bfinals {
			equal = equal && tensor.BitEqual(finalsByID[int64(s)], f)
			maxRel = max(maxRel, tensor.RelL2(finalsByID[int64(s)], f))
		}
		rep.EqualToBaseline = &equal
		rep.MaxRelL2VsBaseline = &maxRel
	}
	if plain != nil {
		if err := rep.addUncached(o, run, *plain); err != nil {
			return Report{}, err
		}
	}
	rep.WallMS = float64(time.Since(wallStart).Microseconds()) / 1e3
	return rep, writeOutputs(o, rep, events)
}

// addUncached puts the cached run's records per sample and the uncached run's timing into
// rep: the speedups, and how far the cached latents are from the uncached ones.
func (rep *Report) addUncached(o Options, cached, plain meshRun) error {
	rule, err := o.Cache.Rule()
	if err != nil {
		return err
	}
	caches := map[int64]pipeline.CacheSummary{}
	for _, res := range cached.results {
		for s, c := range res.Caches {
			caches[s] = c
		}
	}
	if len(caches) != o.NumSamples {
		return fmt.Errorf("bench: the recording ranks reported the cache records of %d of %d samples", len(caches), o.NumSamples)
	}
	rep.Cache = rule.String()
	for _, s := range sortedIDs(caches) {
		c := caches[s]
		rep.CacheSamples = append(rep.CacheSamples, SampleCache{Sample: s, CacheSummary: c})
		rep.ComputedCalls += c.ComputedCalls
		rep.TotalCalls += c.TotalCalls
	}
	t, err := plain.timing(o)
	if err != nil {
		return fmt.Errorf("bench: uncached run: %w", err)
	}
	rep.UncachedFirstSampleMS, rep.UncachedSteadySampleMS, rep.UncachedThroughputSamplesPerS = t.FirstSampleMS, t.SteadySampleMS, t.ThroughputSamplesPerS
	if rep.SteadySampleMS > 0 {
		rep.CacheSpeedup = t.SteadySampleMS / rep.SteadySampleMS
	}
	if rep.FirstSampleMS > 0 {
		rep.CacheFirstSampleSpeedup = t.FirstSampleMS / rep.FirstSampleMS
	}
	maxRel := 0.0
	for s, f := range plain.finals {
		maxRel = max(maxRel, tensor.RelL2(cached.finals[s], f))
	}
	rep.MaxRelL2VsUncached = &maxRel
	line := pipeline.CacheOutcome{Steps: o.TotalSteps, DenoiseMS: rep.SteadySampleMS * float64(o.NumSamples),
		UncachedMS: t.SteadySampleMS * float64(o.NumSamples)}
	for _, s := range rep.CacheSamples {
		line.Samples = append(line.Samples, s.CacheSummary)
	}
	rep.CacheLine = line.Line()
	return nil
}

// steadyRankStats accounts each rank over its own steady window: from the start of its first
// computation on a measured (post-warm-up) sample to the end of its last computation. A
// shared window would charge the first stages for the drain and the last for the fill.
func steadyRankStats(events []Event, nranks int, warmup int64) []RankStats {
	out := make([]RankStats, nranks)
	for r := range out {
		var ws, we int64
		for _, e := range events {
			if e.Rank != r || e.Kind != KindCompute {
				continue
			}
			if e.Sample >= warmup && (ws == 0 || e.Start < ws) {
				ws = e.Start
			}
			we = max(we, e.End)
		}
		out[r] = RankStats{Rank: r}
		if ws > 0 && we > ws {
			out[r] = RankAccounting(events, nranks, ws, we)[r]
		}
	}
	return out
}

// runBaseline runs the same workload on one stage in this process.
func runBaseline(ctx context.Context, o Options) (int64, map[int64]int64, []*tensor.Dense, error) {
	p, err := newParts(o, 1, 0)
	if err != nil {
		return 0, nil, nil, err
	}
	if c, ok := p.stepper.Model.(interface{ Close() error }); ok {
		defer c.Close()
	}
	start := time.Now().UnixNano()
	err = pipeline.Run(ctx, pipeline.Config{
		Plan: p.plan, TotalSteps: o.TotalSteps, NumSamples: o.NumSamples, MicroBatch: o.MicroBatch,
		Stepper: p.stepper, Workload: p.finisher,
	})
	if err != nil {
		return 0, nil, nil, err
	}
	comp, finalsByID := p.workload.Results()
	finals := make([]*tensor.Dense, o.NumSamples)
	for s := range finals {
		finals[s] = finalsByID[int64(s)]
	}
	return start, comp, finals, nil
}

func readRankResults(dir string, n int) ([]rankResult, error) {
	out := make([]rankResult, n)
	for r := range out {
		path := filepath.Join(dir, fmt.Sprintf("rank-%d.json", r))
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("bench: rank %d left no result: %w", r, err)
		}
		if err := json.Unmarshal(b, &out[r]); err != nil {
			return nil, fmt.Errorf("bench: rank %d result %s: %w", r, path, err)
		}
	}
	return out, nil
}

func writeOutputs(o Options, rep Report, events []Event) error {
	write := func(path string, f func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		if err := atomicfile.Write(path, atomicfile.Options{}, f); err != nil {
			return fmt.Errorf("bench: %s: %w", path, err)
		}
		return nil
	}
	if err := write(o.JSON, func(w io.Writer) error { return WriteJSON(w, rep) }); err != nil {
		return err
	}
	if err := write(o.Trace, func(w io.Writer) error {
		return WriteTrace(w, events, TraceMeta{Title: "vdpp bench " + o.Model, StageSteps: rep.StageSteps})
	}); err != nil {
		return err
	}
	return write(o.SVG, func(w io.Writer) error { return WriteSVG(w, events, rep.StageSteps, SVGTitle(rep)) })
}
