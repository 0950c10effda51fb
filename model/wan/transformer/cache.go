package transformer

import (
	"errors"
	"fmt"
	"sync"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// FirstBlockCache are the hooks of a forward with diffusers' First Block Cache
// (hooks/first_block_cache.py: a hook on blocks.0 and on the last block), for
// ForwardCached and ForwardFramesCached. The forward runs the patch embedding, the
// condition embedder and block 0, asks Decide which rows run the remaining blocks, runs
// them on those rows, and gives every row's hidden state to the output head: the last
// block's output for a row that ran, x1 plus the cached residual for a row that did not.
type FirstBlockCache struct {
	// Decide is given block 0's input x0 (the patch tokens) and output x1, [B, n, D] (n:
	// the tokens this member holds), and returns for each row whether the remaining
	// blocks run and, for a row that does not, the residual [n, D] of those blocks kept
	// from an earlier call.
	Decide func(x0, x1 *tensor.Dense) (run []bool, cached []*tensor.Dense, err error)
	// Ran is told each row that ran the remaining blocks, with their residual: the last
	// block's output minus x1, [n, D].
	Ran func(row int, residual *tensor.Dense)
}

// cachePrograms are the compiled segments of a one-rank forward with First Block Cache.
type cachePrograms struct {
	// first: hidden, timestep, ehs [, image] -> x0, x1, temb, tproj, ctx [, img].
	first *nn.Program
	// rest: x1, tproj, ctx, hidden (its shape) [, img] -> the last block's output.
	rest *nn.Program
	// head: x, temb, hidden (its shape) -> the prediction.
	head *nn.Program
}

// cacheState is the Model's lazily built First Block Cache segments.
type cacheState struct {
	cacheOnce sync.Once
	cache     *cachePrograms
	cacheErr  error
}

func (c *cacheState) closeCache() error {
	if c.cache == nil {
		return nil
	}
	return errors.Join(c.cache.first.Close(), c.cache.rest.Close(), c.cache.head.Close())
}

// gridRope is the rotary tables of the whole sample hidden describes, as graph constants
// [1, n, 1, d/2].
func gridRope(cfg Config, g *Graph, hidden []int) [2]*Node {
	sh := patchGrid(cfg, hidden)
	rc, rs, err := RopeTables(cfg, sh.F, sh.H, sh.W)
	if err != nil {
		panic(err)
	}
	ce, so := ropePairs(rc, rs, sh.Tokens, cfg.AttentionHeadDim)
	half := cfg.AttentionHeadDim / 2
	return [2]*Node{Reshape(Const(g, ce), 1, sh.Tokens, 1, half), Reshape(Const(g, so), 1, sh.Tokens, 1, half)}
}

func (m *Model) cachePrograms() (*cachePrograms, error) {
	m.cacheOnce.Do(func() { m.cache, m.cacheErr = newCachePrograms(m) })
	return m.cache, m.cacheErr
}

func newCachePrograms(m *Model) (*cachePrograms, error) {
	cfg := m.cfg
	b := m.prog.Backend()
	var errs []error
	mk := func(name string, build nn.BuildFunc) *nn.Program {
		prog, err := nn.NewProgram(b, m.weights, "wan-fbcache-"+name, build)
		errs = append(errs, err)
		return prog
	}
	p := &cachePrograms{}
	p.first = mk("first", func(s nn.Scope, in []*Node) []*Node {
		var img *Node
		if len(in) > 3 {
			img = in[3]
		}
		sh := shardShapes(cfg, in[0], in[1], in[2], img)
		e := embed(s, cfg, sh, in[0], in[1], in[2], img)
		x1 := block(s.In("blocks.0"), cfg, e.x, e.ctx, e.img, e.tproj, gridRope(cfg, in[0].Graph(), in[0].Shape().Dimensions))
		out := []*Node{e.x, x1, e.temb, e.tproj, e.ctx}
		if e.img != nil {
			out = append(out, e.img)
		}
		return out
	})
	p.rest = mk("rest", func(s nn.Scope, in []*Node) []*Node {
		var img *Node
		if len(in) > 4 {
			img = in[4]
		}
		x := in[0]
		rope := gridRope(cfg, x.Graph(), in[3].Shape().Dimensions)
		for l := 1; l < cfg.NumLayers; l++ {
			x = block(s.Inf("blocks.%d", l), cfg, x, in[2], img, in[1], rope)
		}
		return []*Node{x}
	})
	p.head = mk("head", func(s nn.Scope, in []*Node) []*Node {
		return []*Node{head(s, cfg, patchGrid(cfg, in[2].Shape().Dimensions), in[0], in[1])}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("wan/transformer: %w", err)
	}
	return p, nil
}

// runRows runs f on row ranges of n rows, as many at once as the backend runs rows in
// parallel (nn.RowParallelism, as Forward does), and joins each output along the rows.
func (m *Model) runRows(n int, f func(lo, hi int) ([]*tensor.Dense, error)) ([]*tensor.Dense, error) {
	if m.rowPar <= 1 || n == 1 || m.cfg.PosEmbedSeqLen > 0 {
		return f(0, n)
	}
	ranges := tensor.Chunks(n, m.rowPar, 0)
	outs := make([][]*tensor.Dense, len(ranges))
	errs := make([]error, len(ranges))
	var wg sync.WaitGroup
	for i, r := range ranges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = f(r[0], r[1])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	joined := make([]*tensor.Dense, len(outs[0]))
	for k := range joined {
		parts := make([]*tensor.Dense, len(outs))
		for i := range outs {
			parts[i] = outs[i][k]
		}
		t, err := tensor.ConcatRows(parts)
		if err != nil {
			return nil, err
		}
		joined[k] = t
	}
	return joined, nil
}

// rowsOf returns rows [lo, hi) of each input whose first axis is the batch of n rows
// (others, a shared timestep, as they are).
func rowsOf(in []*tensor.Dense, n, lo, hi int) []*tensor.Dense {
	out := make([]*tensor.Dense, len(in))
	for i, t := range in {
		if t != nil && len(t.Shape) > 0 && t.Shape[0] == n && n > 1 {
			out[i] = t.Rows(lo, hi)
		} else {
			out[i] = t
		}
	}
	return out
}

// ForwardCached is Forward with First Block Cache (see FirstBlockCache): the same inputs
// and output, the remaining blocks run only on the rows fb.Decide says.
func (m *Model) ForwardCached(hidden, timestep, ehs, image *tensor.Dense, fb FirstBlockCache) (*tensor.Dense, error) {
	sh, err := m.checkInputs(hidden, timestep, ehs, image)
	if err != nil {
		return nil, err
	}
	progs, err := m.cachePrograms()
	if err != nil {
		return nil, err
	}
	b := sh.Batch
	in := []*tensor.Dense{hidden, timestep, ehs}
	if image != nil {
		in = append(in, image)
	}
	e, err := m.runRows(b, func(lo, hi int) ([]*tensor.Dense, error) { return progs.first.Run(rowsOf(in, b, lo, hi)...) })
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: first block: %w", err)
	}
	x0, x1, temb, tproj, text := e[0], e[1], e[2], e[3], e[4]
	var img *tensor.Dense
	if len(e) > 5 {
		img = e[5]
	}
	x, err := remaining(x0, x1, fb, func(idx []int) (*tensor.Dense, error) {
		sub := []*tensor.Dense{x1.GatherRows(idx), tproj.GatherRows(idx), text.GatherRows(idx), hidden.GatherRows(idx)}
		if img != nil {
			sub = append(sub, img.GatherRows(idx))
		}
		out, err := m.runRows(len(idx), func(lo, hi int) ([]*tensor.Dense, error) { return progs.rest.Run(rowsOf(sub, len(idx), lo, hi)...) })
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}, m.cfg.NumLayers)
	if err != nil {
		return nil, err
	}
	out, err := m.runRows(b, func(lo, hi int) ([]*tensor.Dense, error) {
		return progs.head.Run(rowsOf([]*tensor.Dense{x, temb, hidden}, b, lo, hi)...)
	})
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: head: %w", err)
	}
	return out[0], nil
}

