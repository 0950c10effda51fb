package generate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/internal/progress"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// RunRank runs one rank of a generation: the whole job when env is a single process, or
// rank env.Rank of a world started by `vdpp generate` on this node, its place in the pp x
// cfg x cp x dp mesh (a pipeline stage of one replica; a cfg or cp member computes its
// share of every step of its stage). o must already hold resolved defaults (see Resolve).
func RunRank(ctx context.Context, o Options, env comm.Env, log *slog.Logger) error {
	return runRank(ctx, o, env, nil, log)
}

// runRank is RunRank over the transport t of a world already joined (nil: join env's world
// once the model is loaded).
func runRank(ctx context.Context, o Options, env comm.Env, t *comm.TCPTransport, log *slog.Logger) (err error) {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Steps == 0 || o.Out == "" {
		return badOptions("--steps %d --out %q: RunRank needs resolved options (Resolve, PrepareOut)", o.Steps, o.Out)
	}
	o, err = o.ResolveMesh()
	if err != nil {
		return err
	}
	if env.WorldSize != o.NProc {
		return fmt.Errorf("generate: world size %d but the mesh %s needs %d processes", env.WorldSize, o.mesh(), o.NProc)
	}
	mesh, err := comm.NewMesh(o.PP, o.CFG, o.CP, o.DP, env.WorldSize)
	if err != nil {
		return err
	}
	coord := mesh.Coords(env.Rank)
	m, err := family.Resolve(o.Model)
	if err != nil {
		return err
	}
	// Resolve leaves every default set; options built in code may still say "the model's".
	desc, err := m.Describe()
	if err != nil {
		return err
	}
	o = o.withModelDefaults(desc.Defaults, desc.Knobs)
	pr := params(o)
	if pr.Cache, err = m.ResolveCache(pr.Cache, o.Steps); err != nil {
		return flagError(err)
	}
	// A stage boundary at every denoiser switch (Wan 2.2's experts): each stage then loads
	// only the expert its steps use. A static step cache cuts by computed work.
	var latent []int
	if pr.Cache.Static() {
		if latent, err = m.LatentShape(pr); err != nil {
			return err
		}
	}
	plan, err := m.CachedStagePlan(pr.Cache, o.Steps, latent, o.PP, o.StageExtras())
	if err != nil {
		return err
	}
	stage := coord.PP
	// One rank per stage of each replica writes what the stage does: the cfg 0, cp 0
	// member (the others compute the same steps, and on the last stage hold the same bits).
	records := coord.CFG == 0 && coord.CP == 0
	prog := newRankProgress(o.ProgressDir, env.Rank, stage, records)
	defer func() {
		if err != nil {
			prog.phase(progress.Stopped, -1) // an interrupted rank is not "done"
		} else {
			prog.phase(progress.Done, -1)
		}
	}()
	first, last := stage == 0, stage == o.PP-1
	chain := mesh.PPGroup(env.Rank)
	spreadRanks := chain[len(chain)-max(1, o.DecodeRanks):]
	decodes := records && (last || (o.DecodeRanks > 1 && slices.Contains(spreadRanks, env.Rank)))
	roles := family.Roles{Condition: first, Denoise: true, Decode: decodes, Steps: plan[stage], TotalSteps: o.Steps, Schedule: pr.SchedulerChoice}
	t0 := time.Now()
	p, err := m.Open(family.Options{Variant: o.Variant, Weights: o.Weights, Backend: o.Backend, Roles: roles,
		Prompts: o.Prompt != "" && desc.TextDim > 0, Progress: LoadProgress(log), LoRAs: pr.LoRAs})
	if err != nil {
		return err
	}
	defer p.Close()
	loadMS := ms(time.Since(t0))
	var held int64
	for _, n := range p.WeightBytes() {
		held += n
	}
	defer collectorHeadroom(held)()
	prog.phase(progress.Waiting, -1)
	log.Info("loaded", "stage", stage, "steps", plan[stage].String(), "weights", p.WeightBytes(), "ms", int(loadMS))

	var tr comm.Transport
	var store kv
	var barrier func() error
	place := pipeline.PlaceAlone()
	if o.NProc > 1 && t == nil {
		if t, err = dial(ctx, o, env, log); err != nil {
			return err
		}
		// A rank that fails ends the job on every rank at once, naming itself.
		defer func() { comm.CloseWith(t, err) }()
	}
	if t != nil {
		tr, store = t, t.Store()
		if place, err = pipeline.Place(mesh, t); err != nil {
			return fmt.Errorf("rank %d: %w", env.Rank, err)
		}
		// The store lives on rank 0: every rank waits here before closing, so rank 0 serves
		// the last stage's look-ups until the last sample is written; then rank 0 leaves
		// last, once every other rank is through (a rank still waiting for the barrier's
		// release would otherwise find the store gone).
		barrier = func() error {
			bctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			st := t.Store()
			if err := st.Barrier(bctx, "generate/done", o.NProc); err != nil {
				return err
			}
			if env.Rank == 0 {
				_, err := st.Wait(bctx, "generate/left")
				return err
			}
			n, err := st.Add(bctx, "generate/leaving", 1)
			if err == nil && n == int64(o.NProc-1) {
				// The last to leave releases rank 0, which may then close the store before
				// this reply arrives: the set only has to land.
				_ = st.Set(bctx, "generate/left", []byte("1"))
			}
			return err
		}
	} else {
		store = newLocalKV()
	}
	sw := StageWeights{Rank: env.Rank, Steps: [2]int{plan[stage].Start, plan[stage].End}, Components: p.WeightBytes(), Types: family.WeightTypesOf(p), LoadMS: loadMS}
	if kr, ok := p.(family.KernelReporter); ok {
		sw.Kernels = kr.Kernels()
	}
	if err := setJSON(ctx, store, "weights/"+strconv.Itoa(env.Rank), sw); err != nil {
		return err
	}
	if env.Rank == 0 {
		log.Info("stage plan", "mesh", mesh.String(), "plan", pipeline.FormatPlan(plan))
	}
	sc, err := p.Scheduler(pr)
	if err != nil {
		return err
	}
	stepper, err := p.Stepper(sc)
	if err != nil {
		return err
	}
	if err := place.Configure(stepper, p.LatentShape(pr)[0]); err != nil {
		return fmt.Errorf("rank %d: %w", env.Rank, err)
	}
	w := &workload{o: o, p: p, pr: pr, sc: sc, store: store, log: log, prog: prog, ended: map[int64]time.Time{}, caches: map[int64]*pipeline.CacheSummary{},
		unfinished: len(pipeline.ReplicaItems(len(pipeline.Groups(o.NumSamples, max(o.MicroBatch, 1))), place.Replica, max(place.Replicas, 1)))}
	w.provenance = sync.OnceValues(func() (Provenance, error) { return provenance(o, m) })
	if last && pr.Cache.On() {
		if w.reuse, err = reuseFraction(m, pr); err != nil {
			return err
		}
	}
	if last && pr.Cache.On() {
		// The last stage keeps each sample's cache records for its report as its last
		// step ends (the decode may run on other ranks, away from the item).
		stepper.Observe = func(it *pipeline.Item, k int, _ *tensor.Dense, _ []float32) {
			if k == o.Steps-1 && it.Cache != nil {
				w.cached(it)
			}
		}
	}
	var work pipeline.Workload = w
	if last && !records {
		work = noFinish{w} // the recording member of this stage writes the samples
	}
	if first {
		// Every item carries its windows (in latent frames) through the stages.
		w.windows = desc.Windows(pr, p)
		if w.in, err = loadInput(m, o); err != nil {
			return err
		}
	}
	err = pipeline.Run(ctx, pipeline.Config{
		Plan: plan, Stage: stage, PrevRank: place.PrevRank, NextRank: place.NextRank,
		TotalSteps: o.Steps, NumSamples: o.NumSamples, MicroBatch: o.MicroBatch,
		Replica: place.Replica, Replicas: place.Replicas,
		Transport: tr, Stepper: stepper, Workload: work, Log: log, Spread: place.DecodeSpread(o.DecodeRanks),
		OnEvent: func(e pipeline.Event) {
			prog.event(e)
			if e.Kind == "compute" && e.Step1 == o.Steps {
				w.diffused(e.Samples, e.End)
			}
			// Diffusion time runs from a sample's first step (stage 0) to its last.
			if e.Kind == "compute" && e.Step0 == 0 {
				for _, s := range e.Samples {
					_ = setJSON(ctx, store, "start/"+strconv.FormatInt(s, 10), e.Start.UnixNano())
				}
			}
		},
	})
	if err == nil && barrier != nil {
		if err = barrier(); err != nil {
			err = fmt.Errorf("rank %d: final barrier: %w", env.Rank, err)
		}
	}
	return err
}

