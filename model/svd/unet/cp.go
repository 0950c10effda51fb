package unet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/vdpp/vdpp/model/cp"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Frames places a context-parallel member's frames: it holds frames [Lo, Hi) of Total.
// The members of a group, in member order, must hold consecutive ranges that cover
// [0, Total); their sizes may differ.
type Frames = cp.Frames

// Comm is what ForwardFrames needs from the context-parallel group (model.FrameComm, which
// a comm.Group is). Every member must make the same sequence of calls.
type Comm = cp.Comm

// ErrFrames: the members' frame ranges or input shapes do not fit together.
var ErrFrames = errors.New("unet: context-parallel frames do not fit")

// ForwardFrames is Forward evaluated by one member of a context-parallel group: sample
// [B, Hi-Lo, Cin, h, w] holds frames [part.Lo, part.Hi) of every row; timestep, ehs and
// addedTimeIDs are the whole rows' (as for Forward, the same on every member). The result
// is the prediction for the member's frames, [B, Hi-Lo, Cout, h, w]; concatenated over the
// members it is Forward on all frames, bit for bit where vdpp's CPU kernels run (every
// layer computes each row's values the same way however the frames are split), and to
// fp32 rounding elsewhere (XLA).
//
// Spatial layers run on the member's frames. The temporal layers exchange through comm:
// each temporal res-block's norm gathers its frames' partial statistics (the sums, then the
// squared deviations, of each frame's plane, added in the one-process order: the same
// statistics bit for bit) and one halo frame from each neighbouring member, twice (once
// per convolution, whose kernel spans three frames); each temporal transformer layer moves
// its tokens to a spatial split (every member gets all frames at 1/C of the positions), runs
// attention across frames there, and moves them back (two all-to-alls, cp.Reshard). The network runs as
// a sequence of compiled segments between these exchanges (ContextParallelSteps counts
// them). Every member must call ForwardFrames with the same shapes (except the frame count)
// and the same timestep, ehs and ids.
func (m *Model) ForwardFrames(ctx context.Context, sample, timestep, ehs, addedTimeIDs *tensor.Dense, part Frames, comm Comm) (*tensor.Dense, error) {
	outs, err := m.forwardFrames(ctx, nil, nil, sample, timestep, ehs, addedTimeIDs, part, comm)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// ForwardFramesKeep is ForwardKeep evaluated by one member of a context-parallel group
// (as ForwardFrames is Forward): it returns the prediction and DeepCache's feature for the
// member's frames, [B, Hi-Lo, C, h', w'].
func (m *Model) ForwardFramesKeep(ctx context.Context, branch int, sample, timestep, ehs, addedTimeIDs *tensor.Dense, part Frames, comm Comm) (out, feature *tensor.Dense, err error) {
	outs, err := m.forwardFrames(ctx, &deepKey{branch: branch}, nil, sample, timestep, ehs, addedTimeIDs, part, comm)
	if err != nil {
		return nil, nil, err
	}
	return outs[0], outs[1], nil
}

// ForwardFramesShallow is ForwardShallow evaluated by one member of a context-parallel
// group: feature is what ForwardFramesKeep returned to this member for the same frames.
func (m *Model) ForwardFramesShallow(ctx context.Context, branch int, feature, sample, timestep, ehs, addedTimeIDs *tensor.Dense, part Frames, comm Comm) (*tensor.Dense, error) {
	if feature == nil || sample == nil || len(feature.Shape) != 5 || len(sample.Shape) != 5 || feature.Shape[0] != sample.Shape[0] || feature.Shape[1] != sample.Shape[1] {
		return nil, fmt.Errorf("%w: feature %v for sample %v", ErrBranch, shapeOf(feature), shapeOf(sample))
	}
	outs, err := m.forwardFrames(ctx, &deepKey{branch: branch, mode: cutShallow}, []*tensor.Dense{feature}, sample, timestep, ehs, addedTimeIDs, part, comm)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// ForwardFramesProbe is ForwardProbe evaluated by one member of a context-parallel group:
// the skips down to branch for the member's frames, [B, Hi-Lo, C, h', w'] each.
func (m *Model) ForwardFramesProbe(ctx context.Context, branch int, sample, timestep, ehs, addedTimeIDs *tensor.Dense, part Frames, comm Comm) ([]*tensor.Dense, error) {
	return m.forwardFrames(ctx, &deepKey{branch: branch, mode: cutProbe}, nil, sample, timestep, ehs, addedTimeIDs, part, comm)
}

// ForwardFramesRest is ForwardRest evaluated by one member of a context-parallel group:
// skips are what ForwardFramesProbe returned to this member.
func (m *Model) ForwardFramesRest(ctx context.Context, branch int, skips []*tensor.Dense, sample, timestep, ehs, addedTimeIDs *tensor.Dense, part Frames, comm Comm) (*tensor.Dense, error) {
	if err := checkSkips(skips, branch, sample); err != nil {
		return nil, err
	}
	outs, err := m.forwardFrames(ctx, &deepKey{branch: branch, mode: cutRest}, skips, sample, timestep, ehs, addedTimeIDs, part, comm)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// forwardFrames runs the plan of the whole network (cut nil) or of a DeepCache call with
// the call's own inputs extra ([B, Hi-Lo, ...] each, cutRegisters' order) and returns its
// outputs in cutRegisters' order, [B, Hi-Lo, ...] each.
func (m *Model) forwardFrames(ctx context.Context, cut *deepKey, extra []*tensor.Dense, sample, timestep, ehs, addedTimeIDs *tensor.Dense, part Frames, comm Comm) ([]*tensor.Dense, error) {
	for i, t := range []*tensor.Dense{sample, timestep, ehs, addedTimeIDs} {
		if t == nil {
			return nil, fmt.Errorf("%w: input %d is nil", ErrInput, i)
		}
	}
	if comm == nil {
		return nil, fmt.Errorf("%w: nil comm", ErrFrames)
	}
	if err := checkInputShapes(m.cfg, sample.Shape, timestep.Shape, ehs.Shape, addedTimeIDs.Shape); err != nil {
		return nil, err
	}
	if err := part.Check(sample.Shape[1]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFrames, err)
	}
	r := &cpRunner{ctx: ctx, comm: comm, model: m, rows: sample.Shape[0], lo: part.Lo, hi: part.Hi}
	if err := r.layout(part.Total, sample.Shape); err != nil {
		return nil, err
	}
	plan, err := m.cpPlans.get(m, sample.Shape[3], sample.Shape[4], cut)
	if err != nil {
		return nil, err
	}
	edge := tensor.New(2)
	if part.Lo > 0 {
		edge.Data[0] = 1
	}
	if part.Hi < part.Total {
		edge.Data[1] = 1
	}
	r.regs = map[string]*tensor.Dense{regX: sample, regTimestep: timestep, regIDs: addedTimeIDs, regEHS: ehs, regEdge: edge}
	ins, outs := cutRegisters(cut)
	if len(extra) != len(ins) {
		return nil, fmt.Errorf("%w: %d inputs for %d registers %v", ErrBranch, len(extra), len(ins), ins)
	}
	for i, name := range ins {
		d := extra[i].Shape
		r.regs[name] = &tensor.Dense{Shape: []int{d[0] * d[1], d[2], d[3], d[4]}, Data: extra[i].Data}
	}
	if err := r.run(plan); err != nil {
		return nil, err
	}
	res := make([]*tensor.Dense, len(outs))
	for i, name := range outs {
		x := r.regs[name]
		if x == nil {
			return nil, fmt.Errorf("unet: context-parallel plan left no %q", name)
		}
		d := x.Shape
		res[i] = &tensor.Dense{Shape: []int{r.rows, r.hi - r.lo, d[1], d[2], d[3]}, Data: x.Data}
	}
	return res, nil
}

// cpPlans caches a Model's context-parallel plans (one per latent size) and their
// compiled segments.
type cpPlans struct {
	mu    sync.Mutex
	plans map[planKey]*cpPlan
}

// planKey names a plan: the latent size and, for a DeepCache call, its cut.
type planKey struct {
	h, w int
	deep bool
	cut  deepKey
}

func (c *cpPlans) get(m *Model, h, w int, cut *deepKey) (*cpPlan, error) {
	k := planKey{h: h, w: w, deep: cut != nil}
	if cut != nil {
		k.cut = *cut
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.plans[k]; ok {
		return p, nil
	}
	p, err := newCPPlan(m.cfg, h, w, cut)
	if err != nil {
		return nil, err
	}
	if c.plans == nil {
		c.plans = map[planKey]*cpPlan{}
	}
	c.plans[k] = p
	return p, nil
}

// close releases every compiled segment.
func (c *cpPlans) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, p := range c.plans {
		for _, st := range p.steps {
			if st.prog != nil {
				errs = append(errs, st.prog.Close())
			}
		}
	}
	c.plans = nil
	return errors.Join(errs...)
}

// program returns the step's compiled program, creating it on first use.
func (st *cpStep) program(m *Model, k int) (*nn.Program, error) {
	st.progOnce.Do(func() {
		st.prog, st.progErr = nn.NewProgram(m.prog.Backend(), m.weights, fmt.Sprintf("unet-cp-%d-%s", k, st.name), st.build())
	})
	return st.prog, st.progErr
}

// cpRunner is one member's execution of a plan.
type cpRunner struct {
	ctx      context.Context
	comm     Comm
	rows     int
	lo, hi   int
	total    int
	los, his []int // every member's frame range
	regs     map[string]*tensor.Dense
	model    *Model
	// positions is the token count of the latest spatial split (toSpace), which toFrames
	// undoes.
	positions int
}

// layout all-gathers the members' frame ranges and sample shapes and checks that they fit.
func (r *cpRunner) layout(total int, shape []int) error {
	size, me := r.comm.Size(), r.comm.Index()
	if size < 1 || me < 0 || me >= size {
		return fmt.Errorf("%w: member %d of %d", ErrFrames, me, size)
	}
	mine := &tensor.Dense{Shape: []int{6}, Data: []float32{
		float32(r.lo), float32(r.hi), float32(total), float32(shape[0]), float32(shape[3]), float32(shape[4])}}
	all, err := r.comm.AllGather(r.ctx, mine)
	if err != nil {
		return fmt.Errorf("unet: context-parallel layout: %w", err)
	}
	if len(all) != size {
		return fmt.Errorf("%w: all-gather returned %d parts for %d members", ErrFrames, len(all), size)
	}
	r.total = total
	r.los, r.his = make([]int, size), make([]int, size)
	next := 0
	for k, t := range all {
		if t == nil || len(t.Data) != 6 {
			return fmt.Errorf("%w: member %d sent a malformed layout", ErrFrames, k)
		}
		lo, hi := int(t.Data[0]), int(t.Data[1])
		if lo != next || hi <= lo || int(t.Data[2]) != total {
			return fmt.Errorf("%w: member %d holds frames [%d, %d) of %d; member order must tile [0, %d)", ErrFrames, k, lo, hi, int(t.Data[2]), total)
		}
		if !slices.Equal(t.Data[3:], mine.Data[3:]) {
			return fmt.Errorf("%w: member %d has rows x h x w %v, member %d has %v", ErrFrames, k, t.Data[3:], me, mine.Data[3:])
		}
		r.los[k], r.his[k] = lo, hi
		next = hi
	}
	if next != total {
		return fmt.Errorf("%w: the members hold frames [0, %d) of %d", ErrFrames, next, total)
	}
	return nil
}

// run executes the plan's steps, dropping registers as soon as no later step reads them.
func (r *cpRunner) run(p *cpPlan) error {
	for k, st := range p.steps {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		var err error
		if st.exch != nil {
			err = r.exchange(st.exch)
		} else {
			err = r.segment(st, k)
		}
		if err != nil {
			return fmt.Errorf("unet: context-parallel step %d (%s): %w", k, st.name, err)
		}
		for name := range r.regs {
			if !slices.Contains(st.live, name) {
				delete(r.regs, name)
			}
		}
	}
	return nil
}

// segment runs one compiled segment on its input registers.
func (r *cpRunner) segment(st *cpStep, k int) error {
	in := make([]*tensor.Dense, len(st.in))
	for i, name := range st.in {
		in[i] = r.regs[name]
		if in[i] == nil {
			return fmt.Errorf("register %q is empty", name)
		}
	}
	if st.spatial && in[0].Len() == 0 {
		return nil // no positions on this member: the register passes through
	}
	prog, err := st.program(r.model, k)
	if err != nil {
		return err
	}
	out, err := prog.Run(in...)
	if err != nil {
		return err
	}
	for i, name := range st.out {
		r.regs[name] = out[i]
	}
	return nil
}
