package plan

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// PairFunc opens two connected transports (ranks 0 and 1 of a world of two) and a function
// that closes both.
type PairFunc func(ctx context.Context) (a, b comm.Transport, closeFn func(), err error)

// Calibrator measures costs. It is the only part of the package that reads a clock or
// opens sockets; both are fields so tests can swap them.
type Calibrator struct {
	// Cond, when set, is the conditioning of every row of a timed step (a model that
	// needs some, as Wan's prompt embeddings; nil: none).
	Cond model.Conditioning
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Repeats is the number of timed repetitions of each measurement after one untimed
	// warm-up; the median is kept (default 7).
	Repeats int
	// Pair opens the link to measure (TCPLoopbackPair when nil).
	Pair PairFunc
	// Gap is an untimed pause before each link round trip (default 2 ms; negative: none),
	// so that both ends are idle when the message arrives, as a pipeline stage waiting for
	// its first sample is: a hot ping-pong loop would measure an optimistic hand-off.
	Gap time.Duration
	// Sleep pauses for Gap (time.Sleep when nil).
	Sleep func(time.Duration)
}

func (c *Calibrator) pause() {
	gap := c.Gap
	if gap == 0 {
		gap = 2 * time.Millisecond
	}
	if gap < 0 {
		return
	}
	if c.Sleep != nil {
		c.Sleep(gap)
		return
	}
	time.Sleep(gap)
}

func (c *Calibrator) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Calibrator) repeats() int { return max(1, cmpDefault(c.Repeats, 7)) }

func cmpDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// median of a timing function over repeats (after one warm-up call); before each call
// (timed or not) it runs pre, untimed, when pre is not nil.
func (c *Calibrator) median(pre func(), f func() error) (float64, error) {
	if pre == nil {
		pre = func() {}
	}
	pre()
	if err := f(); err != nil {
		return 0, err
	}
	ts := make([]float64, c.repeats())
	for i := range ts {
		pre()
		t0 := c.now()
		if err := f(); err != nil {
			return 0, err
		}
		ts[i] = float64(c.now().Sub(t0).Nanoseconds()) / 1e6
	}
	slices.Sort(ts)
	n := len(ts)
	if n%2 == 1 {
		return ts[n/2], nil
	}
	return (ts[n/2-1] + ts[n/2]) / 2, nil
}

// timeStep times one denoising step of d on rows x shape, as the engine spends it: the
// model call, then Pace for simulator models.
func (c *Calibrator) timeStep(ctx context.Context, d model.Denoiser, rows int, shape []int) (float64, error) {
	x := tensor.New(append([]int{rows}, shape...)...)
	for i := range x.Data {
		x.Data[i] = float32(i%17)/17 - 0.5
	}
	in := model.Input{Latents: x, Sigma: 1, Timestep: 0, Cond: make([]model.Conditioning, rows), Uncond: make([]bool, rows)}
	for r := range in.Cond {
		in.Cond[r] = c.Cond
	}
	return c.median(nil, func() error {
		start := c.now()
		if _, err := d.Predict(ctx, in); err != nil {
			return fmt.Errorf("plan: calibrate step (%d rows, %v): %w", rows, shape, err)
		}
		if p, ok := d.(model.Paced); ok {
			p.Pace(start, float64(rows))
		}
		return nil
	})
}

