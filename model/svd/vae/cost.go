package vae

// DecodeShape is what the temporal decoder's working memory depends on besides its config:
// the video, the chunking of the decode (Model.Decode: calls of Chunk frames, Parallel of
// them at once), the tiling (Model.WithTiling) and how the backend runs the graph.
type DecodeShape struct {
	// Frames, Height and Width are the decoded video's: frames of Height x Width pixels.
	Frames, Height, Width int
	// Chunk is the frames of one decoder call (decode_chunk_size; <= 0 or >= Frames: all
	// frames in one call).
	Chunk int
	// Parallel is how many calls run at once (nn.RowParallelism of the backend; < 1: 1).
	Parallel int
	// Tile is the side of a spatial tile in pixels (Tiling.Sample, overlap
	// DefaultTileOverlap); 0: untiled.
	Tile int
	// Fused says the convolutions and the mid block's attention run as vdpp's fused CPU
	// ops, which gather patches and block scores a piece at a time (nn.UsesKernels);
	// otherwise the attention's scores are whole, and with Im2Col a convolution's patches
	// are gathered whole (nn.ConvIm2Col).
	Fused, Im2Col bool
	// GoHeap says the buffers live on the Go heap (simplego), whose collector lets it grow
	// to twice the live set (GOGC=100) before it collects.
	GoHeap bool
}

// decodeCopies is how many copies of a convolution's input and output a decoder block
// keeps besides the convolution's own input and output: the GroupNorm+SiLU output, the
// transposes between frame-major and channel-major that mix the spatial and temporal
// paths, the mix factor's two products and their sum. It is checked against measured peak
// resident memory (docs/measurements/serve-i2v-memory-2026-12-07.md): with 2 the estimate
// came within 15 % of the largest growth measured, less than the growth varies between
// runs; with 3 it is 1.3 to 1.6 times it.
const decodeCopies = 3

// im2colPatches is how many copies of a convolution's gathered patches the im2col form
// holds at once: the kernel offsets' slices, their stacked concatenation and the matrix
// product's blocked copy of its operand (checked against measured peak resident memory
// with the fused ops off, as decodeCopies is).
const im2colPatches = 3

// DecodeBytes estimates the resident bytes of decoding one video of shape s with the
// temporal decoder (weights not included): Parallel calls at once, each the live set of
// the decoder's largest step on Chunk frames of a tile (or of the whole frame) — a
// spatio-temporal resnet's block input, its convolution's input and output, the copies
// (decodeCopies), whole im2col patches, the mid block's whole attention scores — with
// the tiles' decoded frames a call holds, plus the decoded video three times (the calls'
// outputs, their concatenation and the caller's [0, 1] copy) and the latents. Twice that
// on the Go heap. DecodeBytes is pure; it is 0 for an empty video or config.
func (c Config) DecodeBytes(s DecodeShape) int64 {
	n := len(c.BlockOutChannels)
	if n == 0 || s.Frames <= 0 || s.Height <= 0 || s.Width <= 0 {
		return 0
	}
	frames := int64(s.Frames)
	chunk := frames
	if s.Chunk > 0 && int64(s.Chunk) < frames {
		chunk = int64(s.Chunk)
	}
	calls := (frames + chunk - 1) / chunk
	parallel := min(int64(max(s.Parallel, 1)), calls)
	f := int64(c.DownsampleFactor())
	th, tw := int64(s.Height), int64(s.Width)
	tileHeld := int64(0)
	if s.Tile > 0 && (th > int64(s.Tile) || tw > int64(s.Tile)) {
		// tiled keeps every tile's frames until it blends them: tiles start every
		// tile·(1−overlap) latent pixels.
		lt := int64(s.Tile) / f
		stride := max(int64(float64(lt)*(1-DefaultTileOverlap)), 1)
		lh, lw := th/f, tw/f
		tiles := ((lh + stride - 1) / stride) * ((lw + stride - 1) / stride)
		th, tw = min(th, int64(s.Tile)), min(tw, int64(s.Tile))
		tileHeld = tiles*int64(c.OutChannels)*chunk*th*tw + 2*int64(c.OutChannels)*chunk*int64(s.Height)*int64(s.Width)
	}
	area := (th / f) * (tw / f) // positions of a frame at the current level
	peak := int64(0)
	// conv counts a convolution from cin to cout channels with a k x k spatial kernel (1:
	// the temporal convolution) on a block whose input holds in channels, at the current
	// area (the upsampler's block input is a quarter of that).
	conv := func(in, cin, cout, k int64) {
		x := chunk * area
		live := (in + cin + cout + decodeCopies*(cin+cout)) * x
		if s.Im2Col {
			live += im2colPatches * k * k * cin * x
			if k == 1 {
				live += im2colPatches * 3 * cin * x // the temporal kernel's three frames
			}
		}
		peak = max(peak, live)
	}
	resnet := func(cin, cout int64) {
		conv(cin, cin, cout, 3)   // the spatial resnet's conv1
		conv(cin, cout, cout, 3)  // its conv2
		conv(cout, cout, cout, 1) // the temporal resnet's convolutions
	}
	top := int64(c.BlockOutChannels[n-1])
	conv(int64(c.LatentChannels), int64(c.LatentChannels), top, 3) // conv_in
	resnet(top, top)
	if c.LayersPerBlock >= 2 && !s.Fused {
		// The mid block's attention, one head over each frame's positions: the scores and
		// their softmax, q, k, v and the output beside the block input.
		peak = max(peak, 2*chunk*area*area+5*top*chunk*area)
	}
	out := top
	for i := range n {
		prev := out
		out = int64(c.BlockOutChannels[n-1-i])
		for j := range c.LayersPerBlock + 1 {
			cin := out
			if j == 0 {
				cin = prev
			}
			resnet(cin, out)
		}
		if i < n-1 {
			area *= 4
			conv(out/4, out, out, 3) // nearest 2x, then the 3x3 at the new size
		}
	}
	c0, oc := int64(c.BlockOutChannels[0]), int64(c.OutChannels)
	conv(c0, c0, oc, 3) // conv_norm_out, conv_out (then time_conv_out on out channels)
	video := oc * frames * int64(s.Height) * int64(s.Width)
	latents := 2 * int64(c.LatentChannels) * frames * (int64(s.Height) / f) * (int64(s.Width) / f)
	live := 4 * (parallel*(peak+tileHeld) + 3*video + latents)
	if s.GoHeap {
		return 2 * live
	}
	return live
}
