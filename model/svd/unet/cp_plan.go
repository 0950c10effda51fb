package unet

import (
	"fmt"
	"slices"
	"sync"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// The context-parallel forward (ForwardFrames) is the UNet's layer sequence (walk, as for
// Build) recorded by a planBuilder as graph segments separated by exchanges that run in Go
// between the members of the group: a GoMLX graph cannot call a collective in the middle of
// an execution. A cpPlan is that sequence for one config and latent size. Values flow
// between steps through named registers (tensors held in Go); a liveness pass gives each
// segment exactly the registers it reads and returns exactly those a later step needs, so a
// skip connection travels only into the segment that consumes it.

// Register names of the plan's inputs and fixed values.
const (
	regTimestep = "timestep" // as given to ForwardFrames
	regIDs      = "ids"      // [B, K]
	regEHS      = "ehs"      // [B, S, D]
	regEdge     = "edge"     // [2]: 1 when the member has a previous / next neighbour frame
	regEmb      = "emb"      // [B, E], the time embedding of each row
	regX        = "x"        // the running activation: the sample [B, Tl, Cin, h, w], then [B·Tl, C, h, w]
	regGN1      = "gn1"      // [B, G, 2]: mean and 1/√(var + eps) over all frames, temporal norm1
	regGN2      = "gn2"      // [B, G, 2]: the same for temporal norm2
	regXPrev    = "xprev"    // [B, C, h, w]: the frame before the member's first (or zeros)
	regXNext    = "xnext"    // [B, C, h, w]: the frame after the member's last (or zeros)
	regTH       = "th"       // [B·Tl, C, h, w]: temporal resnet after conv1
	regHPrev    = "hprev"    // halo frames of th
	regHNext    = "hnext"
	regRes      = "res"     // transformer residual
	regTok      = "tok"     // [B·Tl, S, C] transformer tokens (frame split)
	regTokSpace = "tsp"     // [B, T, Sm, C] transformer tokens (spatial split: all frames)
	regSkipFmt  = "skip%d"  // skip connections, numbered in push order
	regFeature  = "feature" // DeepCache's feature [B·Tl, C, h', w'] (deepcache.go)
)

// planInputs are the registers the runner sets before the first step; a DeepCache call
// adds its own (cutRegisters).
var planInputs = []string{regX, regTimestep, regIDs, regEHS, regEdge}

// skipRegs are the registers of the first n skips.
func skipRegs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(regSkipFmt, i)
	}
	return out
}

// cutRegisters are the registers a DeepCache call (nil: the whole network) reads besides
// planInputs and returns besides (or, for a probe, instead of) the prediction.
func cutRegisters(c *deepKey) (in, out []string) {
	if c == nil {
		return nil, []string{regX}
	}
	switch c.mode {
	case cutKeep:
		return nil, []string{regX, regFeature}
	case cutShallow:
		return []string{regFeature}, []string{regX}
	case cutProbe:
		return nil, skipRegs(c.branch + 2)
	}
	return skipRegs(c.branch + 2), []string{regX} // cutRest
}

// env maps register names to the nodes of the segment being built.
type env map[string]*Node

// gop is one piece of graph-building code in a segment: it reads and writes registers.
type gop struct {
	reads, writes []string
	build         func(s nn.Scope, e env)
}

// exchangeKind is what an exchange step does.
type exchangeKind int

const (
	// exHalo: the GroupNorm statistics of src over all frames, from the members' frame by
	// frame sums (an all-gather, then an all-to-all of the squared deviations that also
	// carries the member's first / last frame of src to the previous / next member).
	exHalo exchangeKind = iota
	// exToSpace: all-to-all from the frame split [B·Tl, S, C] to the spatial split
	// [B, T, Sm, C].
	exToSpace
	// exToFrames: the inverse of exToSpace.
	exToFrames
)

// exchange is a step that runs in Go between segments.
type exchange struct {
	kind exchangeKind
	src  string // exHalo: the activation normalised, whose halo frames are sent
	// exHalo: where the global statistics and the two halo frames go.
	gn, prev, next string
	eps            float64 // exHalo: the norm's eps
}

func (x *exchange) reads() []string {
	switch x.kind {
	case exHalo:
		return []string{x.src}
	case exToSpace:
		return []string{regTok}
	default:
		return []string{regTokSpace}
	}
}

func (x *exchange) writes() []string {
	switch x.kind {
	case exHalo:
		return []string{x.gn, x.prev, x.next}
	case exToSpace:
		return []string{regTokSpace}
	default:
		return []string{regTok}
	}
}

// cpStep is a graph segment (ops) or an exchange (exch).
type cpStep struct {
	name string
	ops  []gop
	exch *exchange
	// spatial marks a segment on the spatial split; a member whose spatial slice is empty
	// (fewer positions than members) skips it, its only register passing through.
	spatial bool

	in, out []string // segment inputs and outputs, from the liveness pass
	live    []string // registers live after the step

	progOnce sync.Once
	prog     *nn.Program
	progErr  error
}

// cpPlan is the step sequence of the context-parallel forward for one latent size.
type cpPlan struct {
	steps []*cpStep
}

