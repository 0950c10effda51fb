package train

import (
	"bytes"
	stdcontext "context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/tensor"
)

// ErrDiverged is returned when a rank's training state differs from rank 0's.
var ErrDiverged = errors.New("train: ranks diverged")

// Checkpoint metadata keys of the data-parallel loop.
const (
	metaStateHash  = "state_fnv64" // stateHash of the saved variables
	metaWorld      = "world_size"  // ranks that agreed on the state when it was written
	metaDataCursor = "data_cursor" // the step whose batch comes next
	metaRNG        = "rng"         // how every random draw is keyed (no other RNG state exists)
	metaBatch      = "batch"       // examples per step
	metaMicroBatch = "micro_batch" // examples per gradient computation
	rngKeying      = "pcg(seed*1000003+phase, step), draws in example order; no other state"
)

// RankTimes is where one rank's time went during a run (seconds, summed over its steps).
type RankTimes struct {
	Rank int `json:"rank"`
	// Compute is the microbatch gradients, Data (a part of Compute) building their inputs.
	Compute float64 `json:"compute_s"`
	Data    float64 `json:"data_s"`
	// Wait is the time spent waiting for the slowest rank before the exchange, AllReduce
	// the exchange of the gradients and their sum.
	Wait      float64 `json:"wait_s"`
	AllReduce float64 `json:"allreduce_s"`
	// Apply is the optimizer and the EMA; Other the state checks, checkpoints and log.
	Apply float64 `json:"apply_s"`
	Other float64 `json:"other_s"`
	// CPU is the process's CPU time (user + system) over the steps.
	CPU float64 `json:"cpu_s"`
}

// microBatch is the examples per gradient computation.
func (o Options) microBatch() int {
	if o.MicroBatch > 0 {
		return o.MicroBatch
	}
	return 1
}

// stepVector is one rank's contribution to a step's exchange: its nodes of the summation
// tree, each a gradient followed by the loss and metrics, then one stop flag.
func stepVector(own [][]float32, stop bool) *tensor.Dense {
	n := 1
	for _, v := range own {
		n += len(v)
	}
	out := make([]float32, 0, n)
	for _, v := range own {
		out = append(out, v...)
	}
	flag := float32(0)
	if stop {
		flag = 1
	}
	return &tensor.Dense{Shape: []int{n}, Data: append(out, flag)}
}

