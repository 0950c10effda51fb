package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/pipeline"
)

// Relation is how two numbers compare, in the direction of "better".
type Relation string

// Relations between data parallelism and the step pipeline.
const (
	RelEqual    Relation = "equal"     // within EqualTolerance
	RelDPBetter Relation = "dp_better" // dp has higher throughput or lower latency
	RelPPBetter Relation = "pp_better"
	RelUnknown  Relation = "" // one of the two meshes does not exist
)

// EqualPercent is the relative tolerance, in percent, within which two numbers are RelEqual.
const EqualPercent = 0.5

// Verdict compares pure data parallelism (pp=1 cfg=1 cp=1 dp=K) with the pure step
// pipeline (pp=K cfg=1 cp=1 dp=1) on the same K devices, from the predicted numbers.
type Verdict struct {
	DP *Prediction `json:"dp,omitempty"`
	PP *Prediction `json:"pp,omitempty"`
	// Throughput and Latency compare the two meshes (RelUnknown when one is missing).
	Throughput Relation `json:"throughput"`
	Latency    Relation `json:"latency"`
	// PipelineOnlyFits lists the feasible meshes with pp > 1 whose counterpart with the
	// pipeline ranks turned into data-parallel replicas (pp=1, dp*pp) does not fit: there
	// the pipeline wins because only stage 0 holds the encoders and only the last stage
	// the decoder.
	PipelineOnlyFits []Mesh `json:"pipeline_only_fits"`
}

// relation compares a (dp) with b (pp); higher is better when higherBetter.
func relation(a, b float64, higherBetter bool) Relation {
	if math.Abs(a-b) <= EqualPercent/100*max(math.Abs(a), math.Abs(b)) {
		return RelEqual
	}
	if (a > b) == higherBetter {
		return RelDPBetter
	}
	return RelPPBetter
}

func judge(req Request, all []Prediction) Verdict {
	var v Verdict
	byMesh := map[Mesh]Prediction{}
	for _, p := range all {
		byMesh[p.Mesh] = p
	}
	k := req.Devices
	if p, ok := byMesh[Mesh{1, 1, 1, k}]; ok {
		v.DP = &p
	}
	if p, ok := byMesh[Mesh{k, 1, 1, 1}]; ok && k > 1 {
		v.PP = &p
	}
	if v.DP != nil && v.PP != nil {
		v.Throughput = relation(v.DP.SteadyThroughputPerS, v.PP.SteadyThroughputPerS, true)
		v.Latency = relation(v.DP.FirstSampleMS, v.PP.FirstSampleMS, false)
	}
	for _, p := range all {
		if p.PP == 1 || !p.Feasible {
			continue
		}
		if q, ok := byMesh[Mesh{1, p.CFG, p.CP, p.DP * p.PP}]; ok && !q.Feasible {
			v.PipelineOnlyFits = append(v.PipelineOnlyFits, p.Mesh)
		}
	}
	return v
}

// meshNotes explains one prediction's numbers.
func meshNotes(req Request, p Prediction) []string {
	var out []string
	if !p.Feasible {
		out = append(out, fmt.Sprintf("does not fit: needs %s per device > limit %s", Bytes(p.MemoryBytesPerDevice), Bytes(req.MemoryPerDevice)))
	}
	lo, hi := p.StageSteps[0][1]-p.StageSteps[0][0], 0
	lens := make([]string, len(p.StageSteps))
	for i, s := range p.StageSteps {
		n := s[1] - s[0]
		lo, hi = min(lo, n), max(hi, n)
		lens[i] = strconv.Itoa(n)
	}
	if hi > lo {
		mean := 0.0
		for _, t := range p.StageMS {
			mean += t
		}
		mean /= float64(len(p.StageMS))
		out = append(out, fmt.Sprintf("unequal stages (%s steps): the slowest takes %s ms, the mean %s ms", strings.Join(lens, ","), ms(p.IntervalMS), ms(mean)))
	}
	if p.PP > 1 && p.HandOffMS > maxOf(p.StageMS) {
		out = append(out, fmt.Sprintf("hand-off bound: a hand-off takes %s ms, the slowest stage %s ms", ms(p.HandOffMS), ms(maxOf(p.StageMS))))
	}
	items := req.Workload.Items()
	if p.ActiveReplicas < p.DP {
		out = append(out, fmt.Sprintf("only %d items for %d replicas: %d idle", items, p.DP, p.DP-p.ActiveReplicas))
	}
	if p.PP > 1 && ceilDiv(items, p.DP) < p.PP {
		out = append(out, fmt.Sprintf("only %d items per replica for %d stages: the pipeline never fills", ceilDiv(items, p.DP), p.PP))
	}
	if p.CollectiveStepMS > 0 {
		out = append(out, fmt.Sprintf("collectives add %s ms to each %s ms step", ms(p.CollectiveStepMS), ms(p.StepMS)))
	}
	if n := decodeNote(req, p); n != "" {
		out = append(out, n)
	}
	if n := cutNote(req, p); n != "" {
		out = append(out, n)
	}
	if n := cacheNote(req, p); n != "" {
		out = append(out, n)
	}
	if n := handoffNote(req, p); n != "" {
		out = append(out, n)
	}
	return out
}

