package unet

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// DeepCache (Ma et al. 2023; horseee/DeepCache, DeepCache/svd) skips the deep part of the
// UNet on the steps between two full calls. A branch names one skip connection of the
// down path: branch b is the (b+1)-th skip pushed (skip 0 is conv_in's output, which
// DeepCache leaves out). A full call keeps the feature that enters the up-block module
// consuming that skip (the running activation just before it is concatenated); a shallow
// call runs the layers up to and including the skip's producer on the way down, then
// replaces everything deeper by the kept feature and runs the up path from that module
// on, with the head. The time embedding and the conditioning are computed as usual.
//
// DeepCache numbers branch b as down block b / (layers_per_block+1), module
// b % (layers_per_block+1) (a resnet, or the downsampler as the last module) and finds the
// mirrored up module by formulas written for layers_per_block = 2; for that layout (SVD's)
// the skip numbering here selects the same modules, and it stays the mirror for every
// other layout.

// ErrBranch: a DeepCache branch outside the network's skips, or a feature that does not
// fit the call.
var ErrBranch = errors.New("unet: invalid DeepCache branch or feature")

// Branches returns the number of DeepCache branches of the UNet of cfg: its skip
// connections after conv_in's, so branches 0 .. Branches-1 are valid, 0 the shallowest.
func Branches(cfg Config) int {
	n := 0
	for _, l := range cfg.LayersPerBlock {
		n += l
	}
	return n + cfg.NumBlocks() - 1
}

// cutLayers runs the layer sequence of a DeepCache call through the layers it wraps: all
// of it, saving the feature at the branch (keep), or without the part deeper than the
// branch, loading the feature there (shallow). Skips are pushed in order and all popped
// after the last push, so a skip's position on the stack is its push number.
type cutLayers struct {
	inner  layers
	skip   int     // the branch's skip: its push number
	mode   cutMode // what the call runs
	pushed int     // skips pushed so far, run or not
	depth  int     // skips on the stack, run or not
	deep   bool    // inside the part the call does not run: calls are dropped
}

// cutMode is what a DeepCache call runs.
type cutMode int

const (
	// cutKeep runs everything and saves the feature at the branch.
	cutKeep cutMode = iota
	// cutShallow loads the feature instead of running the part below the branch.
	cutShallow
	// cutProbe runs only the layers down to the branch's skip and saves the skips pushed
	// so far, that one last: the "first block" an adaptive rule compares between steps.
	cutProbe
	// cutRest runs the rest of a call after a probe: the skips it saved in place of the
	// layers down to the branch, everything after them as usual.
	cutRest
)

func (c *cutLayers) embed() { c.inner.embed() }

func (c *cutLayers) apply(name string, f func(s nn.Scope, x *Node) *Node) {
	if !c.deep {
		c.inner.apply(name, f)
	}
}

func (c *cutLayers) resBlock(path string, cout int, eps float64) {
	if !c.deep {
		c.inner.resBlock(path, cout, eps)
	}
}

func (c *cutLayers) transformer(path string, a attnSpec) {
	if !c.deep {
		c.inner.transformer(path, a)
	}
}

func (c *cutLayers) pushSkip() {
	if !c.deep {
		c.inner.pushSkip()
	}
	c.depth++
	c.pushed++
	if c.pushed-1 == c.skip {
		switch c.mode {
		case cutShallow:
			c.deep = true
		case cutProbe:
			c.inner.saveSkips()
			c.deep = true
		case cutRest:
			c.inner.loadSkips()
			c.deep = false
		}
	}
}

func (c *cutLayers) popSkip() {
	c.depth--
	if c.depth == c.skip {
		switch c.mode {
		case cutShallow:
			c.deep = false
			c.inner.loadFeature()
		case cutKeep:
			c.inner.saveFeature()
		}
	}
	if !c.deep {
		c.inner.popSkip()
	}
}

// saveFeature, loadFeature, saveSkips and loadSkips are never asked of a cutLayers (it
// does not nest).
func (c *cutLayers) saveFeature() { c.inner.saveFeature() }
func (c *cutLayers) loadFeature() { c.inner.loadFeature() }
func (c *cutLayers) saveSkips()   { c.inner.saveSkips() }
func (c *cutLayers) loadSkips()   { c.inner.loadSkips() }

// cut returns l wrapped for a DeepCache call at branch, after checking the branch.
func cut(cfg Config, l layers, branch int, mode cutMode) (layers, error) {
	if n := Branches(cfg); branch < 0 || branch >= n {
		return nil, fmt.Errorf("%w: branch %d, the UNet has branches 0..%d", ErrBranch, branch, n-1)
	}
	return &cutLayers{inner: l, skip: branch + 1, mode: mode, deep: mode == cutRest}, nil
}

// BuildKeep is Build for the full call of DeepCache at branch: it also returns the kept
// feature, [B, T, C, h', w'] (the input of the up module mirroring the branch).
func BuildKeep(s nn.Scope, cfg Config, branch int, sample, timestep, ehs, addedTimeIDs *Node) (out, feature *Node) {
	l := newGraphLayers(s, cfg, sample, timestep, ehs, addedTimeIDs)
	c, err := cut(cfg, l, branch, cutKeep)
	if err != nil {
		panic(err)
	}
	return l.run(c), l.featureOut()
}

