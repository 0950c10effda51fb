package train

import (
	stdcontext "context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// heldOutPhase is a phase with a held-out loss.
type heldOutPhase interface {
	// heldOut returns the inputs of held-out examples [lo, hi), the same at every call.
	heldOut(lo, hi int) ([]*tensor.Dense, error)
}

// run is one rank's training run between its parts: a step (step), the held-out loss
// (evaluate), the state check and the checkpoint (check, checkpoint) and the loss log and
// progress (record).
type run struct {
	o     Options
	ph    phase
	s     *stepper
	peers Peers
	// ctx ending (Ctrl-C) stops the run after the current step on every rank; the
	// collectives that agree on it must still run, so they take cctx, which is never
	// cancelled.
	ctx, cctx  stdcontext.Context
	start      time.Time
	rank, size int
	lead       bool
	m, micro   int      // examples per microbatch, microbatches per step
	shares     [][]span // each rank's nodes of the summation tree
	times      RankTimes
	enc        *json.Encoder // rank 0's loss log, one write per line
	heldOut    heldOutPhase  // nil: no held-out loss on this rank
	res        Result

	emaStep, firstStepS float64
}

// loop trains ph from its step to o.Steps as rank peers.Rank() of peers.Size(): every rank
// computes the gradients of its share of each step's microbatches, the ranks exchange them
// and every rank sums them along the same tree, then applies the same update. Rank 0
// writes the loss log, the progress and the checkpoints.
func loop(ctx stdcontext.Context, o Options, ph phase, s *stepper, peers Peers) (Result, error) {
	r := &run{o: o, ph: ph, s: s, peers: peers, ctx: ctx, cctx: stdcontext.WithoutCancel(ctx), start: time.Now(),
		rank: peers.Rank(), size: peers.Size()}
	r.lead = r.rank == 0
	r.res = Result{Phase: o.Phase, FromStep: ph.step(), Step: ph.step(), FirstLoss: math.NaN(), LastLoss: math.NaN(), Ranks: r.size,
		FirstHeldOut: math.NaN(), LastHeldOut: math.NaN()}
	r.m = o.microBatch()
	r.micro = o.Batch / r.m
	if o.Batch%r.m != 0 || r.micro%r.size != 0 {
		return r.res, fmt.Errorf("%w: --batch %d is not a whole number of microbatches of %d for each of %d ranks", ErrOptions, o.Batch, r.m, r.size)
	}
	r.shares = make([][]span, r.size)
	for k := range r.shares {
		r.shares[k] = ownSpans(k*r.micro/r.size, (k+1)*r.micro/r.size, r.micro)
	}
	r.times.Rank = r.rank
	cpu0 := cpuSeconds()
	if r.lead {
		f, err := openLossLog(o, ph.step())
		if err != nil {
			return r.res, err
		}
		defer f.Close()
		r.enc = json.NewEncoder(f)
	}
	if r.size > 1 {
		if _, err := r.check(ph.step()); err != nil {
			return r.res, err
		}
	}
	if hp, ok := ph.(heldOutPhase); ok && o.HeldOut > 0 && r.lead {
		r.heldOut = hp
		v, err := r.evaluate()
		if err != nil {
			return r.res, err
		}
		r.res.FirstHeldOut, r.res.LastHeldOut = v, v
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "train %s step %d: held-out loss %.5f (%d clips)\n", o.Phase, ph.step(), v, o.HeldOut)
		}
	}

	for k := ph.step(); k < o.Steps; k++ {
		line, stop, err := r.step(k)
		if err != nil {
			return r.res, err
		}
		t4 := time.Now()
		if r.heldOut != nil && (o.EvalEvery > 0 && (k+1)%o.EvalEvery == 0 || k+1 == o.Steps || stop) {
			if line.HeldOut, err = r.evaluate(); err != nil {
				return r.res, err
			}
			r.res.LastHeldOut = line.HeldOut
		}
		if err := r.record(line); err != nil {
			return r.res, err
		}
		if r.size > 1 && o.CheckEvery > 0 && (k+1)%o.CheckEvery == 0 && (o.CheckpointEvery == 0 || (k+1)%o.CheckpointEvery != 0) {
			if _, err := r.check(k + 1); err != nil {
				return r.res, err
			}
		}
		r.times.Other += time.Since(t4).Seconds()
		if o.CheckpointEvery > 0 && (k+1)%o.CheckpointEvery == 0 {
			if err := r.checkpoint(k + 1); err != nil {
				return r.res, err
			}
		}
		if stop {
			break
		}
	}
	if r.lead && o.Terminal && o.Progress != nil {
		fmt.Fprintln(o.Progress)
	}
	r.res.Wall = time.Since(r.start)
	r.res.Steady = r.res.Wall - time.Duration(r.firstStepS*float64(time.Second))
	r.times.CPU = cpuSeconds() - cpu0
	if err := r.checkpoint(r.res.Step); err != nil {
		return r.res, err
	}
	all, err := gatherTimes(r.cctx, peers, r.times)
	if err != nil {
		return r.res, err
	}
	r.res.Times = all
	return r.res, nil
}