// handoffNote weighs a pipeline's two ways of passing the cache at stage boundaries:
// carrying the states (bigger hand-offs) against dropping them (each stage's first step
// computes), by the steady rate each predicts.
func handoffNote(req Request, p Prediction) string {
	c := req.Costs
	if p.PP < 2 || c.Cache == nil || c.Cache.StateBytes == 0 {
		return ""
	}
	other := *c.Cache
	other.Rule.Drop = !other.Rule.Drop
	alt := c
	alt.Cache = &other
	q, err := Predict(req.Workload, p.Mesh, alt, req.MemoryPerDevice)
	if err != nil {
		return ""
	}
	carry, drop := p, q
	if c.Cache.Rule.Drop {
		carry, drop = q, p
	}
	better := "carrying"
	if drop.SteadyThroughputPerS > carry.SteadyThroughputPerS {
		better = "dropping"
	}
	return fmt.Sprintf("cache at stage boundaries: carried (%s more per hand-off) %s samples/s, dropped (each stage's first step computes) %s samples/s: %s is better",
		Bytes(carry.HandOffBytes-drop.HandOffBytes), rate(carry.SteadyThroughputPerS), rate(drop.SteadyThroughputPerS), better)
}

// stepWork is each step's computation in full steps: the static cache's (reusing steps
// cost its reuse fraction), else 1.
func stepWork(req Request) []float64 {
	if c := req.Costs.Cache; c != nil {
		return c.Rule.StepCosts(req.Workload.Steps, req.Costs.Weights.ExpertSwitches, c.cut())
	}
	steps := make([]float64, req.Workload.Steps)
	for i := range steps {
		steps[i] = 1
	}
	return steps
}

// cacheNote tells a pipeline's cut by computed work under a static cache when it differs
// from the cut by steps (generate and bench make the same cut from --cache).
func cacheNote(req Request, p Prediction) string {
	c := req.Costs
	if p.PP < 2 || c.Cache == nil {
		return ""
	}
	even, err := pipeline.CutStages(make1(req.Workload.Steps), p.PP, c.Weights.ExpertSwitches, nil)
	if err != nil {
		return ""
	}
	var cut, plain []string
	same := true
	for k, r := range even {
		cut = append(cut, strconv.Itoa(p.StageSteps[k][1]-p.StageSteps[k][0]))
		plain = append(plain, strconv.Itoa(r.Len()))
		same = same && p.StageSteps[k] == [2]int{r.Start, r.End}
	}
	if same {
		return ""
	}
	return fmt.Sprintf("steps cut %s by computed work (a reusing step computes %.3g of a full one; by steps: %s)",
		strings.Join(cut, "+"), c.Cache.cut(), strings.Join(plain, "+"))
}