// BuildProbe runs the UNet only down to the skip of branch and returns the skips pushed
// so far, [B, T, C, h', w'] each, in push order (conv_in's first): the last is the branch's
// skip, the part of a call an adaptive rule compares between steps (at branch 0, conv_in
// and the first res-block, with its transformer when the block has one); all of them are
// what BuildRest continues from.
func BuildProbe(s nn.Scope, cfg Config, branch int, sample, timestep, ehs, addedTimeIDs *Node) []*Node {
	l := newGraphLayers(s, cfg, sample, timestep, ehs, addedTimeIDs)
	c, err := cut(cfg, l, branch, cutProbe)
	if err != nil {
		panic(err)
	}
	walk(cfg, l.h, l.w, c)
	out := make([]*Node, len(l.skipsOut))
	for i, x := range l.skipsOut {
		d := x.Shape().Dimensions
		out[i] = Reshape(x, l.f.b, l.f.t, d[1], d[2], d[3])
	}
	return out
}

// BuildRest is Build after BuildProbe at branch: skips are what it returned for the same
// rows, and the layers that made them do not run again; the prediction is Build's.
func BuildRest(s nn.Scope, cfg Config, branch int, skips []*Node, sample, timestep, ehs, addedTimeIDs *Node) *Node {
	l := newGraphLayers(s, cfg, sample, timestep, ehs, addedTimeIDs)
	c, err := cut(cfg, l, branch, cutRest)
	if err != nil {
		panic(err)
	}
	if len(skips) != branch+2 {
		panic(fmt.Errorf("%w: %d skips for branch %d, want %d", ErrBranch, len(skips), branch, branch+2))
	}
	for _, x := range skips {
		d := x.Shape().Dimensions
		if len(d) != 5 || d[0] != l.f.b || d[1] != l.f.t {
			panic(fmt.Errorf("%w: skip %v for a sample of %d rows and %d frames", ErrBranch, d, l.f.b, l.f.t))
		}
		l.skipsIn = append(l.skipsIn, Reshape(x, d[0]*d[1], d[2], d[3], d[4]))
	}
	return l.run(c)
}

// BuildShallow is Build for a cached call of DeepCache at branch: feature is what
// BuildKeep returned for the same rows at the same latent size, and the part of the
// network deeper than the branch does not run.
func BuildShallow(s nn.Scope, cfg Config, branch int, feature, sample, timestep, ehs, addedTimeIDs *Node) *Node {
	l := newGraphLayers(s, cfg, sample, timestep, ehs, addedTimeIDs)
	c, err := cut(cfg, l, branch, cutShallow)
	if err != nil {
		panic(err)
	}
	fd := feature.Shape().Dimensions
	if len(fd) != 5 || fd[0] != l.f.b || fd[1] != l.f.t {
		panic(fmt.Errorf("%w: feature %v for a sample of %d rows and %d frames", ErrBranch, fd, l.f.b, l.f.t))
	}
	l.feature = Reshape(feature, fd[0]*fd[1], fd[2], fd[3], fd[4])
	return l.run(c)
}

// featureOut returns the saved feature with its rows and frames apart.
func (l *graphLayers) featureOut() *Node {
	if l.feature == nil {
		panic(fmt.Errorf("%w: no feature was saved", ErrBranch))
	}
	d := l.feature.Shape().Dimensions
	return Reshape(l.feature, l.f.b, l.f.t, d[1], d[2], d[3])
}

func (l *graphLayers) saveFeature() { l.feature = l.x }

func (l *graphLayers) saveSkips() { l.skipsOut = slices.Clone(l.skips) }

func (l *graphLayers) loadSkips() {
	l.skips = slices.Clone(l.skipsIn)
	l.x = l.skips[len(l.skips)-1]
}

func (l *graphLayers) loadFeature() {
	if l.feature == nil {
		panic(fmt.Errorf("%w: no feature to load", ErrBranch))
	}
	// The feature is concatenated to the skip: their sizes must agree (a wrong channel
	// count fails at the res-block's weights).
	if got, want := l.feature.Shape().Dimensions, l.x.Shape().Dimensions; got[2] != want[2] || got[3] != want[3] {
		panic(fmt.Errorf("%w: feature of %dx%d, the branch's skip is %dx%d", ErrBranch, got[2], got[3], want[2], want[3]))
	}
	l.x = l.feature
}

// deepKey names a compiled DeepCache program.
type deepKey struct {
	branch int
	mode   cutMode
}

// deepPrograms holds a Model's DeepCache programs, compiled on first use.
type deepPrograms struct {
	mu    sync.Mutex
	progs map[deepKey]*nn.Program
}