// loop trains ph from its step to o.Steps as rank peers.Rank() of peers.Size(): every rank
// computes the gradients of its share of each step's microbatches, the ranks exchange them
// and every rank sums them along the same tree, then applies the same update. Rank 0
// writes the loss log, the progress and the checkpoints.
func loop(ctx stdcontext.Context, o Options, ph phase, s *stepper, peers Peers) (Result, error) {
	start := time.Now()
	// ctx ending (Ctrl-C) stops the run after the current step on every rank; the
	// collectives that agree on it must still run, so they do not take ctx's cancellation.
	cctx := stdcontext.WithoutCancel(ctx)
	rank, size := peers.Rank(), peers.Size()
	lead := rank == 0
	res := Result{Phase: o.Phase, FromStep: ph.step(), Step: ph.step(), FirstLoss: math.NaN(), LastLoss: math.NaN(), Ranks: size,
		FirstHeldOut: math.NaN(), LastHeldOut: math.NaN()}
	m := o.microBatch()
	micro := o.Batch / m
	if o.Batch%m != 0 || micro%size != 0 {
		return res, fmt.Errorf("%w: --batch %d is not a whole number of microbatches of %d for each of %d ranks", ErrOptions, o.Batch, m, size)
	}
	shares := make([][]span, size)
	for r := range shares {
		shares[r] = ownSpans(r*micro/size, (r+1)*micro/size, micro)
	}
	var times RankTimes
	times.Rank = rank
	cpu0 := cpuSeconds()

	var enc *json.Encoder // one write per line
	if lead {
		f, err := openLossLog(o, ph.step())
		if err != nil {
			return res, err
		}
		defer f.Close()
		enc = json.NewEncoder(f)
	}
	// check compares every rank's state with rank 0's and returns its hash.
	check := func(step int) (uint64, error) {
		h, err := stateHash(ph.ctx())
		if err != nil {
			return 0, err
		}
		if size == 1 {
			return h, nil
		}
		parts, err := peers.AllGather(cctx, hashTensor(h))
		if err != nil {
			return 0, fmt.Errorf("train: state check at step %d: %w", step, err)
		}
		want := tensorHash(parts[0])
		var bad []int
		for r, p := range parts {
			if tensorHash(p) != want {
				bad = append(bad, r)
			}
		}
		if len(bad) > 0 {
			return 0, fmt.Errorf("%w at step %d: the state of rank(s) %v differs from rank 0's (hash %016x)", ErrDiverged, step, bad, want)
		}
		return h, nil
	}
	save := func(step int) error {
		t0 := time.Now()
		defer func() { times.Other += time.Since(t0).Seconds() }()
		h, err := check(step)
		if err != nil {
			return err
		}
		if lead {
			md := ph.meta()
			md["phase"], md["step"], md["seed"] = o.Phase, strconv.Itoa(step), strconv.FormatUint(o.Seed, 10)
			md[metaDataRule] = o.Rule.String()
			md[metaStateHash] = strconv.FormatUint(h, 16)
			md[metaWorld] = strconv.Itoa(size)
			md[metaDataCursor] = strconv.Itoa(step)
			md[metaRNG] = rngKeying
			md[metaBatch], md[metaMicroBatch] = strconv.Itoa(o.Batch), strconv.Itoa(m)
			if o.EMA > 0 {
				md[metaEMADecay] = strconv.FormatFloat(o.EMA, 'g', -1, 64)
			}
			if err := ph.flush(); err != nil {
				return err
			}
			if err := saveContext(StatePath(o.Dir, o.Phase), ph.ctx(), md); err != nil {
				return err
			}
		}
		// The others wait until rank 0 has committed the file: after this barrier every
		// rank knows checkpoint `step` exists, with the state they all hold.
		if err := peers.Barrier(cctx); err != nil {
			return fmt.Errorf("train: checkpoint at step %d: %w", step, err)
		}
		return nil
	}

	if size > 1 {
		if _, err := check(ph.step()); err != nil {
			return res, err
		}
	}
	// heldOut is the held-out loss (rank 0; NaN elsewhere or without one): the mean over
	// o.HeldOut examples, evaluated in microbatches.
	hp, hasHeldOut := ph.(heldOutPhase)
	hasHeldOut = hasHeldOut && o.HeldOut > 0 && lead
	heldOut := func() (float64, error) {
		t0 := time.Now()
		defer func() { times.Other += time.Since(t0).Seconds() }()
		sum := 0.0
		for lo := 0; lo < o.HeldOut; lo += m {
			hi := min(lo+m, o.HeldOut)
			in, err := hp.heldOut(lo, hi)
			if err != nil {
				return 0, err
			}
			v, err := s.Eval(in...)
			if err != nil {
				return 0, fmt.Errorf("train: held-out loss: %w", err)
			}
			sum += v[0] * float64(hi-lo)
		}
		return sum / float64(o.HeldOut), nil
	}
	if hasHeldOut {
		var err error
		if res.FirstHeldOut, err = heldOut(); err != nil {
			return res, err
		}
		res.LastHeldOut = res.FirstHeldOut
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "train %s step %d: held-out loss %.5f (%d clips)\n", o.Phase, ph.step(), res.FirstHeldOut, o.HeldOut)
		}
	}

	each := max(o.ProgressEach, 1)
	var emaStep float64
	var firstStepS float64
	scale := float32(1 / float64(micro))
	for k := ph.step(); k < o.Steps; k++ {
		t0 := time.Now()
		lr := LRAt(o, k)
		if o.LRFinal > 0 {
			if err := s.SetLR(lr); err != nil {
				return res, err
			}
		}
		// This rank's nodes of the summation tree, from its microbatches.
		leaf := func(i int) ([]float32, error) {
			d0 := time.Now()
			in, err := ph.examples(k, i*m, (i+1)*m)
			if err != nil {
				return nil, err
			}
			times.Data += time.Since(d0).Seconds()
			v, err := s.Grad(in...)
			if err != nil {
				return nil, fmt.Errorf("train: %s step %d, microbatch %d: %w", o.Phase, k+1, i, err)
			}
			return v, nil
		}
		own := make([][]float32, len(shares[rank]))
		for j, sp := range shares[rank] {
			v, err := sumSpan(sp, leaf)
			if err != nil {
				return res, err
			}
			own[j] = v
		}
		t1 := time.Now()
		times.Compute += t1.Sub(t0).Seconds()
		stop := o.MaxDuration > 0 && time.Since(start) > o.MaxDuration || ctx.Err() != nil
		var total []float32
		if size == 1 {
			total = own[0] // the whole tree
		} else {
			if err := peers.Barrier(cctx); err != nil {
				return res, fmt.Errorf("train: %s step %d: %w", o.Phase, k+1, err)
			}
			t2 := time.Now()
			times.Wait += t2.Sub(t1).Seconds()
			parts, err := peers.AllGather(cctx, stepVector(own, stop))
			if err != nil {
				return res, fmt.Errorf("train: %s step %d: gradient exchange: %w", o.Phase, k+1, err)
			}
			known := map[span][]float32{}
			width := len(own[0])
			for r, p := range parts {
				if len(p.Data) != len(shares[r])*width+1 {
					return res, fmt.Errorf("train: %s step %d: rank %d sent %d values, want %d", o.Phase, k+1, r, len(p.Data), len(shares[r])*width+1)
				}
				for j, sp := range shares[r] {
					known[sp] = p.Data[j*width : (j+1)*width]
				}
				stop = stop || p.Data[len(p.Data)-1] != 0
			}
			if total, err = sumTree(micro, known); err != nil {
				return res, fmt.Errorf("train: %s step %d: %w", o.Phase, k+1, err)
			}
			times.AllReduce += time.Since(t2).Seconds()
		}
		t3 := time.Now()
		for i := range total {
			total[i] *= scale
		}
		vals := total[s.params:]
		if loss := float64(vals[0]); math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("train: %s step %d: loss is %v", o.Phase, k+1, loss)
		}
		if err := s.Apply(total[:s.params]); err != nil {
			return res, fmt.Errorf("train: %s step %d: %w", o.Phase, k+1, err)
		}
		t4 := time.Now()
		times.Apply += t4.Sub(t3).Seconds()
		peers.Progress(t4.Sub(t0))
		dt := t4.Sub(t0).Seconds()
		if k == ph.step() {
			firstStepS = dt
		}
		if emaStep == 0 {
			emaStep = dt
		} else {
			emaStep = 0.9*emaStep + 0.1*dt
		}
		line := LogLine{Phase: o.Phase, Step: k + 1, Loss: float64(vals[0]), LR: lr, StepS: dt, ElapsedS: time.Since(start).Seconds()}
		if len(vals) > 1 {
			line.MSE = float64(vals[1])
		}
		if hasHeldOut && (o.EvalEvery > 0 && (k+1)%o.EvalEvery == 0 || k+1 == o.Steps || stop) {
			v, err := heldOut()
			if err != nil {
				return res, err
			}
			line.HeldOut = v
			res.LastHeldOut = line.HeldOut
		}
		if lead {
			if err := enc.Encode(line); err != nil {
				return res, fmt.Errorf("train: loss log: %w", err)
			}
		}
		if math.IsNaN(res.FirstLoss) {
			res.FirstLoss = line.Loss
		}
		res.LastLoss, res.Step = line.Loss, k+1
		if lead {
			progress(o, each, line, emaStep)
		}
		if size > 1 && o.CheckEvery > 0 && (k+1)%o.CheckEvery == 0 && (o.CheckpointEvery == 0 || (k+1)%o.CheckpointEvery != 0) {
			if _, err := check(k + 1); err != nil {
				return res, err
			}
		}
		times.Other += time.Since(t4).Seconds()
		if o.CheckpointEvery > 0 && (k+1)%o.CheckpointEvery == 0 {
			if err := save(k + 1); err != nil {
				return res, err
			}
		}
		if stop {
			break
		}
	}
	if lead && o.Terminal && o.Progress != nil {
		fmt.Fprintln(o.Progress)
	}
	res.Wall = time.Since(start)
	res.Steady = res.Wall - time.Duration(firstStepS*float64(time.Second))
	times.CPU = cpuSeconds() - cpu0
	if err := save(res.Step); err != nil {
		return res, err
	}
	all, err := gatherTimes(cctx, peers, times)
	if err != nil {
		return res, err
	}
	res.Times = all
	return res, nil
}