// segments returns the number of graph segments and of exchanges.
func (p *cpPlan) counts() (segments, exchanges int) {
	for _, st := range p.steps {
		if st.exch != nil {
			exchanges++
		} else {
			segments++
		}
	}
	return segments, exchanges
}

// planBuilder records the layer sequence (walk) as a plan: it appends ops to the open
// segment and closes the segment at each exchange.
type planBuilder struct {
	cfg   Config
	steps []*cpStep
	open  *cpStep
	skips []string   // the registers of the saved skips
	cut   *cutLayers // a DeepCache call's cut (nil: the whole network)
}

// pushedSkips is the number of skips pushed so far, run or not.
func (p *planBuilder) pushedSkips() int {
	if p.cut != nil {
		return p.cut.pushed
	}
	return len(p.skips)
}

func (p *planBuilder) op(name string, reads, writes []string, build func(s nn.Scope, e env)) {
	if p.open == nil {
		p.open = &cpStep{name: name}
		p.steps = append(p.steps, p.open)
	}
	p.open.ops = append(p.open.ops, gop{reads: reads, writes: writes, build: build})
}

func (p *planBuilder) exchange(name string, x *exchange) {
	p.open = nil
	p.steps = append(p.steps, &cpStep{name: name, exch: x})
}

// spatialSegment appends a segment of its own on the spatial split.
func (p *planBuilder) spatialSegment(name string, reads []string, build func(s nn.Scope, e env)) {
	p.open = nil
	p.steps = append(p.steps, &cpStep{name: name, spatial: true,
		ops: []gop{{reads: reads, writes: []string{regTokSpace}, build: build}}})
}

func (p *planBuilder) embed() {
	p.op("embed", []string{regTimestep, regIDs}, []string{regEmb}, func(s nn.Scope, e env) {
		e[regEmb] = embedding(s, p.cfg, e[regTimestep], e[regIDs])
	})
}

// apply: a layer that acts on each frame alone runs on the member's frames.
func (p *planBuilder) apply(name string, f func(s nn.Scope, x *Node) *Node) {
	p.op(name, []string{regX}, []string{regX}, func(s nn.Scope, e env) { e[regX] = f(s, e[regX]) })
}

func (p *planBuilder) pushSkip() {
	reg := fmt.Sprintf(regSkipFmt, len(p.skips))
	p.skips = append(p.skips, reg)
	p.op("skip", []string{regX}, []string{reg}, func(_ nn.Scope, e env) { e[reg] = e[regX] })
}

func (p *planBuilder) popSkip() {
	reg := p.skips[len(p.skips)-1]
	p.skips = p.skips[:len(p.skips)-1]
	p.op("concat", []string{regX, reg}, []string{regX}, func(_ nn.Scope, e env) {
		e[regX] = Concatenate([]*Node{e[regX], e[reg]}, 1)
	})
}

func (p *planBuilder) saveFeature() {
	p.op("feature", []string{regX}, []string{regFeature}, func(_ nn.Scope, e env) { e[regFeature] = e[regX] })
}

func (p *planBuilder) loadFeature() {
	p.op("feature", []string{regFeature}, []string{regX}, func(_ nn.Scope, e env) { e[regX] = e[regFeature] })
}

// saveSkips: the skips' registers are the probe's outputs (cutRegisters).
func (p *planBuilder) saveSkips() {}

// loadSkips: the skips' registers are inputs; x starts at the last.
func (p *planBuilder) loadSkips() {
	p.skips = skipRegs(p.pushedSkips())
	last := p.skips[len(p.skips)-1]
	p.op("skips", []string{last}, []string{regX}, func(_ nn.Scope, e env) { e[regX] = e[last] })
}

// newCPPlan builds the plan of the UNet of cfg for latents of h x w: the whole network,
// or, with c, a DeepCache call (whose keep form also outputs the feature).
func newCPPlan(cfg Config, h, w int, c *deepKey) (*cpPlan, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	p := &planBuilder{cfg: cfg}
	var l layers = p
	if c != nil {
		cl, err := cut(cfg, p, c.branch, c.mode)
		if err != nil {
			return nil, err
		}
		p.cut = cl.(*cutLayers)
		l = cl
	}
	walk(cfg, h, w, l)
	plan := &cpPlan{steps: p.steps}
	ins, outs := cutRegisters(c)
	if err := plan.liveness(append(slices.Clone(planInputs), ins...), outs); err != nil {
		return nil, err
	}
	return plan, nil
}

