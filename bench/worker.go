package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/model"
	_ "github.com/vdpp/vdpp/model/families" // every shipped family answers --model
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// parts are what one rank (or the baseline) needs to run the benchmark workload.
type parts struct {
	plan     []pipeline.Range
	stepper  *pipeline.Stepper
	workload *NoiseWorkload
	// finisher is the pipeline's workload: workload, or a DecodeWorkload around it on a
	// rank that decodes.
	finisher pipeline.Workload
	weights  int64
	// components is the weight memory per loaded component (Wan: the experts held).
	components map[string]int64
}

// newParts loads stage stage of a plan of stages stages: the family's plan (a stage
// boundary at every denoiser switch, so a two-expert model's stage loads one expert).
func newParts(o Options, stages, stage int) (*parts, error) {
	m, err := o.ResolveModel()
	if err != nil {
		return nil, err
	}
	plan, err := o.StagePlan(m, stages)
	if err != nil {
		return nil, err
	}
	rule, err := o.CacheRule(m)
	if err != nil {
		return nil, err
	}
	decodes := o.DecodeRanks > 0 && stage >= stages-max(1, min(o.DecodeRanks, stages))
	s, st, err := openDenoiserSteps(o, family.Roles{Denoise: true, Decode: decodes, Steps: plan[stage], TotalSteps: o.TotalSteps, Schedule: o.Schedule})
	if err != nil {
		return nil, err
	}
	sc := st.Sched
	w := &NoiseWorkload{Seed: o.Seed, Shape: o.LatentShape(), InitNoiseSigma: sc.InitSigma(), Scheduler: sc, Guidance: o.GuidanceWeights(o.LatentFrames), Cache: rule}
	if rule.On() && stage == stages-1 {
		// The last stage keeps each sample's cache records as its last step ends (the
		// decode may finish the sample on another rank, away from the item).
		st.Observe = func(it *pipeline.Item, k int, _ *tensor.Dense, _ []float32) {
			if k == o.TotalSteps-1 {
				w.cached(it)
			}
		}
	}
	if rc, ok := s.(family.RandomConditioner); ok {
		// The benchmark measures the denoiser, not the conditioner: random conditioning of
		// the right shapes.
		shape := o.LatentShape()
		w.Cond = func(r *rand.Rand) model.Conditioning { return rc.RandomConditioning(r, shape) }
	}
	var finisher pipeline.Workload = w
	if decodes {
		if finisher, err = newDecodeWorkload(o, m, s, w); err != nil {
			return nil, err
		}
	}
	var weights int64
	for _, b := range s.WeightBytes() {
		weights += b
	}
	return &parts{
		plan:       plan,
		stepper:    st,
		workload:   w,
		finisher:   finisher,
		weights:    weights,
		components: s.WeightBytes(),
	}, nil
}

// openDenoiser loads the denoising role of --model through its family and returns the
// sampler and a step runner with the family's scheduler for --steps.
func openDenoiser(o Options) (family.Sampler, *pipeline.Stepper, error) {
	return openDenoiserSteps(o, family.Roles{Denoise: true})
}

// openDenoiserSteps is openDenoiser for roles (the denoisers of roles.Steps only).
func openDenoiserSteps(o Options, roles family.Roles) (family.Sampler, *pipeline.Stepper, error) {
	m, err := o.ResolveModel()
	if err != nil {
		return nil, nil, err
	}
	s, err := m.Open(family.Options{Backend: o.Backend, Roles: roles, Sim: o.simConfig(), Weights: o.Weights})
	if err != nil {
		return nil, nil, err
	}
	sc, err := s.Scheduler(o.schedParams())
	if err == nil {
		var st *pipeline.Stepper
		if st, err = s.Stepper(sc); err == nil {
			return s, st, nil
		}
	}
	return nil, nil, errors.Join(err, s.Close())
}

