package transformer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/cp"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Frames places a context-parallel member's shard of the token sequence: it holds latent
// frames [Lo, Hi) of Total, which are tokens [Lo/p_t·h·w, Hi/p_t·h·w) (tokens run frame
// by frame). The members of a group, in member order, hold consecutive ranges covering
// [0, Total); each range's size must be a multiple of the temporal patch size p_t.
type Frames = cp.Frames

// Comm is what ForwardFrames needs from the context-parallel group (model.FrameComm, which
// a comm.Group is). Every member must make the same sequence of calls.
type Comm = cp.Comm

// ErrFrames: the members' shards, the head count or the input shapes do not fit a
// context-parallel forward.
var ErrFrames = errors.New("wan/transformer: context-parallel shards do not fit")

// HeadRanges splits heads attention heads over size members: contiguous ranges whose sizes
// differ by at most one (larger first), so head counts not divisible by size work. Every
// member needs at least one head.
func HeadRanges(heads, size int) ([][2]int, error) {
	if size < 1 || heads < size {
		return nil, fmt.Errorf("%w: %d attention heads cannot be split over %d members (each needs one)", ErrFrames, heads, size)
	}
	return cp.Split(heads, size), nil
}

// ForwardFrames is Forward evaluated by one member of a context-parallel group (Ulysses
// sequence parallelism): hidden [B, in_channels, Hi-Lo, H, W] holds latent frames
// [part.Lo, part.Hi) of every row, so the member holds a contiguous shard of the token
// sequence; timestep is a scalar, [1], [B] or, per token, [B, shard tokens]; ehs and
// image are the whole rows' (the same on every member). The result is the prediction for
// the member's frames, [B, out_channels, Hi-Lo, H', W']; joined over the members it
// matches Forward on all frames to fp32 rounding.
//
// The patch and condition embeddings, the modulation, the q/k/v projections with their
// RMS norm over all heads, RoPE (the tables of the shard's positions), the cross-attention,
// the feed-forward and the output head run on the shard. Around each self-attention an
// all-to-all turns the sequence shards of q, k, v into head shards (each member gets every
// token for its heads, HeadRanges: head counts need not divide by the group size) and a
// second one turns the attention output back. The network runs as compiled segments between
// these exchanges. Sequence lengths need not divide by the group size either: shards may
// differ in size.
func (m *Model) ForwardFrames(ctx context.Context, hidden, timestep, ehs, image *tensor.Dense, part Frames, comm Comm) (*tensor.Dense, error) {
	return m.forwardFrames(ctx, hidden, timestep, ehs, image, part, comm, nil)
}

// ForwardFramesCached is ForwardFrames with First Block Cache (see FirstBlockCache): fb's
// Decide sees this member's tokens of x0 and x1, and must return the same rows on every
// member of the group (each member then runs the same exchanges).
func (m *Model) ForwardFramesCached(ctx context.Context, hidden, timestep, ehs, image *tensor.Dense, part Frames, comm Comm, fb FirstBlockCache) (*tensor.Dense, error) {
	return m.forwardFrames(ctx, hidden, timestep, ehs, image, part, comm, &fb)
}