// resBlock appends a SpatioTemporalResBlock: the spatial resnet; an exchange of norm1's
// statistics and halo frames; norm1 + conv1 over the member's frames and one halo frame
// each side; a second exchange for norm2; norm2 + conv2 and the time mixer.
func (p *planBuilder) resBlock(path string, cout int, eps float64) {
	p.op(path+".spatial", []string{regX, regEmb}, []string{regX}, func(s nn.Scope, e env) {
		e[regX] = cpSpatialRes(s.In(path), e[regX], e[regEmb], cout, eps)
	})
	p.exchange(path+".halo1", &exchange{kind: exHalo, src: regX, gn: regGN1, prev: regXPrev, next: regXNext, eps: eps})
	p.op(path+".temporal1", []string{regX, regGN1, regXPrev, regXNext, regEdge, regEmb}, []string{regTH},
		func(s nn.Scope, e env) {
			e[regTH] = cpTemporalConv1(s.In(path), e[regX], e[regGN1], e[regXPrev], e[regXNext], e[regEdge], e[regEmb])
		})
	p.exchange(path+".halo2", &exchange{kind: exHalo, src: regTH, gn: regGN2, prev: regHPrev, next: regHNext, eps: eps})
	p.op(path+".temporal2", []string{regX, regTH, regGN2, regHPrev, regHNext, regEdge}, []string{regX},
		func(s nn.Scope, e env) {
			e[regX] = cpTemporalConv2(s.In(path), e[regX], e[regTH], e[regGN2], e[regHPrev], e[regHNext], e[regEdge])
		})
}

// transformer appends a TransformerSpatioTemporalModel: norm, proj_in and the spatial
// block on the member's frames; per layer an all-to-all to the spatial split, the temporal
// block and the time mixer over all frames, and an all-to-all back; proj_out and the
// residual.
func (p *planBuilder) transformer(path string, a attnSpec) {
	p.op(path+".in", []string{regX}, []string{regRes, regTok}, func(s nn.Scope, e env) {
		e[regRes], e[regTok] = e[regX], transformerIn(s.In(path), e[regX], a)
	})
	for l := range a.layers {
		p.op(fmt.Sprintf("%s.spatial.%d", path, l), []string{regTok, regEHS}, []string{regTok}, func(s nn.Scope, e env) {
			e[regTok] = basicTransformerBlock(s.In(path).Inf("transformer_blocks.%d", l), e[regTok], e[regEHS], a)
		})
		p.exchange(fmt.Sprintf("%s.to_space.%d", path, l), &exchange{kind: exToSpace})
		p.spatialSegment(fmt.Sprintf("%s.temporal.%d", path, l), []string{regTokSpace, regEHS}, func(s nn.Scope, e env) {
			e[regTokSpace] = cpTemporalTransformer(s.In(path), e[regTokSpace], e[regEHS], l, a)
		})
		p.exchange(fmt.Sprintf("%s.to_frames.%d", path, l), &exchange{kind: exToFrames})
	}
	p.op(path+".out", []string{regTok, regRes}, []string{regX}, func(s nn.Scope, e env) {
		e[regX] = transformerOut(s.In(path), e[regTok], e[regRes])
	})
}

// liveness fills every step's in, out and live lists, working backwards from the outputs;
// only inputs may be read before a step writes them.
func (p *cpPlan) liveness(inputs, outputs []string) error {
	live := map[string]bool{}
	for _, o := range outputs {
		live[o] = true
	}
	for k := len(p.steps) - 1; k >= 0; k-- {
		st := p.steps[k]
		st.live = sortedKeys(live)
		var uses, defs []string
		if st.exch != nil {
			uses, defs = st.exch.reads(), st.exch.writes()
		} else {
			for _, o := range st.ops {
				for _, r := range o.reads {
					if !slices.Contains(defs, r) && !slices.Contains(uses, r) {
						uses = append(uses, r)
					}
				}
				for _, w := range o.writes {
					if !slices.Contains(defs, w) {
						defs = append(defs, w)
					}
				}
			}
			st.in = uses
			st.out = nil
			for _, d := range defs {
				if live[d] {
					st.out = append(st.out, d)
				}
			}
			if len(st.out) == 0 {
				return fmt.Errorf("unet: context-parallel plan: segment %q computes nothing used later", st.name)
			}
			if st.spatial && (len(st.in) == 0 || st.in[0] != regTokSpace || !slices.Equal(st.out, []string{regTokSpace})) {
				return fmt.Errorf("unet: context-parallel plan: spatial segment %q must map %s to itself", st.name, regTokSpace)
			}
		}
		for _, d := range defs {
			delete(live, d)
		}
		for _, u := range uses {
			live[u] = true
		}
	}
	for r := range live {
		if !slices.Contains(inputs, r) {
			return fmt.Errorf("unet: context-parallel plan reads %q before any step writes it", r)
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// build returns the BuildFunc of a segment.
func (st *cpStep) build() nn.BuildFunc {
	return func(s nn.Scope, in []*Node) []*Node {
		e := make(env, len(st.in)+len(st.out))
		for i, name := range st.in {
			e[name] = in[i]
		}
		for _, o := range st.ops {
			o.build(s, e)
		}
		out := make([]*Node, len(st.out))
		for i, name := range st.out {
			out[i] = e[name]
		}
		return out
	}
}

// ContextParallelSteps reports how ForwardFrames cuts the UNet of cfg for latents of
// h x w: the number of graph segments (each compiled once per set of shapes) and of
// exchanges between them (each one collective over the group).
func ContextParallelSteps(cfg Config, h, w int) (segments, exchanges int, err error) {
	p, err := newCPPlan(cfg, h, w, nil)
	if err != nil {
		return 0, 0, err
	}
	segments, exchanges = p.counts()
	return segments, exchanges, nil
}
