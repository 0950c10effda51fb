package plan

import (
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/pipeline"
)

// The cost model. Every formula the planner uses is in this file. Notation, for a
// workload w, a mesh (pp, cfg, cp, dp) and costs c (all times in milliseconds):
//
//	b        = w.Batch()                                  samples per item (micro-batch)
//	I        = ceil(w.Samples / b)                        items
//	r        = b * rowsPerSample / cfg                    rows per denoiser call on one rank
//	                                                      (rowsPerSample = 2 when guided;
//	                                                      cfg = 2 gives each rank one half)
//	f        = ceil(w.Frames / cp)                        frames per cp rank (the largest share)
//	step(r,f)= Fixed + Row * r * ((1-s) + s * f/Ref)      c.Step; s = FrameScaling
//	link(B)  = Latency + B / Bandwidth                    one message of B bytes
//	AG(g,B)  = M_g + (g-1) * max(0, B - B_g) / Bandwidth  all-gather over g ranks of B bytes each
//	                                                      when measured between processes for
//	                                                      g (c.AllGathers: M_g at B_g bytes);
//	         = (g-1) * link(B)                            otherwise (ring: g-1 messages)
//	cpgather = AG(cp, r * f * frameBytes)                 cp: every step ends gathering the
//	                                                      ranks' frames of the output
//	gather   = AG(cfg, r * Frames * frameBytes)           cfg: then the two halves (all frames)
//	joint    = AG(cfg*cp, r * f * frameBytes)             cfg > 1 and cp > 1: the engine gathers
//	                                                      frames and halves in ONE all-gather
//	                                                      over the cfg x cp group, which
//	                                                      replaces cpgather + gather
//	a2a      = A * (cp-1) * link(r * f * Bcp / cp)        cp: A all-to-alls per step inside the
//	                                                      model (SVD UNet; 0 for synthetic),
//	                                                      each rank sends 1/cp of its r*f*Bcp
//	                                                      bytes to each of the cp-1 others
//	T        = step(r,f) + cpgather + gather + a2a        one step of one item (collectives
//	                                                      are synchronous: not overlapped)
//	extra_0  = b * Prepare, extra_{pp-1} += b * Finish    conditioning on stage 0, finishing on
//	                                                      the last stage
//	D        = DecodeParts * DecodePartMS                 one sample's decode, in parts that
//	                                                      decode independently (chunks)
//	n        = min(max(1, w.DecodeRanks), pp)             stages sharing the decode
//	extra_k += b * D / n  for the last n stages           part j of the run goes to the
//	                                                      (j mod n)-th of them: in steady
//	                                                      state each computes b*D/n per item
//	                                                      (the join and the frames' trip
//	                                                      back run beside the compute loop)
//	dec      = ceil(b * DecodeParts / n) * DecodePartMS   an item's decode latency: its parts
//	                                                      run on n ranks at once
//	stages   = pipeline.BalanceStages([T]*S, pp, extra)   contiguous step ranges
//	t_k      = len_k * T + extra_k                        stage time of one item
//	h        = link(b * f * frameBytes)                   hand-off between stages (each cp
//	                                                      rank sends its own frames)
//	first    = sum_k t_k - b*D + dec + (pp-1) * h         first-sample latency (the decode
//	                                                      counted once, at its parallel span)
//	interval = max(max_k t_k, h if pp > 1)                time between completions of one
//	                                                      replica in steady state: the
//	                                                      slowest stage (or the link, if
//	                                                      slower); sending overlaps compute
//	u        = min(dp, I)                                 replicas with work
//	steady_throughput = u * b / interval * 1000           samples per second, steady state
//	                                                      (what the planner ranks by)
//	C_g      = first + floor(g/dp) * interval             completion of item g (items go to
//	                                                      replica g mod dp, round-robin; exact
//	                                                      for identical items: a flow shop
//	                                                      whose machines are the stages and
//	                                                      links)
//	throughput = WindowThroughput(sample completions, W)  bench's definition: sort the samples'
//	                                                      completions C_g, drop the first W
//	                                                      (w.Warmup), (n-1) / (last - first);
//	                                                      above the steady rate when replicas
//	                                                      finish in bursts (dp) and the window
//	                                                      starts and ends on a burst
//	steady_sample = interval / (b * dp)                   bench's SteadyPerSampleMS: the median
//	                                                      gap per item of a replica, per
//	                                                      sample, over the replicas
//	makespan = first + (ceil(I/dp) - 1) * interval        all samples done
//	weight_k = Denoiser + [k=0] Condition + [k >= pp-n] Decode
//	weight   = max_k weight_k                             per device; cfg and cp ranks of a
//	                                                      stage and every dp replica hold what
//	                                                      their stage needs
//	memory   = weight + ActivationBytesPerRowFrame * r * f
//	feasible = memory <= MemoryPerDevice (or no limit given)
//
// With the full model on every device, pp stages never beat dp replicas in throughput:
// sum_k t_k is the same work a dp replica does per item, and max_k t_k >= sum_k t_k / pp,
// so dp's rate pp/sum_k t_k is at least pp's 1/max_k t_k; pp adds (pp-1)*h to the latency.