// remaining asks fb which rows run the blocks after block 0, runs them on those rows
// (run, given the rows' indices, returns the last block's output for them) and returns
// every row's hidden state for the head: the last block's output, or x1 plus the cached
// residual.
func remaining(x0, x1 *tensor.Dense, fb FirstBlockCache, run func(idx []int) (*tensor.Dense, error), layers int) (*tensor.Dense, error) {
	b := x1.Shape[0]
	per := x1.Len() / b
	ran, cached, err := fb.Decide(x0, x1)
	if err != nil {
		return nil, err
	}
	if len(ran) != b || len(cached) != b {
		return nil, fmt.Errorf("%w: the cache decided %d rows of %d", ErrInput, len(ran), b)
	}
	x := tensor.New(x1.Shape...)
	var idx []int
	for r := range b {
		if ran[r] {
			idx = append(idx, r)
			continue
		}
		c := cached[r]
		if c == nil || c.Len() != per {
			return nil, fmt.Errorf("%w: row %d skips the remaining blocks without a cached residual of %d values", ErrInput, r, per)
		}
		xr, x1r := x.Data[r*per:(r+1)*per], x1.Data[r*per:(r+1)*per]
		for i := range xr {
			xr[i] = c.Data[i] + x1r[i]
		}
	}
	if len(idx) == 0 {
		return x, nil
	}
	xl := x1.GatherRows(idx) // one block: the last block is block 0, nothing more runs
	if layers > 1 {
		if xl, err = run(idx); err != nil {
			return nil, fmt.Errorf("wan/transformer: remaining blocks: %w", err)
		}
	}
	for j, r := range idx {
		xr, x1r, lr := x.Data[r*per:(r+1)*per], x1.Data[r*per:(r+1)*per], xl.Data[j*per:(j+1)*per]
		copy(xr, lr)
		res := tensor.New(x1.Shape[1:]...)
		for i := range res.Data {
			res.Data[i] = lr[i] - x1r[i]
		}
		if fb.Ran != nil {
			fb.Ran(r, res)
		}
	}
	return x, nil
}

// FLOPs are one call's floating-point operations by part (two per multiply-add), for
// costing: the embeddings (patches, text, time), one transformer block, and the output
// head.
type FLOPs struct{ Embed, Block, Head float64 }

// CallFLOPs counts one row's transformer call on tokens tokens and textLen text tokens:
// matrix products and attention, the elementwise work left out.
func CallFLOPs(cfg Config, tokens, textLen int) FLOPs {
	n, l := float64(tokens), float64(textLen)
	d, f := float64(cfg.InnerDim()), float64(cfg.FFNDim)
	pv := float64(cfg.PatchVolume())
	self := 4*n*d*d + 2*n*n*d
	cross := 2*n*d*d + 2*l*d*d + 2*n*l*d
	ffn := 2 * n * d * f
	text := l * (float64(cfg.TextDim)*d + d*d)
	return FLOPs{
		Embed: 2 * (n*float64(cfg.InChannels)*pv*d + text),
		Block: 2 * (self + cross + ffn),
		Head:  2 * n * d * float64(cfg.OutChannels) * pv,
	}
}