func (d *deepPrograms) get(m *Model, k deepKey) (*nn.Program, error) {
	if n := Branches(m.cfg); k.branch < 0 || k.branch >= n {
		return nil, fmt.Errorf("%w: branch %d, the UNet has branches 0..%d", ErrBranch, k.branch, n-1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.progs[k]; ok {
		return p, nil
	}
	cfg := m.cfg
	build := func(s nn.Scope, in []*Node) []*Node {
		switch k.mode {
		case cutShallow:
			return []*Node{BuildShallow(s, cfg, k.branch, in[4], in[0], in[1], in[2], in[3])}
		case cutProbe:
			return BuildProbe(s, cfg, k.branch, in[0], in[1], in[2], in[3])
		case cutRest:
			return []*Node{BuildRest(s, cfg, k.branch, in[4:], in[0], in[1], in[2], in[3])}
		}
		out, f := BuildKeep(s, cfg, k.branch, in[0], in[1], in[2], in[3])
		return []*Node{out, f}
	}
	p, err := nn.NewProgram(m.prog.Backend(), m.weights, fmt.Sprintf("unet-deepcache-%d-%d", k.branch, k.mode), build)
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	if d.progs == nil {
		d.progs = map[deepKey]*nn.Program{}
	}
	d.progs[k] = p
	return p, nil
}

func (d *deepPrograms) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.progs {
		errs = append(errs, p.Close())
	}
	d.progs = nil
	return errors.Join(errs...)
}

// ForwardKeep is Forward for the full call of DeepCache at branch: it also returns the
// feature a later ForwardShallow on the same rows reads, [B, T, C, h', w'] (one row per
// sample row, so rows may be taken apart with tensor.Dense.Rows and joined again).
func (m *Model) ForwardKeep(branch int, sample, timestep, ehs, addedTimeIDs *tensor.Dense) (out, feature *tensor.Dense, err error) {
	prog, err := m.deep.get(m, deepKey{branch: branch})
	if err != nil {
		return nil, nil, err
	}
	outs, err := m.runRows(prog, sample, timestep, ehs, addedTimeIDs)
	if err != nil {
		return nil, nil, err
	}
	return outs[0], outs[1], nil
}

// ForwardShallow is Forward for a cached call of DeepCache at branch: only the layers
// above the branch run, with feature (from ForwardKeep at the same branch on the same
// rows and latent size) in place of the rest.
func (m *Model) ForwardShallow(branch int, feature, sample, timestep, ehs, addedTimeIDs *tensor.Dense) (*tensor.Dense, error) {
	if feature == nil {
		return nil, fmt.Errorf("%w: nil feature", ErrBranch)
	}
	if sample != nil && (len(feature.Shape) != 5 || len(sample.Shape) != 5 || feature.Shape[0] != sample.Shape[0] || feature.Shape[1] != sample.Shape[1]) {
		return nil, fmt.Errorf("%w: feature %v for sample %v", ErrBranch, feature.Shape, sample.Shape)
	}
	prog, err := m.deep.get(m, deepKey{branch: branch, mode: cutShallow})
	if err != nil {
		return nil, err
	}
	outs, err := m.runRows(prog, sample, timestep, ehs, addedTimeIDs, feature)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// ForwardProbe runs the UNet of a call only down to the skip of branch and returns the
// skips pushed so far (BuildProbe), [B, T, C, h', w'] each: the last is the branch's
// skip, what an adaptive rule compares between steps to decide whether the rest of the
// call is worth computing; ForwardRest computes that rest from them.
func (m *Model) ForwardProbe(branch int, sample, timestep, ehs, addedTimeIDs *tensor.Dense) ([]*tensor.Dense, error) {
	prog, err := m.deep.get(m, deepKey{branch: branch, mode: cutProbe})
	if err != nil {
		return nil, err
	}
	return m.runRows(prog, sample, timestep, ehs, addedTimeIDs)
}

// ForwardRest finishes a call that ForwardProbe began at branch on the same inputs: skips
// are what it returned (or rows of it), and the result is Forward's.
func (m *Model) ForwardRest(branch int, skips []*tensor.Dense, sample, timestep, ehs, addedTimeIDs *tensor.Dense) (*tensor.Dense, error) {
	if err := checkSkips(skips, branch, sample); err != nil {
		return nil, err
	}
	prog, err := m.deep.get(m, deepKey{branch: branch, mode: cutRest})
	if err != nil {
		return nil, err
	}
	outs, err := m.runRows(prog, sample, timestep, ehs, addedTimeIDs, skips...)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// checkSkips checks a probe's skips against the branch and the sample's rows and frames.
func checkSkips(skips []*tensor.Dense, branch int, sample *tensor.Dense) error {
	if len(skips) != branch+2 {
		return fmt.Errorf("%w: %d skips for branch %d, want %d", ErrBranch, len(skips), branch, branch+2)
	}
	for _, x := range skips {
		if x == nil || sample == nil || len(x.Shape) != 5 || len(sample.Shape) != 5 || x.Shape[0] != sample.Shape[0] || x.Shape[1] != sample.Shape[1] {
			return fmt.Errorf("%w: skip %v for sample %v", ErrBranch, shapeOf(x), shapeOf(sample))
		}
	}
	return nil
}