func (m *Model) forwardFrames(ctx context.Context, hidden, timestep, ehs, image *tensor.Dense, part Frames, comm Comm, fb *FirstBlockCache) (*tensor.Dense, error) {
	if comm == nil {
		return nil, fmt.Errorf("%w: nil comm", ErrFrames)
	}
	cfg := m.cfg
	sh, err := m.checkInputs(hidden, timestep, ehs, image)
	if err != nil {
		return nil, err
	}
	pt := cfg.PatchSize[0]
	if part.Lo < 0 || part.Hi <= part.Lo || part.Hi > part.Total || sh.Frames != part.Hi-part.Lo {
		return nil, fmt.Errorf("%w: hidden_states %v hold %d frames, the shard [%d, %d) of %d", ErrFrames, hidden.Shape, sh.Frames, part.Lo, part.Hi, part.Total)
	}
	if part.Lo%pt != 0 || sh.Frames%pt != 0 {
		return nil, fmt.Errorf("%w: the shard [%d, %d) is not whole patches of %d frames (patch_size %v)", ErrFrames, part.Lo, part.Hi, pt, cfg.PatchSize)
	}
	if sh.Height%cfg.PatchSize[1] != 0 || sh.Width%cfg.PatchSize[2] != 0 {
		return nil, fmt.Errorf("%w: hidden_states %v: height and width must be multiples of the patch %v", ErrFrames, hidden.Shape, cfg.PatchSize)
	}
	heads, err := HeadRanges(cfg.NumAttentionHeads, comm.Size())
	if err != nil {
		return nil, err
	}
	// The rotary tables of the shard's positions.
	rc, rs, err := RopeTables(cfg, part.Total/pt, sh.H, sh.W)
	if err != nil {
		return nil, err
	}
	d := cfg.AttentionHeadDim
	off := part.Lo / pt * sh.H * sh.W
	ce, so := ropePairs(rc[off*d:(off+sh.Tokens)*d], rs[off*d:(off+sh.Tokens)*d], sh.Tokens, d)
	rope := [2]*tensor.Dense{{Shape: []int{sh.Tokens, d / 2}, Data: ce}, {Shape: []int{sh.Tokens, d / 2}, Data: so}}

	progs, err := m.cpPrograms()
	if err != nil {
		return nil, err
	}
	in := []*tensor.Dense{hidden, timestep, ehs}
	if image != nil {
		in = append(in, image)
	}
	e, err := progs.embed.Run(in...)
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: cp embed: %w", err)
	}
	x, temb, tproj, text := e[0], e[1], e[2], e[3]
	var img *tensor.Dense
	if len(e) > 4 {
		img = e[4]
	}
	ex := &ulysses{ctx: ctx, comm: comm, heads: heads, headDim: d, off: off, tokens: sh.Tokens}
	// blocks runs layers [from, to) on x with the rows' tproj, text and img.
	blocks := func(x, tproj, text, img *tensor.Dense, from, to int) (*tensor.Dense, error) {
		blockIn := []*tensor.Dense{nil, nil, tproj, text}
		if img != nil {
			blockIn = append(blockIn, img)
		}
		for l := from; l < to; l++ {
			qkv, err := progs.qkv[l].Run(x, tproj, rope[0], rope[1])
			if err != nil {
				return nil, fmt.Errorf("wan/transformer: cp block %d: %w", l, err)
			}
			full, err := ex.toHeads(qkv[0])
			if err != nil {
				return nil, fmt.Errorf("wan/transformer: cp block %d: %w", l, err)
			}
			att, err := progs.attn.Run(full)
			if err != nil {
				return nil, fmt.Errorf("wan/transformer: cp block %d attention: %w", l, err)
			}
			back, err := ex.toSequence(att[0])
			if err != nil {
				return nil, fmt.Errorf("wan/transformer: cp block %d: %w", l, err)
			}
			blockIn[0], blockIn[1] = x, back
			out, err := progs.rest[l].Run(blockIn...)
			if err != nil {
				return nil, fmt.Errorf("wan/transformer: cp block %d: %w", l, err)
			}
			x = out[0]
		}
		return x, nil
	}
	if fb == nil {
		if x, err = blocks(x, tproj, text, img, 0, cfg.NumLayers); err != nil {
			return nil, err
		}
	} else {
		x1, err := blocks(x, tproj, text, img, 0, 1)
		if err != nil {
			return nil, err
		}
		x, err = remaining(x, x1, *fb, func(idx []int) (*tensor.Dense, error) {
			var subImg *tensor.Dense
			if img != nil {
				subImg = img.GatherRows(idx)
			}
			return blocks(x1.GatherRows(idx), tproj.GatherRows(idx), text.GatherRows(idx), subImg, 1, cfg.NumLayers)
		}, cfg.NumLayers)
		if err != nil {
			return nil, err
		}
	}
	out, err := progs.head.Run(x, temb, hidden)
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: cp head: %w", err)
	}
	return out[0], nil
}