// noFinish is the workload of a last-stage rank that does not record (a cfg or cp member
// other than the first): it computes its share of the steps and writes nothing.
type noFinish struct{ pipeline.Workload }

// Finish implements pipeline.Workload: nothing to write.
func (noFinish) Finish(context.Context, *pipeline.Item) error { return nil }

// dial joins env's world with o's timeouts.
func dial(ctx context.Context, o Options, env comm.Env, log *slog.Logger) (*comm.TCPTransport, error) {
	return comm.DialTCP(ctx, env, comm.Options{RecvTimeout: o.Timeout, ConnectTimeout: o.Timeout, HeartbeatTimeout: o.HeartbeatTimeout, Logger: log})
}

func params(o Options) family.Params { return cloneParams(o.Params) }

// loadInput reads what the first stage conditions on: the image (and last image), and the
// prompt or prompt embeddings of a text-conditioned model (an image-to-video model's
// prompt is only recorded).
func loadInput(m family.Resolved, o Options) (family.Input, error) {
	var in family.Input
	desc, err := m.Describe()
	if err != nil {
		return in, err
	}
	if o.Image != "" {
		if in.Image, err = video.LoadImage(o.Image); err != nil {
			return in, err
		}
	}
	if o.LastImage != "" {
		if in.LastImage, err = video.LoadImage(o.LastImage); err != nil {
			return in, err
		}
	}
	if desc.TextDim == 0 {
		return in, nil
	}
	if o.Prompt != "" {
		in.Prompt = &family.Prompt{Text: o.Prompt, Negative: o.NegativePrompt}
		return in, nil
	}
	if o.PromptEmbeds == "" {
		return in, nil
	}
	if in.PromptEmbeds, err = LoadEmbeddings(o.PromptEmbeds, "--prompt-embeds", desc); err != nil {
		return in, err
	}
	if o.NegativePromptEmbeds != "" {
		if in.NegativePromptEmbeds, err = LoadEmbeddings(o.NegativePromptEmbeds, "--negative-prompt-embeds", desc); err != nil {
			return in, err
		}
	}
	return in, nil
}