// MS returns step(rows, frames) (see the model above).
func (c StepCost) MS(rows, frames int) float64 {
	share := 1.0
	if c.FrameScaling > 0 && c.RefFrames > 0 {
		share = (1 - c.FrameScaling) + c.FrameScaling*float64(frames)/float64(c.RefFrames)
	}
	return c.FixedMS + c.RowMS*float64(rows)*share
}

// MS returns link(bytes) = latency + bytes / bandwidth (no bandwidth term when BytesPerS is 0).
func (l Link) MS(bytes int64) float64 {
	ms := l.LatencyMS
	if l.BytesPerS > 0 {
		ms += float64(bytes) / l.BytesPerS * 1e3
	}
	return ms
}

// AllGatherMS is a ring all-gather over g ranks, each contributing share bytes:
// (g-1) * link(share).
func (l Link) AllGatherMS(g int, share int64) float64 {
	if g <= 1 {
		return 0
	}
	return float64(g-1) * l.MS(share)
}

// AllGatherMS is AG(g, share) of the model above: the measured all-gather over g processes
// when c.AllGathers has one for g, else the Collective link's ring.
func (c Costs) AllGatherMS(g int, share int64) float64 {
	if g <= 1 {
		return 0
	}
	for _, m := range c.AllGathers {
		if m.Size != g {
			continue
		}
		ms := m.MS
		if extra := share - m.Bytes; extra > 0 && c.Collective.BytesPerS > 0 {
			ms += float64(g-1) * float64(extra) / c.Collective.BytesPerS * 1e3
		}
		return ms
	}
	return c.Collective.AllGatherMS(g, share)
}

// AllToAllMS is an all-to-all over g ranks, each holding local bytes and sending local/g to
// each of the others: (g-1) * link(local/g).
func (l Link) AllToAllMS(g int, local int64) float64 {
	if g <= 1 {
		return 0
	}
	return float64(g-1) * l.MS(local/int64(g))
}

// Prediction is the cost model's answer for one mesh.
type Prediction struct {
	Mesh
	// RowsPerCall and FramesPerRank are r and f.
	RowsPerCall   int `json:"rows_per_call"`
	FramesPerRank int `json:"frames_per_rank"`
	// StepMS is T = ComputeStepMS + CollectiveStepMS.
	StepMS           float64 `json:"step_ms"`
	ComputeStepMS    float64 `json:"compute_step_ms"`
	CollectiveStepMS float64 `json:"collective_step_ms"`
	// StageSteps are the stages' [start, end) step ranges; StageMS their times t_k.
	StageSteps [][2]int  `json:"stage_steps"`
	StageMS    []float64 `json:"stage_ms"`
	HandOffMS  float64   `json:"hand_off_ms"`
	// HandOffBytes is what one hand-off carries: the item's latent and, with a carried
	// step cache, its states.
	HandOffBytes int64 `json:"hand_off_bytes"`
	// DecodeRanks is n, the stages sharing the decode; DecodeItemMS dec, an item's
	// decode latency.
	DecodeRanks  int     `json:"decode_ranks"`
	DecodeItemMS float64 `json:"decode_item_ms"`

	// StepWork is each step's computation in full steps under a static step cache (1
	// for a step that computes, the reuse fraction for one that reuses; a stage's first
	// step computes when the cache is dropped at stage boundaries); nil without one.
	StepWork []float64 `json:"step_work,omitempty"`
	// Uncached* are the same mesh's predictions without the cache, and CacheSpeedup the
	// steady rate's gain from it (CacheLatencySpeedup the first sample's); zero without a
	// cache.
	UncachedFirstSampleMS  float64 `json:"predicted_uncached_first_sample_ms,omitempty"`
	UncachedSteadySampleMS float64 `json:"predicted_uncached_steady_sample_ms,omitempty"`
	CacheSpeedup           float64 `json:"predicted_cache_speedup,omitempty"`
	CacheLatencySpeedup    float64 `json:"predicted_cache_latency_speedup,omitempty"`

	FirstSampleMS float64 `json:"predicted_first_sample_ms"`
	IntervalMS    float64 `json:"predicted_interval_ms"` // per replica, between completed items
	// ThroughputPerS is what `vdpp bench` reports as throughput_samples_per_s: samples per
	// second over the window after the workload's warm-up completions (WindowThroughput).
	ThroughputPerS float64 `json:"predicted_throughput_samples_per_s"`
	// SteadyThroughputPerS is the steady-state rate u*b/interval, independent of the number
	// of samples and the warm-up; the planner ranks and compares meshes by it.
	SteadyThroughputPerS float64 `json:"predicted_steady_throughput_samples_per_s"`
	// SteadySampleMS is what bench reports as steady_sample_ms: interval / (b * dp).
	SteadySampleMS float64 `json:"predicted_steady_sample_ms"`
	MakespanMS     float64 `json:"predicted_makespan_ms"`
	ActiveReplicas int     `json:"active_replicas"`

	// WeightBytesPerDevice is the largest weight memory of any device; StageWeightBytes
	// per stage.
	WeightBytesPerDevice int64    `json:"weight_bytes_per_device"`
	StageWeightBytes     []int64  `json:"stage_weight_bytes"`
	MemoryBytesPerDevice int64    `json:"memory_bytes_per_device"`
	Feasible             bool     `json:"feasible"`
	Notes                []string `json:"notes,omitempty"`
}