// make1 returns n ones.
func make1(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// cutNote tells the engine's flags that make a pipeline's step cut when the decode (or the
// conditioning) moves it off the cut by steps alone: generate and bench cut by steps unless
// --decode-steps (and generate's --condition-steps) give those costs in steps
// (pipeline.StageExtras, the same cut). A --finish-ms cost has no engine flag: no note.
func cutNote(req Request, p Prediction) string {
	c := req.Costs
	if p.PP < 2 || p.StepMS <= 0 || c.FinishMS != 0 {
		return ""
	}
	steps := stepWork(req)
	plain, err := pipeline.CutStages(steps, p.PP, c.Weights.ExpertSwitches, nil)
	if err != nil {
		return ""
	}
	same := true
	for k, r := range plain {
		same = same && p.StageSteps[k] == [2]int{r.Start, r.End}
	}
	if same {
		return ""
	}
	var flags []string
	if decode := float64(c.DecodeParts) * c.DecodePartMS; decode > 0 {
		flags = append(flags, fmt.Sprintf("--decode-steps %.2f", decode/p.StepMS))
	}
	around, who := "the decode", "generate and bench cut"
	if c.PrepareMS > 0 {
		// Only generate conditions (bench's conditioning is random): a flag of its own.
		flags = append(flags, fmt.Sprintf("--condition-steps %.2f", c.PrepareMS/p.StepMS))
		around, who = "the conditioning and the decode", "generate cuts"
		if len(flags) == 1 {
			around = "the conditioning"
		}
	}
	var cut, even []string
	for k, r := range plain {
		cut = append(cut, strconv.Itoa(p.StageSteps[k][1]-p.StageSteps[k][0]))
		even = append(even, strconv.Itoa(r.Len()))
	}
	return fmt.Sprintf("steps cut %s around %s: %s so with %s (by steps alone: %s)",
		strings.Join(cut, "+"), around, who, strings.Join(flags, " "), strings.Join(even, "+"))
}

// decodeNote says whether spreading the decode over a pipeline's stages changes its
// throughput: a pipeline that decodes on the last stage is told the rate spreading over
// every stage would give when it is higher; a spread that gains nothing is said so.
func decodeNote(req Request, p Prediction) string {
	c := req.Costs
	if p.PP < 2 || c.DecodeParts < 1 || c.DecodePartMS <= 0 {
		return ""
	}
	alt := req.Workload
	if p.DecodeRanks == 1 {
		alt.DecodeRanks = p.PP
	} else {
		alt.DecodeRanks = 1
	}
	q, err := Predict(alt, p.Mesh, c, req.MemoryPerDevice)
	if err != nil {
		return ""
	}
	if p.SteadyThroughputPerS <= 0 || q.SteadyThroughputPerS <= 0 {
		return ""
	}
	decode := float64(c.DecodeParts) * c.DecodePartMS
	cmp := cmpFloat(q.SteadyThroughputPerS, p.SteadyThroughputPerS) // > 0: the other way is faster
	switch {
	case p.DecodeRanks == 1 && cmp > 0:
		return fmt.Sprintf("decode bound (%s ms per sample on the last stage): --decode-ranks %d spreads its %d parts over the stages, %s samples/s instead of %s (%.2fx)",
			ms(decode), p.PP, c.DecodeParts, rate3(q.SteadyThroughputPerS), rate3(p.SteadyThroughputPerS), q.SteadyThroughputPerS/p.SteadyThroughputPerS)
	case p.DecodeRanks > 1 && cmp == 0:
		return fmt.Sprintf("decode spread over %d stages gains nothing (%s samples/s either way): the stages are bound by denoising", p.DecodeRanks, rate3(p.SteadyThroughputPerS))
	case p.DecodeRanks > 1 && cmp > 0:
		return fmt.Sprintf("decode spread over %d stages loses: %s samples/s, %s on the last stage alone (the step cut balances the decode better)", p.DecodeRanks, rate3(p.SteadyThroughputPerS), rate3(q.SteadyThroughputPerS))
	case p.DecodeRanks > 1:
		return fmt.Sprintf("decode spread over %d stages: %s samples/s instead of %s on the last stage alone (%.2fx)", p.DecodeRanks, rate3(p.SteadyThroughputPerS), rate3(q.SteadyThroughputPerS), p.SteadyThroughputPerS/q.SteadyThroughputPerS)
	}
	return ""
}

// argmax returns the index of the first largest value.
func argmax(xs []int64) int {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// verdictNotes writes the plain-words summary, every number taken from the predictions.
func verdictNotes(req Request, res Result, all []Prediction) []string {
	var out []string
	v := res.Verdict
	if best, ok := res.Best(); ok {
		out = append(out, fmt.Sprintf("best for %s: %v: first sample %s ms, %s samples/s, %s weights per device",
			res.Goal, best.Mesh, ms(best.FirstSampleMS), rate(best.SteadyThroughputPerS), Bytes(best.WeightBytesPerDevice)))
	} else {
		small := all[0]
		for _, p := range all {
			if p.MemoryBytesPerDevice < small.MemoryBytesPerDevice {
				small = p
			}
		}
		out = append(out, fmt.Sprintf("no mesh fits in %s per device: the smallest, %v, needs %s", Bytes(req.MemoryPerDevice), small.Mesh, Bytes(small.MemoryBytesPerDevice)))
	}
	if best, ok := res.Best(); ok {
		if n := shortJobNote(req, best); n != "" {
			out = append(out, n)
		}
	}
	if v.DP != nil && v.PP != nil {
		dp, pp := v.DP, v.PP
		fit := func(p *Prediction) string {
			if p.Feasible {
				return ""
			}
			return " (does not fit)"
		}
		switch v.Throughput {
		case RelEqual:
			out = append(out, fmt.Sprintf("throughput: data parallelism equals the step pipeline: dp=%d %s samples/s%s vs pp=%d %s samples/s%s; with the full model on every device a step pipeline can at best match dp",
				dp.DP, rate(dp.SteadyThroughputPerS), fit(dp), pp.PP, rate(pp.SteadyThroughputPerS), fit(pp)))
		case RelDPBetter:
			why := ""
			switch {
			case pp.PP > 1 && pp.HandOffMS > maxOf(pp.StageMS):
				why = fmt.Sprintf(": the pipeline is bound by its %s ms hand-off", ms(pp.HandOffMS))
			case pp.IntervalMS*float64(pp.PP) > sum(pp.StageMS)*(1+EqualPercent/100):
				why = fmt.Sprintf(": the pipeline's slowest stage takes %s ms while a dp replica spends %s ms per sample over %d replicas (%s ms)",
					ms(pp.IntervalMS), ms(dp.IntervalMS), dp.DP, ms(dp.IntervalMS/float64(dp.DP)))
			}
			out = append(out, fmt.Sprintf("throughput: data parallelism beats the step pipeline: dp=%d %s samples/s%s vs pp=%d %s samples/s%s (%s%% more)%s",
				dp.DP, rate(dp.SteadyThroughputPerS), fit(dp), pp.PP, rate(pp.SteadyThroughputPerS), fit(pp), pct(dp.SteadyThroughputPerS/pp.SteadyThroughputPerS-1), why))
		case RelPPBetter:
			why := ""
			if dp.ActiveReplicas < dp.DP {
				why = fmt.Sprintf(": %d items keep only %d of %d replicas busy", req.Workload.Items(), dp.ActiveReplicas, dp.DP)
			}
			out = append(out, fmt.Sprintf("throughput: the step pipeline beats data parallelism: pp=%d %s samples/s%s vs dp=%d %s samples/s%s%s",
				pp.PP, rate(pp.SteadyThroughputPerS), fit(pp), dp.DP, rate(dp.SteadyThroughputPerS), fit(dp), why))
		}
		lat := fmt.Sprintf("first sample: dp=%d %s ms, pp=%d %s ms", dp.DP, ms(dp.FirstSampleMS), pp.PP, ms(pp.FirstSampleMS))
		switch v.Latency {
		case RelEqual:
			lat += ": equal; the pipeline does not shorten one sample"
		case RelDPBetter:
			lat += fmt.Sprintf(": dp is faster; the pipeline adds %d hand-offs of %s ms and does not shorten one sample", pp.PP-1, ms(pp.HandOffMS))
		case RelPPBetter:
			lat += ": the pipeline is faster"
		}
		out = append(out, lat)
		switch {
		case pp.Feasible && !dp.Feasible && len(req.Costs.Weights.Experts) > 1:
			out = append(out, fmt.Sprintf("memory: the pipeline is the answer: a dp replica holds all %d experts, %s per device > limit %s, while pp=%d cuts at the expert switch and holds at most %s (one expert per stage)",
				len(req.Costs.Weights.Experts), Bytes(dp.MemoryBytesPerDevice), Bytes(req.MemoryPerDevice), pp.PP, Bytes(pp.MemoryBytesPerDevice)))
		case pp.Feasible && !dp.Feasible:
			out = append(out, fmt.Sprintf("memory: the pipeline wins here: a dp replica needs %s per device (denoiser, image and VAE encoders, VAE decoder) > limit %s, while pp=%d needs at most %s (only stage 0 holds the encoders, only the last stage the decoder)",
				Bytes(dp.MemoryBytesPerDevice), Bytes(req.MemoryPerDevice), pp.PP, Bytes(pp.MemoryBytesPerDevice)))
		case !pp.Feasible && !dp.Feasible:
			out = append(out, fmt.Sprintf("memory: neither fits in %s per device: dp=%d needs %s, pp=%d %s (stage %d holds %s)",
				Bytes(req.MemoryPerDevice), dp.DP, Bytes(dp.MemoryBytesPerDevice), pp.PP, Bytes(pp.MemoryBytesPerDevice),
				argmax(pp.StageWeightBytes), Bytes(pp.WeightBytesPerDevice)))
		case pp.WeightBytesPerDevice < dp.WeightBytesPerDevice:
			out = append(out, fmt.Sprintf("memory: pp=%d holds at most %s of weights per device, dp=%d %s; this matters only when memory is tight (limit: %s)",
				pp.PP, Bytes(pp.WeightBytesPerDevice), dp.DP, Bytes(dp.WeightBytesPerDevice), limit(req.MemoryPerDevice)))
		case req.Costs.Weights.Total() == 0:
			out = append(out, "memory: the model holds no weights, so memory favours no mesh")
		}
	}
	if len(v.PipelineOnlyFits) > 0 {
		names := make([]string, len(v.PipelineOnlyFits))
		for i, m := range v.PipelineOnlyFits {
			names[i] = m.String()
		}
		out = append(out, "fit only thanks to the pipeline split (their pp=1 counterparts do not): "+strings.Join(names, "; "))
	}
	if fastest, ok := lowest(all); ok && (v.DP == nil || fastest.Mesh != v.DP.Mesh) {
		one, err := Predict(req.Workload, Mesh{1, 1, 1, 1}, req.Costs, 0)
		if err == nil && one.FirstSampleMS > 0 {
			out = append(out, fmt.Sprintf("lowest first-sample latency: %v at %s ms, %sx of one device's %s ms",
				fastest.Mesh, ms(fastest.FirstSampleMS), strconv.FormatFloat(fastest.FirstSampleMS/one.FirstSampleMS, 'f', 2, 64), ms(one.FirstSampleMS)))
		}
	}
	return out
}

// lowest returns the feasible prediction with the lowest first-sample latency.
func lowest(all []Prediction) (Prediction, bool) {
	var best Prediction
	ok := false
	for _, p := range all {
		if p.Feasible && (!ok || Compare(GoalLatency, p, best) < 0) {
			best, ok = p, true
		}
	}
	return best, ok
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func rate(v float64) string {
	// One decimal, and three significant digits below 10: a slow model's 0.0928 samples/s
	// is not "0.1" (nor "0.0").
	d := 1
	if a := math.Abs(v); a > 0 && a < 10 {
		d = max(1, 2-int(math.Floor(math.Log10(a))))
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// rate3 is a rate to three significant digits (decode-bound pipelines run below one
// sample a second).
func rate3(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
func pct(v float64) string   { return strconv.FormatFloat(100*v, 'f', 1, 64) }

func limit(b int64) string {
	if b <= 0 {
		return "none"
	}
	return Bytes(b)
}

// Bytes formats a byte count with a binary unit: "512 B", "1.50 GiB".
func Bytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit && exp < 5; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// FewSteps is the step count up to which the planner calls a job short: a step- and
// CFG-distilled LoRA's 4 to 8 steps.
const FewSteps = 8

// shortJobNote says what a short job (a distilled LoRA's 4 unguided steps) leaves a mesh to
// split, and what the plan picks instead; "" for a job of more steps.
func shortJobNote(req Request, best Prediction) string {
	w := req.Workload
	short := w.Steps <= FewSteps && w.Steps < 2*req.Devices
	if !short {
		return ""
	}
	var lacks []string
	if !w.Guided {
		lacks = append(lacks, "no CFG branch to split (cfg 2 splits the two halves of a guided step)")
	}
	lacks = append(lacks, fmt.Sprintf("only %d steps to pipeline (at most %d stages, and a sample still crosses every hand-off between them)", w.Steps, w.Steps))
	var picks []string
	if best.CP > 1 {
		picks = append(picks, fmt.Sprintf("cp=%d splits each sample's frames, shortening every step", best.CP))
	}
	if best.DP > 1 {
		picks = append(picks, fmt.Sprintf("dp=%d runs %d samples side by side", best.DP, best.DP))
	}
	if best.PP > 1 {
		picks = append(picks, fmt.Sprintf("pp=%d pipelines the steps", best.PP))
	}
	if best.CFG > 1 {
		picks = append(picks, fmt.Sprintf("cfg=%d splits the guidance halves", best.CFG))
	}
	if len(picks) == 0 {
		picks = append(picks, "one device")
	}
	return fmt.Sprintf("a %d-step %s job has %s; for %s the plan picks %v: %s",
		w.Steps, map[bool]string{true: "guided", false: "unguided"}[w.Guided], strings.Join(lacks, " and "), req.Goal, best.Mesh, strings.Join(picks, ", "))
}