// cpPrograms are the compiled segments of a context-parallel forward (shapes are the
// Program's business: each compiles per distinct input shapes).
type cpPrograms struct {
	embed, attn, head *nn.Program
	qkv, rest         []*nn.Program
}

// cpPrograms returns the model's segments, creating them on first use.
func (m *Model) cpPrograms() (*cpPrograms, error) {
	m.cpOnce.Do(func() { m.cp, m.cpErr = newCPPrograms(m) })
	return m.cp, m.cpErr
}

func newCPPrograms(m *Model) (*cpPrograms, error) {
	cfg := m.cfg
	b := m.prog.Backend()
	p := &cpPrograms{}
	var errs []error
	mk := func(name string, w *nn.Weights, build nn.BuildFunc) *nn.Program {
		prog, err := nn.NewProgram(b, w, "wan-cp-"+name, build)
		errs = append(errs, err)
		return prog
	}
	// embed: hidden shard, timestep, ehs [, image] -> x, temb, tproj, ctx [, img].
	p.embed = mk("embed", m.weights, func(s nn.Scope, in []*Node) []*Node {
		var img *Node
		if len(in) > 3 {
			img = in[3]
		}
		sh := shardShapes(cfg, in[0], in[1], in[2], img)
		e := embed(s, cfg, sh, in[0], in[1], in[2], img)
		out := []*Node{e.x, e.temb, e.tproj, e.ctx}
		if e.img != nil {
			out = append(out, e.img)
		}
		return out
	})
	// attn: q, k, v of this member's heads for every token, [3, B, N, h·d] -> [B, N, h·d].
	p.attn = mk("attn", nil, func(_ nn.Scope, in []*Node) []*Node {
		qkv := in[0]
		heads := qkv.Shape().Dim(3) / cfg.AttentionHeadDim
		q := Squeeze(SliceAxis(qkv, 0, AxisElem(0)), 0)
		k := Squeeze(SliceAxis(qkv, 0, AxisElem(1)), 0)
		v := Squeeze(SliceAxis(qkv, 0, AxisElem(2)), 0)
		return []*Node{attend(q, k, v, heads)}
	})
	// head: x, temb, hidden shard (for its shape) -> the shard's prediction.
	p.head = mk("head", m.weights, func(s nn.Scope, in []*Node) []*Node {
		sh := patchGrid(cfg, in[2].Shape().Dimensions)
		return []*Node{head(s, cfg, sh, in[0], in[1])}
	})
	half := cfg.AttentionHeadDim / 2
	for l := range cfg.NumLayers {
		// qkv: x [B, n, D], tproj, rope cos/sin [n, d/2] -> [3, B, n, D].
		p.qkv = append(p.qkv, mk(fmt.Sprintf("qkv-%d", l), m.weights, func(s nn.Scope, in []*Node) []*Node {
			n := in[0].Shape().Dim(1)
			rope := [2]*Node{Reshape(in[2], 1, n, 1, half), Reshape(in[3], 1, n, 1, half)}
			q, k, v := selfAttnQKV(s.Inf("blocks.%d", l), cfg, in[0], in[1], rope)
			return []*Node{Stack([]*Node{q, k, v}, 0)}
		}))
		// rest: x, attention output [B, n, D], tproj, ctx [, img] -> x.
		p.rest = append(p.rest, mk(fmt.Sprintf("rest-%d", l), m.weights, func(s nn.Scope, in []*Node) []*Node {
			var img *Node
			if len(in) > 4 {
				img = in[4]
			}
			return []*Node{blockRest(s.Inf("blocks.%d", l), cfg, in[0], in[1], in[3], img, in[2])}
		}))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("wan/transformer: %w", err)
	}
	return p, nil
}