// rankResult is what each worker writes to RunDir/rank-N.json (or, in a launched world,
// sends to rank 0).
type rankResult struct {
	Rank        int              `json:"rank"`
	Stage       [2]int           `json:"stage"`
	StartNS     int64            `json:"start_ns"`
	EndNS       int64            `json:"end_ns"`
	WeightBytes int64            `json:"weight_bytes"`
	Weights     map[string]int64 `json:"weights,omitempty"`
	Events      []Event          `json:"events"`
	// Records marks a rank that saw samples finish (the last stage of its replica).
	Records     bool            `json:"records,omitempty"`
	Completions map[int64]int64 `json:"completions,omitempty"`
	FinalShape  []int           `json:"final_shape,omitempty"`
	FinalFile   string          `json:"final_file,omitempty"`
	FinalIDs    []int64         `json:"final_ids,omitempty"` // samples in FinalFile, in order
	// Caches are the recorded samples' step cache records (with --cache).
	Caches map[int64]pipeline.CacheSummary `json:"caches,omitempty"`
}

// recorder collects pipeline events as bench events for one rank.
type recorder struct {
	rank   int
	mu     sync.Mutex
	events []Event
}

func (r *recorder) on(e pipeline.Event) {
	ev := Event{Rank: r.rank, Kind: e.Kind, Sample: e.Group, Step0: e.Step0, Step1: e.Step1,
		Start: e.Start.UnixNano(), End: e.End.UnixNano()}
	if len(e.Samples) > 0 {
		ev.Sample = e.Samples[0]
		if len(e.Samples) > 1 {
			ev.Samples = e.Samples
		}
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// RunWorker is the body of `vdpp worker bench`: one pipeline stage of the benchmark, as one
// rank of a world launched by `vdpp bench` on this node. It writes its timeline (and, on
// the recording ranks, the final latents) under o.RunDir.
func RunWorker(ctx context.Context, o Options, env comm.Env, log *slog.Logger) (err error) {
	o, err = o.Resolve()
	if err != nil {
		return err
	}
	o, err = o.ResolveMesh()
	if err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if o.RunDir == "" {
		return fmt.Errorf("bench: worker needs --run-dir")
	}
	tr, err := dial(ctx, o, env, log)
	if err != nil {
		return err
	}
	// A rank that fails ends the job on every rank at once, naming itself.
	defer func() { comm.CloseWith(tr, err) }()
	res, finals, err := runStage(ctx, o, env, tr, log)
	if err != nil {
		return err
	}
	if res.Records {
		res.FinalFile = fmt.Sprintf("final-%d.f32", env.Rank)
		if err := writeFinals(filepath.Join(o.RunDir, res.FinalFile), finals, res.FinalIDs); err != nil {
			return fmt.Errorf("rank %d: %w", env.Rank, err)
		}
	}
	return writeJSONFile(filepath.Join(o.RunDir, fmt.Sprintf("rank-%d.json", env.Rank)), res)
}

// dial joins env's world with o's timeouts.
func dial(ctx context.Context, o Options, env comm.Env, log *slog.Logger) (*comm.TCPTransport, error) {
	tr, err := comm.DialTCP(ctx, env, comm.Options{RecvTimeout: o.Timeout, ConnectTimeout: o.Timeout, HeartbeatTimeout: o.HeartbeatTimeout, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	return tr, nil
}

// runStage runs env.Rank's part of the mesh over tr: its result (timeline, weights) and,
// on a recording rank (FinalIDs set), the final latents by sample.
func runStage(ctx context.Context, o Options, env comm.Env, tr comm.Transport, log *slog.Logger) (rankResult, map[int64]*tensor.Dense, error) {
	fail := func(err error) (rankResult, map[int64]*tensor.Dense, error) {
		return rankResult{}, nil, fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	if env.WorldSize != o.NProc {
		return fail(fmt.Errorf("bench: world size %d but the mesh needs %d processes", env.WorldSize, o.NProc))
	}
	mesh, err := comm.NewMesh(o.PP, o.CFG, o.CP, o.DP, env.WorldSize)
	if err != nil {
		return fail(err)
	}
	place, err := pipeline.Place(mesh, tr)
	if err != nil {
		return fail(err)
	}
	p, err := newParts(o, o.PP, place.Stage)
	if err != nil {
		return fail(err)
	}
	if err := place.Configure(p.stepper, o.LatentFrames); err != nil {
		return fail(err)
	}
	if env.Rank == 0 {
		log.Info("mesh", "mesh", mesh.String(), "plan", pipeline.FormatPlan(p.plan))
	}
	rec := &recorder{rank: env.Rank}
	if d, ok := p.finisher.(*DecodeWorkload); ok {
		d.OnEvent = rec.on
	}
	rng := p.plan[place.Stage]
	res := rankResult{Rank: env.Rank, Stage: [2]int{rng.Start, rng.End}, WeightBytes: p.weights, Weights: p.components}
	if err := startBarrier(ctx, tr); err != nil {
		return fail(err)
	}
	res.StartNS = time.Now().UnixNano()
	err = pipeline.Run(ctx, pipeline.Config{
		Plan: p.plan, Stage: place.Stage, PrevRank: place.PrevRank, NextRank: place.NextRank,
		TotalSteps: o.TotalSteps, NumSamples: o.NumSamples, MicroBatch: o.MicroBatch,
		Replica: place.Replica, Replicas: place.Replicas,
		Transport: tr, Stepper: p.stepper, Workload: p.finisher, OnEvent: rec.on, Log: log,
		Spread: place.DecodeSpread(o.DecodeRanks),
	})
	if err != nil {
		return fail(err)
	}
	res.EndNS = time.Now().UnixNano()
	res.Events = rec.events
	if !place.Records {
		return res, nil, nil
	}
	comp, finals := p.workload.Results()
	res.Records = true
	res.Completions = comp
	res.FinalShape = o.LatentShape()
	res.FinalIDs = sortedIDs(finals)
	res.Caches = p.workload.Caches()
	return res, finals, nil
}

// startBarrier holds every rank until all of them are ready, so the ranks start their runs
// (and rank 0 its clock, which first-sample latency is measured from) together. Without it
// the first collective of a cfg or cp group waits for the last process to finish starting,
// and that start-up skew (milliseconds on a loaded host) would count as latency.
func startBarrier(ctx context.Context, tr comm.Transport) error {
	ranks := make([]int, tr.Size())
	for i := range ranks {
		ranks[i] = i
	}
	g, err := comm.NewNamedGroup(tr, "bench-start", ranks)
	if err != nil {
		return fmt.Errorf("bench: start barrier: %w", err)
	}
	if err := comm.Barrier(ctx, g); err != nil {
		return fmt.Errorf("bench: start barrier: %w", err)
	}
	return nil
}

func sortedIDs[V any](m map[int64]V) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, atomicfile.Options{})
}

// writeFinals writes the final latents of samples ids as little-endian float32, in order.
func writeFinals(path string, finals map[int64]*tensor.Dense, ids []int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var buf []byte
	for _, s := range ids {
		t, ok := finals[s]
		if !ok {
			return fmt.Errorf("bench: no final latent for sample %d", s)
		}
		buf = buf[:0]
		for _, v := range t.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	return f.Close()
}

// readFinals reads what writeFinals wrote into finals, by sample id.
func readFinals(path string, shape []int, ids []int64, finals map[int64]*tensor.Dense) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	per := tensor.NumElements(shape)
	buf := make([]byte, 4*per)
	for _, s := range ids {
		if _, err := io.ReadFull(f, buf); err != nil {
			return fmt.Errorf("bench: %s: sample %d: %w", path, s, err)
		}
		t := tensor.New(shape...)
		for i := range t.Data {
			t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		finals[s] = t
	}
	return nil
}

func sortedCompletions(m map[int64]int64) []int64 {
	ids := sortedIDs(m)
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}