// heldOutPhase is a phase with a held-out loss.
type heldOutPhase interface {
	// heldOut returns the inputs of held-out examples [lo, hi), the same at every call.
	heldOut(lo, hi int) ([]*tensor.Dense, error)
}

// gatherTimes collects every rank's times (in rank order) on every rank.
func gatherTimes(ctx stdcontext.Context, peers Peers, t RankTimes) ([]RankTimes, error) {
	v := []float32{float32(t.Compute), float32(t.Data), float32(t.Wait), float32(t.AllReduce), float32(t.Apply), float32(t.Other), float32(t.CPU)}
	parts, err := peers.AllGather(ctx, &tensor.Dense{Shape: []int{len(v)}, Data: v})
	if err != nil {
		return nil, fmt.Errorf("train: gather the ranks' times: %w", err)
	}
	out := make([]RankTimes, len(parts))
	for r, p := range parts {
		if len(p.Data) != len(v) {
			return nil, fmt.Errorf("train: rank %d sent %d times, want %d", r, len(p.Data), len(v))
		}
		d := p.Data
		out[r] = RankTimes{Rank: r, Compute: float64(d[0]), Data: float64(d[1]), Wait: float64(d[2]), AllReduce: float64(d[3]),
			Apply: float64(d[4]), Other: float64(d[5]), CPU: float64(d[6])}
	}
	return out, nil
}