// patchGrid describes hidden [B, C, F, H, W] as patches (no timestep or context).
func patchGrid(cfg Config, hidden []int) Shapes {
	p := cfg.PatchSize
	s := Shapes{Batch: hidden[0], Frames: hidden[2], Height: hidden[3], Width: hidden[4]}
	s.F, s.H, s.W = s.Frames/p[0], s.Height/p[1], s.Width/p[2]
	s.Tokens = s.F * s.H * s.W
	return s
}

// shardShapes is CheckInputs for a shard's inputs inside a graph (ForwardFrames checked them).
func shardShapes(cfg Config, hidden, timestep, ehs, image *Node) Shapes {
	var imgDims []int
	if image != nil {
		imgDims = image.Shape().Dimensions
	}
	sh, err := CheckInputs(cfg, hidden.Shape().Dimensions, timestep.Shape().Dimensions, ehs.Shape().Dimensions, imgDims)
	if err != nil {
		panic(err)
	}
	return sh
}

// ulysses is one forward's exchanges between sequence shards and head shards.
type ulysses struct {
	ctx     context.Context
	comm    Comm
	heads   [][2]int // every member's heads
	headDim int
	off     int // this member's first token
	tokens  int // this member's token count
	counts  []int
}

// toHeads sends every member its heads of this shard's q, k, v [3, B, n, D] and joins what
// the members send into this member's heads for every token, [3, B, N, h·d] (members in
// sequence order; cp.Reshard over the heads' columns). It records the members' token
// counts for toSequence.
func (u *ulysses) toHeads(qkv *tensor.Dense) (*tensor.Dense, error) {
	s := qkv.Shape
	if len(s) != 4 || s[0] != 3 || s[2] != u.tokens {
		return nil, fmt.Errorf("%w: q/k/v %v, want [3, B, %d, D]", ErrFrames, s, u.tokens)
	}
	out, counts, err := cp.Reshard(u.ctx, u.comm, &tensor.Dense{Shape: []int{3 * s[1], s[2], s[3], 1}, Data: qkv.Data}, u.columns())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFrames, err)
	}
	me, before := u.comm.Index(), 0
	for _, c := range counts[:me] {
		before += c
	}
	if before != u.off {
		return nil, fmt.Errorf("%w: member %d's shard starts at token %d, the members before it hold %d (shards must be in member order)", ErrFrames, me, u.off, before)
	}
	u.counts = counts
	return &tensor.Dense{Shape: []int{3, s[1], out.Shape[1], out.Shape[2]}, Data: out.Data}, nil
}

// columns are every member's heads as ranges of columns of q, k, v.
func (u *ulysses) columns() [][2]int {
	out := make([][2]int, len(u.heads))
	for j, h := range u.heads {
		out[j] = [2]int{h[0] * u.headDim, h[1] * u.headDim}
	}
	return out
}

// toSequence is the inverse of toHeads for the attention output [B, N, h·d]: every member
// gets its tokens of this member's heads, and this member joins the heads of its tokens
// into [B, n, D] (cp.Unshard).
func (u *ulysses) toSequence(att *tensor.Dense) (*tensor.Dense, error) {
	s := att.Shape
	if len(s) != 3 {
		return nil, fmt.Errorf("%w: attention output %v, want [B, N, h·d]", ErrFrames, s)
	}
	out, err := cp.Unshard(u.ctx, u.comm, &tensor.Dense{Shape: []int{s[0], s[1], s[2], 1}, Data: att.Data}, u.columns(), u.counts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFrames, err)
	}
	return &tensor.Dense{Shape: []int{s[0], u.tokens, out.Shape[2]}, Data: out.Data}, nil
}

func denseShape(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}

// cpState is the Model's lazily built context-parallel segments.
type cpState struct {
	cpOnce sync.Once
	cp     *cpPrograms
	cpErr  error
}

// closeCP releases the segments' compiled graphs.
func (c *cpState) closeCP() error {
	if c.cp == nil {
		return nil
	}
	var errs []error
	for _, p := range append([]*nn.Program{c.cp.embed, c.cp.attn, c.cp.head}, append(c.cp.qkv, c.cp.rest...)...) {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