// MeasureStep fits a StepCost to d on the per-sample latent shape [T, C, H, W]: one step
// on 1 and 2 rows gives the per-call and per-row costs; when T > 1, one row at ceil(T/2)
// frames gives the share of the row cost that scales with frames.
func (c *Calibrator) MeasureStep(ctx context.Context, d model.Denoiser, shape []int) (StepCost, []Measurement, error) {
	if len(shape) != 4 {
		return StepCost{}, nil, fmt.Errorf("%w: latent shape %v is not [T,C,H,W]", ErrBadInput, shape)
	}
	t := shape[0]
	one, err := c.timeStep(ctx, d, 1, shape)
	if err != nil {
		return StepCost{}, nil, err
	}
	two, err := c.timeStep(ctx, d, 2, shape)
	if err != nil {
		return StepCost{}, nil, err
	}
	ms := []Measurement{{Name: "step", Rows: 1, Frames: t, MS: one}, {Name: "step", Rows: 2, Frames: t, MS: two}}
	sc := StepCost{RowMS: two - one, FixedMS: 2*one - two, RefFrames: t}
	if sc.RowMS <= 0 || sc.FixedMS < 0 { // noise or no batching gain: treat as per row only
		sc.RowMS, sc.FixedMS = max(one, two/2), 0
	}
	if t > 1 && sc.RowMS > 0 {
		half := ceilDiv(t, 2)
		hs := slices.Clone(shape)
		hs[0] = half
		h, err := c.timeStep(ctx, d, 1, hs)
		if err != nil {
			return StepCost{}, nil, err
		}
		ms = append(ms, Measurement{Name: "step", Rows: 1, Frames: half, MS: h})
		// one - h = RowMS * s * (1 - half/t)
		s := (one - h) / (sc.RowMS * (1 - float64(half)/float64(t)))
		sc.FrameScaling = min(1, max(0, s))
	}
	return sc, ms, nil
}

// MeasureLink fits a Link from one-way times (half a round trip) of a 4-byte message and of
// a bytes-sized message.
func (c *Calibrator) MeasureLink(ctx context.Context, bytes int64) (Link, []Measurement, error) {
	pair := c.Pair
	if pair == nil {
		pair = TCPLoopbackPair
	}
	a, b, closeFn, err := pair(ctx)
	if err != nil {
		return Link{}, nil, fmt.Errorf("plan: calibrate link: %w", err)
	}
	defer closeFn()
	oneWay := func(n int64) (float64, error) {
		m := comm.Message{Tensors: []comm.NamedTensor{{Name: "latent", Tensor: tensor.New(int(max(1, n/4)))}}}
		rtt, err := c.median(c.pause, func() error {
			if err := a.Send(ctx, 1, m); err != nil {
				return err
			}
			got, err := b.Recv(ctx, 0)
			if err != nil {
				return err
			}
			if err := b.Send(ctx, 0, got); err != nil {
				return err
			}
			_, err = a.Recv(ctx, 1)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("plan: calibrate link (%d bytes): %w", n, err)
		}
		return rtt / 2, nil
	}
	small, err := oneWay(4)
	if err != nil {
		return Link{}, nil, err
	}
	big, err := oneWay(bytes)
	if err != nil {
		return Link{}, nil, err
	}
	ms := []Measurement{{Name: "link", Bytes: 4, MS: small}, {Name: "link", Bytes: max(4, bytes), MS: big}}
	if big <= small || bytes <= 4 {
		return Link{LatencyMS: max(small, big)}, ms, nil
	}
	return Link{LatencyMS: small, BytesPerS: float64(bytes-4) / (big - small) * 1e3}, ms, nil
}

// Calibrate measures the step cost of d and the link on the latent shape [T, C, H, W] and
// returns a calibration with the given weights (collectives use the measured link, until a
// ProcessCalibrator's costs are applied; prepare and finish costs are not measured and stay 0).
func (c *Calibrator) Calibrate(ctx context.Context, name string, d model.Denoiser, shape []int, weights Weights) (Calibration, error) {
	sc, sm, err := c.MeasureStep(ctx, d, shape)
	if err != nil {
		return Calibration{}, err
	}
	per := int64(4)
	for _, s := range shape {
		per *= int64(s)
	}
	link, lm, err := c.MeasureLink(ctx, per)
	if err != nil {
		return Calibration{}, err
	}
	costs := Costs{Step: sc, HandOff: link, Collective: link, CPAllToAllsPerStep: 1, Weights: weights}
	if fl, ok := d.(model.FrameLocal); ok && fl.FrameLocal() {
		costs.CPAllToAllsPerStep = 0 // its cp step exchanges only the output gather
	}
	cal := Calibration{Version: CalibrationVersion, Model: name, LatentShape: slices.Clone(shape), Costs: costs, Measurements: append(sm, lm...)}
	return cal, cal.Validate()
}

// TCPLoopbackPair is the default PairFunc: a world of two TCP transports on 127.0.0.1
// inside this process, through the same rendezvous and framing as `vdpp launch` workers.
func TCPLoopbackPair(ctx context.Context) (comm.Transport, comm.Transport, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := comm.Options{ConnectTimeout: 10 * time.Second, RecvTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var ts [2]*comm.TCPTransport
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			env := comm.Env{Rank: r, WorldSize: 2, LocalRank: r, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port}
			ts[r], errs[r] = comm.DialTCP(ctx, env, opts)
		})
	}
	wg.Wait()
	closeAll := func() {
		for _, t := range ts {
			if t != nil {
				t.Close()
			}
		}
	}
	for r, err := range errs {
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return ts[0], ts[1], closeAll, nil
}