// Predict applies the cost model to one mesh. memoryPerDevice <= 0 means no limit.
func Predict(w Workload, m Mesh, c Costs, memoryPerDevice int64) (Prediction, error) {
	if err := w.Validate(); err != nil {
		return Prediction{}, err
	}
	if err := c.Validate(); err != nil {
		return Prediction{}, err
	}
	if err := m.Check(w); err != nil {
		return Prediction{}, err
	}
	b := w.Batch()
	items := w.Items()
	p := Prediction{Mesh: m}
	p.RowsPerCall = b * w.RowsPerSample() / m.CFG
	p.FramesPerRank = ceilDiv(w.Frames, m.CP)
	r, f := int64(p.RowsPerCall), int64(p.FramesPerRank)
	p.ComputeStepMS = c.Step.MS(p.RowsPerCall, p.FramesPerRank)
	cpGather := c.AllGatherMS(m.CP, r*f*w.FrameBytes())
	gather := c.AllGatherMS(m.CFG, r*int64(w.Frames)*w.FrameBytes())
	if m.CP > 1 && m.CFG > 1 {
		cpGather, gather = c.AllGatherMS(m.CP*m.CFG, r*f*w.FrameBytes()), 0
	}
	cpBytes := c.CPBytesPerFrame
	if cpBytes == 0 {
		cpBytes = w.FrameBytes()
	}
	a2a := float64(c.CPAllToAllsPerStep) * c.Collective.AllToAllMS(m.CP, r*f*cpBytes)
	p.CollectiveStepMS = cpGather + gather + a2a
	p.StepMS = p.ComputeStepMS + p.CollectiveStepMS

	p.DecodeRanks = min(max(1, w.DecodeRanks), m.PP)
	decode := float64(c.DecodeParts) * c.DecodePartMS
	// The stages' fixed costs as the engine's cut sees them (generate/bench --decode-steps).
	extra := pipeline.StageExtras(m.PP, float64(b)*c.PrepareMS, float64(b)*c.FinishMS, float64(b)*decode, p.DecodeRanks)
	if extra == nil {
		extra = make([]float64, m.PP)
	}
	p.DecodeItemMS = float64(ceilDiv(b*c.DecodeParts, p.DecodeRanks)) * c.DecodePartMS
	stepCost := make([]float64, w.Steps)
	work := make([]float64, w.Steps)
	for i := range stepCost {
		work[i] = 1
	}
	if c.Cache != nil {
		// The engine's cut under a static cache (family.Resolved.CachedStagePlan): steps
		// weighted by the computation they run.
		work = c.Cache.Rule.StepCosts(w.Steps, c.Weights.ExpertSwitches, c.Cache.cut())
	}
	for i := range stepCost {
		stepCost[i] = p.StepMS * work[i]
	}
	// The cut generate and bench make (family.Resolved.StagePlan): a stage boundary at
	// every expert switch, the steps balanced against the stages' fixed costs.
	stages, err := pipeline.CutStages(stepCost, m.PP, c.Weights.ExpertSwitches, extra)
	if err != nil {
		return Prediction{}, fmt.Errorf("plan: %v: %w", m, err)
	}
	if c.Cache != nil {
		// What the cut run spends: a reusing step still gathers its outputs, and with the
		// cache dropped at stage boundaries each stage's first step computes.
		work = c.Cache.Rule.PlannedCosts(stages, c.Weights.ExpertSwitches, c.Cache.ReuseFraction)
		for i := range stepCost {
			stepCost[i] = p.ComputeStepMS*work[i] + p.CollectiveStepMS
		}
		p.StepWork = work
	}
	p.StageMS = pipeline.StageCosts(stages, stepCost)
	var sum, longest float64
	for k, rg := range stages {
		p.StageSteps = append(p.StageSteps, [2]int{rg.Start, rg.End})
		p.StageMS[k] += extra[k]
		sum += p.StageMS[k]
		longest = max(longest, p.StageMS[k])
	}
	handoff := int64(b) * f * w.FrameBytes()
	if c.Cache != nil && !c.Cache.Rule.Drop {
		// Each sample's states travel beside its latent: the rank's CFG branches, its
		// frames' share under context parallelism.
		branches := int64(w.RowsPerSample() / m.CFG)
		handoff += int64(b) * branches * c.Cache.StateBytes * f / int64(w.Frames)
	}
	p.HandOffBytes = handoff
	p.HandOffMS = c.HandOff.MS(handoff)
	p.FirstSampleMS = sum - float64(b)*decode + p.DecodeItemMS + float64(m.PP-1)*p.HandOffMS
	p.IntervalMS = longest
	if m.PP > 1 {
		p.IntervalMS = max(p.IntervalMS, p.HandOffMS)
	}
	p.ActiveReplicas = min(m.DP, items)
	if p.IntervalMS > 0 {
		p.SteadyThroughputPerS = float64(p.ActiveReplicas*b) / p.IntervalMS * 1e3
		p.SteadySampleMS = p.IntervalMS / float64(b*m.DP)
		p.ThroughputPerS = p.SteadyThroughputPerS
		if tput, ok := WindowThroughput(SampleCompletions(w, m.DP, p.FirstSampleMS, p.IntervalMS), w.Warmup); ok {
			p.ThroughputPerS = tput
		}
	}
	p.MakespanMS = p.FirstSampleMS + float64(ceilDiv(items, m.DP)-1)*p.IntervalMS

	for k, rg := range stages {
		wk := c.Weights.StageDenoiser(rg.Start, rg.End)
		if k == 0 {
			wk += c.Weights.Condition
		}
		if k >= m.PP-p.DecodeRanks {
			wk += c.Weights.Decode
		}
		p.StageWeightBytes = append(p.StageWeightBytes, wk)
		p.WeightBytesPerDevice = max(p.WeightBytesPerDevice, wk)
	}
	p.MemoryBytesPerDevice = p.WeightBytesPerDevice + c.ActivationBytesPerRowFrame*r*f
	p.Feasible = memoryPerDevice <= 0 || p.MemoryBytesPerDevice <= memoryPerDevice
	if c.Cache != nil {
		plain := c
		plain.Cache = nil
		u, err := Predict(w, m, plain, memoryPerDevice)
		if err != nil {
			return Prediction{}, err
		}
		p.UncachedFirstSampleMS, p.UncachedSteadySampleMS = u.FirstSampleMS, u.SteadySampleMS
		if p.SteadySampleMS > 0 {
			p.CacheSpeedup = u.SteadySampleMS / p.SteadySampleMS
		}
		if p.FirstSampleMS > 0 {
			p.CacheLatencySpeedup = u.FirstSampleMS / p.FirstSampleMS
		}
	}
	return p, nil
}

// SampleCompletions returns the predicted completion time (ms from the start) of every
// sample of w on dp replicas whose first item completes at first and whose later items
// follow every interval ms: item g (replica g mod dp) completes at first + floor(g/dp) *
// interval, and all its samples with it. The result is in sample order.
func SampleCompletions(w Workload, dp int, first, interval float64) []float64 {
	b := w.Batch()
	dp = max(1, dp)
	out := make([]float64, w.Samples)
	for s := range out {
		g := s / b
		out[s] = first + float64(g/dp)*interval
	}
	return out
}

// WindowThroughput is bench's throughput definition applied to completion times in ms (any
// order): sort them, drop the first warmup, and return (n-1) / (last - first) per second
// over the n that remain. ok is false when fewer than two remain or they coincide.
func WindowThroughput(completionsMS []float64, warmup int) (perS float64, ok bool) {
	warmup = max(0, warmup)
	if len(completionsMS)-warmup < 2 {
		return 0, false
	}
	c := slices.Clone(completionsMS)
	slices.Sort(c)
	c = c[warmup:]
	span := c[len(c)-1] - c[0]
	if span <= 0 {
		return 0, false
	}
	return float64(len(c)-1) / span * 1e3, true
}
