package generate

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/dist"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// RunRank runs one stage of a generation: the whole job when env is a single process, or
// rank env.Rank of a launched world. o must already hold resolved defaults (see Resolve).
func RunRank(ctx context.Context, o Options, env dist.Env, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	// Resolve leaves guidance and decode chunk set; options built in code may still say
	// "the model's".
	smp, err := builtin.Sampling(o.Model)
	if err != nil {
		return err
	}
	o.MinGuidance, o.MaxGuidance, o.DecodeChunkSize = smp.Resolve(o.MinGuidance, o.MaxGuidance, o.DecodeChunkSize)
	if env.WorldSize != o.NProc {
		return fmt.Errorf("generate: world size %d but --nproc %d", env.WorldSize, o.NProc)
	}
	plan, err := pipeline.EvenStages(o.Steps, o.NProc)
	if err != nil {
		return err
	}
	first, last := env.Rank == 0, env.Rank == o.NProc-1
	parts := svd.Parts{Conditioner: first, Denoiser: true, Decoder: last}
	backend, err := nn.NewBackend(o.Backend)
	if err != nil {
		return err
	}
	t0 := time.Now()
	p, err := svd.Load(o.Model, o.Variant, backend, parts)
	if err != nil {
		return err
	}
	defer p.Close()
	loadMS := ms(time.Since(t0))
	log.Info("loaded", "stage", env.Rank, "steps", plan[env.Rank].String(), "weights", p.WeightBytes(), "ms", int(loadMS))

	var tr dist.Transport
	var store kv
	var barrier func() error
	if o.NProc > 1 {
		t, err := dist.DialTCP(ctx, env, dist.Options{RecvTimeout: o.Timeout, Logger: log})
		if err != nil {
			return err
		}
		defer t.Close()
		tr, store = t, t.Store()
		// The store lives on rank 0: every rank waits here before closing, so rank 0 serves
		// the last stage's look-ups until the last sample is written.
		barrier = func() error {
			bctx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			return t.Store().Barrier(bctx, "generate/done", o.NProc)
		}
	} else {
		store = newLocalKV()
	}
	sw := StageWeights{Rank: env.Rank, Steps: [2]int{plan[env.Rank].Start, plan[env.Rank].End}, Components: p.WeightBytes(), LoadMS: loadMS}
	if err := setJSON(ctx, store, "weights/"+strconv.Itoa(env.Rank), sw); err != nil {
		return err
	}
	if first {
		log.Info("stage plan", "plan", pipeline.FormatPlan(plan))
	}
	pr := params(o)
	sc, err := sched.New(p.Sched, pr.Steps)
	if err != nil {
		return err
	}
	w := &workload{o: o, p: p, pr: pr, sc: sc, store: store, log: log}
	if pr.Guided() {
		w.guidance = sched.GuidanceWeights(float32(pr.MinGuidance), float32(pr.MaxGuidance), pr.NumFrames)
	}
	if first {
		if w.img, err = video.LoadImage(o.Image); err != nil {
			return err
		}
	}
	err = pipeline.Run(ctx, pipeline.Config{
		Plan: plan, Stage: env.Rank, PrevRank: env.Rank - 1, NextRank: env.Rank + 1,
		TotalSteps: o.Steps, NumSamples: o.NumSamples, MicroBatch: o.MicroBatch,
		Transport: tr, Stepper: &pipeline.Stepper{Model: &svd.Denoiser{P: p}, Sched: sc}, Workload: w, Log: log,
		OnEvent: func(e pipeline.Event) {
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

func params(o Options) svd.Params {
	return svd.Params{
		NumFrames: o.NumFrames, Steps: o.Steps, Height: o.Height, Width: o.Width,
		MinGuidance: o.MinGuidance, MaxGuidance: o.MaxGuidance, FPS: o.FPS, MotionBucketID: o.MotionBucketID,
		NoiseAugStrength: o.NoiseAugStrength, DecodeChunkSize: o.DecodeChunkSize, Seed: o.Seed,
	}
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
	o        Options
	p        *svd.Pipeline
	pr       svd.Params
	sc       *sched.Euler
	guidance []float32
	store    kv
	log      *slog.Logger
	img      image.Image

	clipPixels, vaeImage *tensor.Dense
	stages               []StageWeights
}

// Prepare implements pipeline.Workload (first stage).
func (w *workload) Prepare(ctx context.Context, group int64, samples []int64) (*pipeline.Item, error) {
	if w.clipPixels == nil {
		var err error
		if w.clipPixels, w.vaeImage, err = w.p.Preprocess(w.img, w.pr); err != nil {
			return nil, fmt.Errorf("generate: %s: %w", w.o.Image, err)
		}
	}
	shape := w.p.LatentShape(w.pr)
	per := tensor.NumElements(shape)
	it := &pipeline.Item{Group: group, Samples: samples, Latent: tensor.New(append([]int{len(samples)}, shape...)...), Guidance: w.guidance}
	for r, s := range samples {
		t0 := time.Now()
		aug, init := w.p.Noise(w.pr, s)
		c, err := w.p.Condition(w.clipPixels, w.vaeImage, aug, w.pr)
		if err != nil {
			return nil, err
		}
		dst := it.Latent.Data[r*per : (r+1)*per]
		for i, v := range init.Data {
			dst[i] = v * w.sc.InitNoiseSigma
		}
		it.Cond = append(it.Cond, c.Cond)
		if err := setJSON(ctx, w.store, "cond/"+strconv.FormatInt(s, 10), condTiming{ms(time.Since(t0))}); err != nil {
			return nil, err
		}
	}
	return it, nil
}

// Finish implements pipeline.Workload (last stage): decode and write every sample.
func (w *workload) Finish(ctx context.Context, it *pipeline.Item) error {
	if w.stages == nil {
		for r := 0; r < w.o.NProc; r++ {
			var sw StageWeights
			if err := getJSON(ctx, w.store, "weights/"+strconv.Itoa(r), &sw); err != nil {
				return err
			}
			w.stages = append(w.stages, sw)
		}
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
	var ct condTiming
	if err := getJSON(ctx, w.store, "cond/"+strconv.FormatInt(s, 10), &ct); err != nil {
		return err
	}
	var started int64
	if err := getJSON(ctx, w.store, "start/"+strconv.FormatInt(s, 10), &started); err != nil {
		return err
	}
	t0 := time.Now()
	raw, err := w.p.Decode(lat, w.pr.DecodeChunkSize)
	if err != nil {
		return err
	}
	unit := svd.ToUnit(raw)
	decodeMS := ms(time.Since(t0))
	frames, err := video.FramesFromTensor(unit)
	if err != nil {
		return err
	}
	imgs := make([]image.Image, len(frames))
	for i, f := range frames {
		imgs[i] = f
	}
	dir := filepath.Join(w.o.Out, fmt.Sprintf("sample-%03d", s))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := video.WritePNGFrames(filepath.Join(dir, "frames"), imgs); err != nil {
		return err
	}
	if err := video.WriteGIFFile(filepath.Join(dir, "video.gif"), imgs, float64(w.pr.FPS)); err != nil {
		return err
	}
	files := []string{"video.gif", fmt.Sprintf("frames/000.png .. frames/%03d.png", len(imgs)-1)}
	enc, err := video.WriteMP4Any(filepath.Join(dir, "video.mp4"), imgs, float64(w.pr.FPS))
	if err != nil {
		return err
	}
	files = append(files, "video.mp4")
	loadMS := 0.0
	for _, sw := range w.stages {
		loadMS = max(loadMS, sw.LoadMS)
	}
	rep := SampleReport{
		Sample: s, Seed: w.pr.Seed, Model: w.o.Model, Image: w.o.Image, Frames: w.pr.NumFrames,
		Height: w.pr.Height, Width: w.pr.Width, Steps: w.pr.Steps, MinGuidance: w.pr.MinGuidance,
		MaxGuidance: w.pr.MaxGuidance, FPS: w.pr.FPS, MotionID: w.pr.MotionBucketID, NoiseAug: w.pr.NoiseAugStrength,
		DecodeChunk: w.pr.DecodeChunkSize, NProc: w.o.NProc, Stages: w.stages,
		Timings: Timings{LoadMS: loadMS, ConditioningMS: ct.ConditioningMS, DiffusionMS: ms(t0.Sub(time.Unix(0, started))), DecodeMS: decodeMS},
		Pixels:  video.Stats(unit), Files: files, MP4: enc,
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".report.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "report.json")); err != nil {
		return err
	}
	w.log.Info("sample done", "sample", s, "dir", dir, "decode_ms", int(decodeMS), "mp4", enc)
	return nil
}

var _ model.Denoiser = (*svd.Denoiser)(nil)