// input names the generation's input file, for messages.
func (o Options) input() string {
	if o.Image != "" {
		return o.Image
	}
	if o.Prompt != "" {
		return "--prompt"
	}
	if o.PromptEmbeds != "" {
		return o.PromptEmbeds
	}
	return o.Image
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func setJSON(ctx context.Context, store kv, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return store.Set(ctx, key, b)
}

func getJSON(ctx context.Context, store kv, key string, v any) error {
	b, err := store.Wait(ctx, key)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// condTiming is what stage 0 records per sample for the last stage's report.
type condTiming struct {
	ConditioningMS float64 `json:"conditioning_ms"`
}

// workload is generation's pipeline.Workload: conditioning on the first stage, decoding and
// writing on the last.
type workload struct {
	o     Options
	p     family.Sampler
	pr    family.Params
	sc    sched.Scheduler
	store kv
	log   *slog.Logger
	prog  *rankProgress
	in    family.Input
	// windows cut a video longer than the model's native length (nil: one window).
	windows *pipeline.Windows

	stages []StageWeights

	// reuse is a reusing call's cost as a fraction of a computing one's (the family's
	// cost model), for the cache line's estimate of the time saved.
	reuse float64
	// provenance is computed once, by the first sample a rank writes (the weights are
	// hashed, or their hashes read back).
	provenance func() (Provenance, error)

	mu sync.Mutex
	// unfinished counts the items this rank still finishes (last stage): when the last one
	// comes no step is left here, and a sampler that can frees its denoiser before decoding.
	unfinished int
	ended      map[int64]time.Time // last stage: when each sample's last step ended
	caches     map[int64]*pipeline.CacheSummary
}

// cached records the step cache of the samples of an item that ran its last step.
func (w *workload) cached(it *pipeline.Item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r, s := range it.Samples {
		sum := pipeline.Summarize(w.pr.Cache, slices.Clone(it.Cache.Log[r]))
		w.caches[s] = &sum
	}
}

// diffused records when samples finished their last step.
func (w *workload) diffused(samples []int64, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range samples {
		w.ended[s] = t
	}
}

// Parts implements pipeline.PartWorkload: the family's decode parts of one sample.
func (w *workload) Parts() int { return family.DecodeParts(w.p, w.pr) }

// FinishPart implements pipeline.PartWorkload: one decode part, on whichever rank it was
// handed to.
func (w *workload) FinishPart(ctx context.Context, s int64, lat *tensor.Dense, part int) (*tensor.Dense, error) {
	w.prog.phase(progress.Decoding, s)
	defer w.prog.phase(progress.Waiting, -1)
	out, err := family.DecodePart(ctx, w.p, lat, w.pr, part)
	if err != nil {
		return nil, fmt.Errorf("generate: sample %d: %w", s, err)
	}
	return out, nil
}

// JoinParts implements pipeline.PartWorkload (last stage): the frames of a sample whose
// parts were decoded over several ranks, written as Finish writes them. Its decode time
// runs from the end of the sample's last step to the join.
func (w *workload) JoinParts(ctx context.Context, s int64, _ *tensor.Dense, parts []*tensor.Dense) error {
	unit, err := family.JoinParts(parts)
	if err != nil {
		return fmt.Errorf("generate: sample %d: %w", s, err)
	}
	w.mu.Lock()
	t0 := w.ended[s]
	w.mu.Unlock()
	if err := w.writeSample(ctx, s, t0, func(add func(int, *tensor.Dense) error) error { return add(0, unit) }); err != nil {
		return fmt.Errorf("generate: sample %d: %w", s, err)
	}
	return nil
}

// Prepare implements pipeline.Workload (first stage): the sampler prepares each sample on
// its own, so its conditioning time is its own.
func (w *workload) Prepare(ctx context.Context, group int64, samples []int64) (*pipeline.Item, error) {
	var it *pipeline.Item
	states := make([]sched.State, len(samples))
	for r, s := range samples {
		t0 := time.Now()
		one, err := w.p.Prepare(ctx, w.in, w.pr, w.sc, []int64{s})
		if err != nil {
			return nil, fmt.Errorf("generate: %s: %w", w.o.input(), err)
		}
		if it == nil {
			it = &pipeline.Item{Group: group, Samples: samples, Guidance: one.Guidance, Windows: w.windows,
				Latent: tensor.New(append([]int{len(samples)}, one.Latent.Shape[1:]...)...), Cache: pipeline.NewItemCache(w.pr.Cache, len(samples))}
		}
		per := one.Latent.Len()
		copy(it.Latent.Data[r*per:(r+1)*per], one.Latent.Data)
		it.Cond = append(it.Cond, one.Cond...)
		states[r] = one.SchedState
		if err := setJSON(ctx, w.store, "cond/"+strconv.FormatInt(s, 10), condTiming{ms(time.Since(t0))}); err != nil {
			return nil, err
		}
	}
	var err error
	if it.SchedState, err = sched.StackRows(states); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	return it, nil
}

// Finish implements pipeline.Workload (last stage): decode and write every sample.
func (w *workload) Finish(ctx context.Context, it *pipeline.Item) error {
	w.mu.Lock()
	w.unfinished--
	release := w.unfinished == 0
	w.mu.Unlock()
	if r, ok := w.p.(family.DenoiserReleaser); ok && release {
		if err := r.ReleaseDenoiser(); err != nil {
			return fmt.Errorf("generate: releasing the denoiser: %w", err)
		}
		w.log.Info("released the denoiser before the last decode")
		// Collect now: the decode then reuses the weights' and the steps' pages instead of
		// growing the heap on top of them until the next collection.
		releaseHeap()
	}
	per := it.Latent.Len() / len(it.Samples)
	shape := it.Latent.Shape[1:]
	for r, s := range it.Samples {
		lat := &tensor.Dense{Shape: shape, Data: it.Latent.Data[r*per : (r+1)*per]}
		if err := w.finishSample(ctx, s, lat); err != nil {
			return fmt.Errorf("generate: sample %d: %w", s, err)
		}
	}
	return nil
}

func (w *workload) finishSample(ctx context.Context, s int64, lat *tensor.Dense) error {
	return w.writeSample(ctx, s, time.Now(), func(add func(first int, unit *tensor.Dense) error) error {
		if cd, ok := w.p.(family.ChunkDecoder); ok {
			return cd.DecodeChunks(ctx, lat, w.pr, add)
		}
		unit, err := w.p.Decode(ctx, lat, w.pr)
		if err != nil {
			return err
		}
		return add(0, unit)
	})
}

// writeSample writes a sample's files and report as decode hands it frames (add streams
// frames first.. of unit to the writers); diffusion ended at t0, and the decode time runs
// from t0 less the time spent writing.
func (w *workload) writeSample(ctx context.Context, s int64, t0 time.Time, decode func(add func(first int, unit *tensor.Dense) error) error) error {
	if w.stages == nil {
		for r := 0; r < w.o.NProc; r++ {
			var sw StageWeights
			if err := getJSON(ctx, w.store, "weights/"+strconv.Itoa(r), &sw); err != nil {
				return err
			}
			w.stages = append(w.stages, sw)
		}
	}
	var ct condTiming
	if err := getJSON(ctx, w.store, "cond/"+strconv.FormatInt(s, 10), &ct); err != nil {
		return err
	}
	var started int64
	if err := getJSON(ctx, w.store, "start/"+strconv.FormatInt(s, 10), &started); err != nil {
		return err
	}
	w.prog.phase(progress.Decoding, s)
	dir := filepath.Join(w.o.Out, fmt.Sprintf("sample-%03d", s))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	prov, err := w.provenance()
	if err != nil {
		return err
	}
	out, err := newSampleWriter(dir, w.pr.NumFrames, w.pr.Width, w.pr.Height, float64(w.pr.FPS), prov.Parameters())
	if err != nil {
		return err
	}
	var writing time.Duration // inside out.add: not decoding
	add := func(first int, unit *tensor.Dense) error {
		tw := time.Now()
		defer func() { writing += time.Since(tw) }()
		return out.add(first, unit)
	}
	err = decode(add)
	decodeMS := ms(time.Since(t0) - writing)
	if err == nil {
		err = out.finish()
	}
	if err != nil {
		out.abort()
		return err
	}
	enc := out.enc
	files := []string{"video.gif", fmt.Sprintf("frames/000.png .. frames/%03d.png", w.pr.NumFrames-1), "video.mp4"}
	loadMS := 0.0
	for _, sw := range w.stages {
		loadMS = max(loadMS, sw.LoadMS)
	}
	rep := SampleReport{
		Sample: s, Seed: w.pr.Seed, Model: w.o.Model, Image: w.o.Image, LastImage: w.o.LastImage, Frames: w.pr.NumFrames,
		Prompt: w.o.Prompt, NegativePrompt: w.o.NegativePrompt, PromptEmbeds: w.o.PromptEmbeds, NegativePromptEmbeds: w.o.NegativePromptEmbeds,
		GuidanceScale: w.pr.GuidanceScale, GuidanceScale2: w.pr.GuidanceScale2, Sampler: w.pr.Scheduler, FlowShift: w.pr.FlowShift, LoRA: w.pr.LoRA, LoRA2: w.pr.LoRA2,
		Height: w.pr.Height, Width: w.pr.Width, Steps: w.pr.Steps, MinGuidance: w.pr.MinGuidance,
		MaxGuidance: w.pr.MaxGuidance, FPS: w.pr.FPS, MotionID: w.pr.MotionBucketID, NoiseAug: w.pr.NoiseAugStrength,
		DecodeChunk: w.pr.DecodeChunkSize, DecodeRanks: max(1, w.o.DecodeRanks), VAETile: w.pr.VAETile, Window: w.o.Window, Overlap: w.o.Overlap, Blend: w.o.Blend, NProc: w.o.NProc, PP: w.o.PP, CFG: w.o.CFG, CP: w.o.CP, DP: w.o.DP, Stages: w.stages,
		Timings: Timings{LoadMS: loadMS, ConditioningMS: ct.ConditioningMS, DiffusionMS: ms(t0.Sub(time.Unix(0, started))), DecodeMS: decodeMS},
		Pixels:  out.stats.Stats(), Files: files, MP4: enc,
		NumSamples: w.o.NumSamples, MicroBatch: w.o.MicroBatch, Provenance: prov,
	}
	w.mu.Lock()
	if c := w.caches[s]; c != nil {
		sum := *c
		sum.Summary = pipeline.CacheOutcome{Samples: []pipeline.CacheSummary{sum}, Steps: w.pr.Steps,
			DenoiseMS: rep.Timings.DiffusionMS, ReuseFraction: w.reuse, CheckHint: CheckHint}.Line()
		rep.Cache = &sum
	}
	w.mu.Unlock()
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), atomicfile.Options{}); err != nil {
		return err
	}
	w.prog.decoded()
	w.log.Info("sample done", "sample", s, "dir", dir, "decode_ms", int(decodeMS), "mp4", enc)
	return nil
}

// LoadProgress returns a family.Options.Progress that logs a large component's load
// every 10% (the text encoder's shards are several GB):
// "loading component=text_encoder percent=40 bytes=... total=...".
func LoadProgress(log *slog.Logger) func(component string, loaded, total int64) {
	last := map[string]int64{}
	return func(component string, loaded, total int64) {
		if total <= 0 {
			return
		}
		pct := loaded * 100 / total
		if prev, ok := last[component]; ok && pct/10 == prev/10 && loaded < total {
			return
		}
		last[component] = pct
		log.Info("loading", "component", component, "percent", pct, "bytes", loaded, "total", total)
	}
}