// openLossLog opens the run folder's loss log for appending after dropping the lines of
// o.Phase past step from (a run killed after its last checkpoint logged steps that the
// resumed run computes again), so the log holds every step once.
func openLossLog(o Options, from int) (*os.File, error) {
	path := LossLogPath(o.Dir)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("train: loss log: %w", err)
	}
	var kept bytes.Buffer
	dropped := false
	for _, ln := range bytes.SplitAfter(old, []byte("\n")) {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		var l LogLine
		if json.Unmarshal(ln, &l) == nil && l.Phase == o.Phase && l.Step > from {
			dropped = true
			continue
		}
		if !bytes.HasSuffix(ln, []byte("\n")) {
			dropped = true // a torn last line
			continue
		}
		kept.Write(ln)
	}
	if dropped {
		if err := atomicfile.Write(path, atomicfile.Options{}, func(w io.Writer) error {
			_, err := w.Write(kept.Bytes())
			return err
		}); err != nil {
			return nil, fmt.Errorf("train: loss log: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("train: loss log: %w", err)
	}
	return f, nil
}

// stateHash is the FNV-1a hash of every variable of ctx but the learning rate (which each
// step sets from the schedule): names, shapes and bits, in name order.
func stateHash(ctx *context.Context) (uint64, error) {
	type entry struct {
		name string
		v    *context.Variable
	}
	var vars []entry
	for v := range ctx.IterVariables() {
		if v.Name() == optimizers.ParamLearningRate {
			continue
		}
		vars = append(vars, entry{v.Scope() + keySep + v.Name(), v})
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].name < vars[j].name })
	h := fnv.New64a()
	var b [8]byte
	for _, e := range vars {
		h.Write([]byte(e.name))
		val, err := e.v.Value()
		if err != nil {
			return 0, fmt.Errorf("train: hash %s: %w", e.name, err)
		}
		for _, d := range val.Shape().Dimensions {
			binary.LittleEndian.PutUint64(b[:], uint64(d))
			h.Write(b[:])
		}
		switch val.DType() {
		case dtypes.Float32:
			data, err := tensors.CopyFlatData[float32](val)
			if err != nil {
				return 0, err
			}
			buf := make([]byte, 4*len(data))
			for i, f := range data {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(f))
			}
			h.Write(buf)
		case dtypes.Int64:
			data, err := tensors.CopyFlatData[int64](val)
			if err != nil {
				return 0, err
			}
			for _, x := range data {
				binary.LittleEndian.PutUint64(b[:], uint64(x))
				h.Write(b[:])
			}
		default:
			return 0, fmt.Errorf("train: hash %s: dtype %s", e.name, val.DType())
		}
	}
	return h.Sum64(), nil
}

// hashTensor carries a 64-bit hash as four 16-bit integers, each exact in a float32.
func hashTensor(h uint64) *tensor.Dense {
	d := make([]float32, 4)
	for i := range d {
		d[i] = float32(uint16(h >> (16 * i)))
	}
	return &tensor.Dense{Shape: []int{4}, Data: d}
}

func tensorHash(t *tensor.Dense) uint64 {
	var h uint64
	for i, v := range t.Data {
		h |= uint64(uint16(v)) << (16 * i)
	}
	return h
}

// progress draws the bar (terminal) or a log line every each steps: loss, learning rate,
// step rate (and clips per second), elapsed time and the time left at the current rate.
func progress(o Options, each int, l LogLine, stepS float64) {
	if o.Progress == nil {
		return
	}
	eta := time.Duration(float64(o.Steps-l.Step) * stepS * float64(time.Second)).Round(time.Second)
	rate := 0.0
	if stepS > 0 {
		rate = 1 / stepS
	}
	if o.Terminal {
		const width = 30
		done := width * l.Step / max(o.Steps, 1)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = '.'
			if i < done {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(o.Progress, "\r%s [%s] %d/%d loss %.4f %.2f steps/s eta %s   ", o.Phase, bar, l.Step, o.Steps, l.Loss, rate, eta)
		return
	}
	if l.Step%each == 0 || l.Step == o.Steps || l.HeldOut != 0 {
		metric := ""
		if o.Phase == PhaseVAE {
			metric = fmt.Sprintf(" mse %.5f", l.MSE)
		}
		if l.HeldOut != 0 {
			metric += fmt.Sprintf(" held-out %.5f", l.HeldOut)
		}
		fmt.Fprintf(o.Progress, "train %s step %d/%d loss %.5f%s lr %.3g %.2f steps/s %.1f clips/s elapsed %.0fs eta %s\n",
			o.Phase, l.Step, o.Steps, l.Loss, metric, l.LR, rate, rate*float64(o.Batch), l.ElapsedS, eta)
	}
}