// MeasureReuse times one row's call of a caching denoiser (model.StepCacher) that reuses
// its cache against one that computes in full, on the per-sample latent shape [T, C, H, W]
// under rule's threshold and branch: the fraction of a full call that a reusing one costs.
// A simulator (model.Paced) declares what its calls cost (model.CacheCall.Work): its
// fraction is that, not a timing of sub-millisecond sleeps that a loaded host stretches.
func (c *Calibrator) MeasureReuse(ctx context.Context, d model.Denoiser, shape []int, rule pipeline.Cache) (float64, []Measurement, error) {
	sc, ok := d.(model.StepCacher)
	if !ok {
		return 0, nil, fmt.Errorf("%w: the model (%T) has no step cache", ErrBadInput, d)
	}
	x := tensor.New(append([]int{1}, shape...)...)
	for i := range x.Data {
		x.Data[i] = float32(i%17)/17 - 0.5
	}
	in := model.Input{Latents: x, Sigma: 1, Timestep: 0, Cond: []model.Conditioning{c.Cond}, Uncond: []bool{false}}
	var state model.CacheState
	var work [3]float64 // by decision: the declared work of the last call
	call := func(decision model.CacheDecision) error {
		cc := model.NewCacheCall(1, decision)
		cc.Threshold, cc.Branch = rule.Threshold, rule.Branch
		cc.Rows[0].State = state
		start := c.now()
		if _, err := sc.PredictCached(ctx, in, cc); err != nil {
			return fmt.Errorf("plan: calibrate a cached call (%v): %w", shape, err)
		}
		if decision == model.CacheReuse && cc.Rows[0].Computed {
			return fmt.Errorf("%w: the model computed a call asked to reuse its cache", ErrBadInput)
		}
		work[decision] = cc.Work
		if work[decision] == 0 {
			work[decision] = 1
		}
		if p, ok := d.(model.Paced); ok {
			p.Pace(start, work[decision])
		}
		if state == nil {
			state = cc.Rows[0].State
		}
		return nil
	}
	full, err := c.median(nil, func() error { return call(model.CacheCompute) })
	if err != nil {
		return 0, nil, err
	}
	reuse, err := c.median(nil, func() error { return call(model.CacheReuse) })
	if err != nil {
		return 0, nil, err
	}
	ms := []Measurement{{Name: "cached call", Rows: 1, Frames: shape[0], MS: full}, {Name: "reusing call", Rows: 1, Frames: shape[0], MS: reuse}}
	if _, ok := d.(model.Paced); ok {
		return work[model.CacheReuse] / work[model.CacheCompute], ms, nil
	}
	if full <= 0 {
		return 0, ms, fmt.Errorf("%w: a full cached call took %v ms", ErrBadInput, full)
	}
	return min(1, reuse/full), ms, nil
}