// step takes training step k: this rank's microbatch gradients, summed with the other
// ranks' along the tree, then the update. It returns the step's log line (without the
// held-out loss) and whether the run stops after it (--max-duration, Ctrl-C on any rank).
func (r *run) step(k int) (LogLine, bool, error) {
	o, s := r.o, r.s
	t0 := time.Now()
	lr := LRAt(o, k)
	if o.LRFinal > 0 {
		if err := s.SetLR(lr); err != nil {
			return LogLine{}, false, err
		}
	}
	// This rank's nodes of the summation tree, from its microbatches.
	leaf := func(i int) ([]float32, error) {
		d0 := time.Now()
		in, err := r.ph.examples(k, i*r.m, (i+1)*r.m)
		if err != nil {
			return nil, err
		}
		r.times.Data += time.Since(d0).Seconds()
		v, err := s.Grad(in...)
		if err != nil {
			return nil, fmt.Errorf("train: %s step %d, microbatch %d: %w", o.Phase, k+1, i, err)
		}
		return v, nil
	}
	own := make([][]float32, len(r.shares[r.rank]))
	for j, sp := range r.shares[r.rank] {
		v, err := sumSpan(sp, leaf)
		if err != nil {
			return LogLine{}, false, err
		}
		own[j] = v
	}
	t1 := time.Now()
	r.times.Compute += t1.Sub(t0).Seconds()
	stop := o.MaxDuration > 0 && time.Since(r.start) > o.MaxDuration || r.ctx.Err() != nil
	total, stop, err := r.exchange(k, own, stop, t1)
	if err != nil {
		return LogLine{}, false, err
	}
	t3 := time.Now()
	scale := float32(1 / float64(r.micro))
	for i := range total {
		total[i] *= scale
	}
	vals := total[s.params:]
	if loss := float64(vals[0]); math.IsNaN(loss) || math.IsInf(loss, 0) {
		return LogLine{}, false, fmt.Errorf("train: %s step %d: loss is %v", o.Phase, k+1, loss)
	}
	if err := s.Apply(total[:s.params]); err != nil {
		return LogLine{}, false, fmt.Errorf("train: %s step %d: %w", o.Phase, k+1, err)
	}
	t4 := time.Now()
	r.times.Apply += t4.Sub(t3).Seconds()
	r.peers.Progress(t4.Sub(t0))
	dt := t4.Sub(t0).Seconds()
	if k == r.ph.step() {
		r.firstStepS = dt
	}
	if r.emaStep == 0 {
		r.emaStep = dt
	} else {
		r.emaStep = 0.9*r.emaStep + 0.1*dt
	}
	line := LogLine{Phase: o.Phase, Step: k + 1, Loss: float64(vals[0]), LR: lr, StepS: dt, ElapsedS: time.Since(r.start).Seconds()}
	if len(vals) > 1 {
		line.MSE = float64(vals[1])
	}
	return line, stop, nil
}

// exchange turns this rank's nodes of step k's summation tree into the whole tree's sum:
// the ranks wait for each other, all-gather their nodes with their stop flags and sum them
// along the tree. One rank holds the whole tree already. It returns the sum and whether
// any rank stops.
func (r *run) exchange(k int, own [][]float32, stop bool, t1 time.Time) ([]float32, bool, error) {
	if r.size == 1 {
		return own[0], stop, nil
	}
	o := r.o
	if err := r.peers.Barrier(r.cctx); err != nil {
		return nil, false, fmt.Errorf("train: %s step %d: %w", o.Phase, k+1, err)
	}
	t2 := time.Now()
	r.times.Wait += t2.Sub(t1).Seconds()
	parts, err := r.peers.AllGather(r.cctx, stepVector(own, stop))
	if err != nil {
		return nil, false, fmt.Errorf("train: %s step %d: gradient exchange: %w", o.Phase, k+1, err)
	}
	known := map[span][]float32{}
	width := len(own[0])
	for q, p := range parts {
		if len(p.Data) != len(r.shares[q])*width+1 {
			return nil, false, fmt.Errorf("train: %s step %d: rank %d sent %d values, want %d", o.Phase, k+1, q, len(p.Data), len(r.shares[q])*width+1)
		}
		for j, sp := range r.shares[q] {
			known[sp] = p.Data[j*width : (j+1)*width]
		}
		stop = stop || p.Data[len(p.Data)-1] != 0
	}
	total, err := sumTree(r.micro, known)
	if err != nil {
		return nil, false, fmt.Errorf("train: %s step %d: %w", o.Phase, k+1, err)
	}
	r.times.AllReduce += time.Since(t2).Seconds()
	return total, stop, nil
}

// evaluate returns the held-out loss (rank 0): the mean over o.HeldOut examples,
// evaluated in microbatches.
func (r *run) evaluate() (float64, error) {
	t0 := time.Now()
	defer func() { r.times.Other += time.Since(t0).Seconds() }()
	sum := 0.0
	for lo := 0; lo < r.o.HeldOut; lo += r.m {
		hi := min(lo+r.m, r.o.HeldOut)
		in, err := r.heldOut.heldOut(lo, hi)
		if err != nil {
			return 0, err
		}
		v, err := r.s.Eval(in...)
		if err != nil {
			return 0, fmt.Errorf("train: held-out loss: %w", err)
		}
		sum += v[0] * float64(hi-lo)
	}
	return sum / float64(r.o.HeldOut), nil
}

// record writes a step's line to the loss log and the progress (rank 0) and keeps its
// losses in the result.
func (r *run) record(line LogLine) error {
	if r.lead {
		if err := r.enc.Encode(line); err != nil {
			return fmt.Errorf("train: loss log: %w", err)
		}
	}
	if math.IsNaN(r.res.FirstLoss) {
		r.res.FirstLoss = line.Loss
	}
	r.res.LastLoss, r.res.Step = line.Loss, line.Step
	if r.lead {
		progress(r.o, max(r.o.ProgressEach, 1), line, r.emaStep)
	}
	return nil
}

// check compares every rank's state with rank 0's and returns its hash.
func (r *run) check(step int) (uint64, error) {
	h, err := stateHash(r.ph.ctx())
	if err != nil {
		return 0, err
	}
	if r.size == 1 {
		return h, nil
	}
	parts, err := r.peers.AllGather(r.cctx, hashTensor(h))
	if err != nil {
		return 0, fmt.Errorf("train: state check at step %d: %w", step, err)
	}
	want := tensorHash(parts[0])
	var bad []int
	for q, p := range parts {
		if tensorHash(p) != want {
			bad = append(bad, q)
		}
	}
	if len(bad) > 0 {
		return 0, fmt.Errorf("%w at step %d: the state of rank(s) %v differs from rank 0's (hash %016x)", ErrDiverged, step, bad, want)
	}
	return h, nil
}

// checkpoint checks the ranks agree and has rank 0 write the state of step with its
// metadata; every rank returns once the file is committed.
func (r *run) checkpoint(step int) error {
	t0 := time.Now()
	defer func() { r.times.Other += time.Since(t0).Seconds() }()
	h, err := r.check(step)
	if err != nil {
		return err
	}
	if r.lead {
		o := r.o
		md := r.ph.meta()
		md["phase"], md["step"], md["seed"] = o.Phase, strconv.Itoa(step), strconv.FormatUint(o.Seed, 10)
		md[metaDataRule] = o.Rule.String()
		md[metaStateHash] = strconv.FormatUint(h, 16)
		md[metaWorld] = strconv.Itoa(r.size)
		md[metaDataCursor] = strconv.Itoa(step)
		md[metaRNG] = rngKeying
		md[metaBatch], md[metaMicroBatch] = strconv.Itoa(o.Batch), strconv.Itoa(r.m)
		if o.EMA > 0 {
			md[metaEMADecay] = strconv.FormatFloat(o.EMA, 'g', -1, 64)
		}
		if err := r.ph.flush(); err != nil {
			return err
		}
		if err := saveContext(StatePath(o.Dir, o.Phase), r.ph.ctx(), md); err != nil {
			return err
		}
	}
	// The others wait until rank 0 has committed the file: after this barrier every rank
	// knows checkpoint `step` exists, with the state they all hold.
	if err := r.peers.Barrier(r.cctx); err != nil {
		return fmt.Errorf("train: checkpoint at step %d: %w", step, err)
	}
	return nil
}
