package unetcost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/safetensors"
)

// TestXTStateDict checks the structure walk against the real SVD-XT key list
// (the real checkpoint: 1428 tensors, 1,524,623,082 parameters).
func TestXTStateDict(t *testing.T) {
	c, err := Count(XTConfig(), Shape{Batch: 1, Frames: 14, Height: 72, Width: 128})
	if err != nil {
		t.Fatal(err)
	}
	if c.Tensors != 1428 || c.Params != 1524623082 {
		t.Errorf("tensors %d params %d, want 1428 and 1524623082", c.Tensors, c.Params)
	}
}

// TestDevStateDict checks the walk against the dev checkpoint's own file: a config with
// two levels, other widths and head counts.
func TestDevStateDict(t *testing.T) {
	dir := shared.Require(t, "golden", "dev", "unet")
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := unet.ParseConfig("config.json", raw)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(dir, "diffusion_pytorch_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var params int64
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		n := int64(1)
		for _, d := range info.Shape {
			n *= int64(d)
		}
		params += n
	}
	c, err := Count(cfg, Shape{Batch: 2, Frames: 3, Height: 16, Width: 16})
	if err != nil {
		t.Fatal(err)
	}
	if c.Tensors != int64(f.Len()) || c.Params != params {
		t.Errorf("counted %d tensors %d params, file has %d and %d", c.Tensors, c.Params, f.Len(), params)
	}
}

// tinyConfig is one cross-attention level (no down/upsampling): conv_in, one resnet +
// transformer down, the mid block, two resnets + transformers up, conv_out.
func tinyConfig(t *testing.T) unet.Config {
	t.Helper()
	cfg, err := unet.ParseConfig("tiny", []byte(`{"block_out_channels": [64], "layers_per_block": 1,
		"down_block_types": ["CrossAttnDownBlockSpatioTemporal"], "up_block_types": ["CrossAttnUpBlockSpatioTemporal"],
		"num_attention_heads": 1, "cross_attention_dim": 48, "addition_time_embed_dim": 16,
		"projection_class_embeddings_input_dim": 48}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTinyByHand compares Count with the FLOPs of the tiny config summed by hand, module
// by module.
func TestTinyByHand(t *testing.T) {
	const (
		B, T, H, W = 2, 3, 4, 6
		C, D, E    = 64.0, 48.0, 256.0
		N          = B * T
		S          = H * W
		P          = N * S // pixels = tokens
	)
	// ResBlock(cin, C): spatial convs, time projections, shortcut, temporal convs.
	res := func(cin float64) (conv, lin float64) {
		conv = 2*P*9*cin*C + 2*P*9*C*C + 2*P*3*C*C*2
		if cin != C {
			conv += 2 * P * cin * C
		}
		return conv, 2 * 2 * N * E * C
	}
	// Transformer: proj_in/out, pos embedding, spatial block, temporal block.
	tfLin := 2*2*P*C*C + 2*N*C*4*C*2 +
		2*P*C*C*4 + (2*P*C*C*2 + 2*N*D*C*2) + 2*P*C*8*C + 2*P*4*C*C + // attn1, attn2, ff
		2*(2*P*C*8*C+2*P*4*C*C) + 2*P*C*C*4 + (2*P*C*C*2 + 2*B*S*D*C*2) // ff_in + ff, attn1, attn2
	tfSpatial := 2*2*N*S*S*C + 2*2*P*C
	tfTemporal := 2*2*B*S*T*T*C + 2*2*P*C
	var conv, lin float64
	conv += 2 * P * 9 * 8 * C                              // conv_in
	conv += 2 * P * 9 * C * 4                              // conv_out
	lin += 2 * B * (C*E + E*E + 48*E + E*E)                // time and added-time embeddings
	for _, cin := range []float64{C, C, C, 2 * C, 2 * C} { // down, mid x2, up x2 (concat with skips)
		c, l := res(cin)
		conv, lin = conv+c, lin+l
	}
	lin += 4 * tfLin // down, mid, up x2
	want := Cost{Conv: conv, Linear: lin, SpatialAttention: 4 * tfSpatial, TemporalAttention: 4 * tfTemporal}
	want.Total = want.Conv + want.Linear + want.SpatialAttention + want.TemporalAttention

	got, err := Count(tinyConfig(t), Shape{B, T, H, W})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name      string
		got, want float64
	}{{"conv", got.Conv, want.Conv}, {"linear", got.Linear, want.Linear}, {"spatial attention", got.SpatialAttention, want.SpatialAttention},
		{"temporal attention", got.TemporalAttention, want.TemporalAttention}, {"total", got.Total, want.Total}} {
		if p.got != p.want {
			t.Errorf("%s: %g FLOPs, want %g", p.name, p.got, p.want)
		}
	}
}

// TestScaling checks how the count moves with the shape.
func TestScaling(t *testing.T) {
	cfg := XTConfig()
	base, _ := Count(cfg, Shape{1, 14, 72, 128})
	twice, _ := Count(cfg, Shape{2, 14, 72, 128})
	if twice.Total != 2*base.Total || twice.Params != base.Params {
		t.Errorf("batch 2 gives %g FLOPs (x%.3f), want exactly x2", twice.Total, twice.Total/base.Total)
	}
	more, _ := Count(cfg, Shape{1, 28, 72, 128})
	// Doubling the frames doubles convolutions and spatial attention; linear layers a bit
	// less (the time embeddings and the temporal cross-attention keys are per video); the
	// temporal attention's frame-by-frame products grow x4 (its one-key part x2).
	for _, p := range []struct {
		name      string
		got, want float64
	}{{"conv", more.Conv, 2 * base.Conv}, {"spatial", more.SpatialAttention, 2 * base.SpatialAttention}} {
		if p.got != p.want {
			t.Errorf("28 frames, %s: %g FLOPs, want %g", p.name, p.got, p.want)
		}
	}
	if r := more.Linear / base.Linear; r >= 2 || r < 1.99 {
		t.Errorf("28 frames: linear x%.4f, want in [1.99, 2)", r)
	}
	if r := more.TemporalAttention / base.TemporalAttention; r <= 2 || r >= 4 {
		t.Errorf("28 frames: temporal attention x%.3f, want in (2, 4)", r)
	}
	// SVD-XT at 576x1024, 25 frames, batch 2 is in the hundreds of TFLOPs a call.
	xt, _ := Count(cfg, Shape{2, 25, 72, 128})
	if xt.Total < 1e14 || xt.Total > 1e15 {
		t.Errorf("SVD-XT 2x25x72x128: %g FLOPs, outside [1e14, 1e15]", xt.Total)
	}
}

func TestCountErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  unet.Config
		s    Shape
	}{
		{"empty shape", XTConfig(), Shape{0, 14, 72, 128}},
		{"invalid config", unet.Config{}, Shape{1, 1, 8, 8}},
	}
	for _, tc := range cases {
		if _, err := Count(tc.cfg, tc.s); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestPeakActivation checks the working-memory estimate against the largest tensor worked
// out by hand: SVD-XT's first spatial attention, scores and softmax over 72·128 tokens.
func TestPeakActivation(t *testing.T) {
	cfg := XTConfig()
	c, _ := Count(cfg, Shape{2, 25, 72, 128})
	s := float64(72 * 128)
	if want := 2 * 4 * 50 * 5 * s * s; c.PeakActivationBytes != want {
		t.Errorf("SVD-XT 2x25x72x128: peak %g bytes, want %g", c.PeakActivationBytes, want)
	}
	// Twice the height and width: the spatial scores grow x16.
	big, _ := Count(cfg, Shape{2, 25, 144, 256})
	if r := big.PeakActivationBytes / c.PeakActivationBytes; r != 16 {
		t.Errorf("twice the size: peak x%g, want x16", r)
	}
}

// TestPartsReadTheirWeights: for every branch, the shallow and probe parts count exactly
// the weights unet's DeepCache calls read (declared from the same graph-building code),
// and their FLOPs lie strictly between nothing and the whole call.
func TestPartsReadTheirWeights(t *testing.T) {
	three, err := unet.ParseConfig("three", []byte(`{"block_out_channels": [32, 32, 64], "layers_per_block": [1, 2, 1],
		"down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
		"up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
		"num_attention_heads": 2, "cross_attention_dim": 8, "addition_time_embed_dim": 4,
		"projection_class_embeddings_input_dim": 12, "in_channels": 6, "out_channels": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	shape := Shape{Batch: 1, Frames: 2, Height: 16, Width: 16}
	for name, cfg := range map[string]unet.Config{"xt": XTConfig(), "tiny": tinyConfig(t), "three": three} {
		whole, err := Count(cfg, shape)
		if err != nil {
			t.Fatal(err)
		}
		for branch := range unet.Branches(cfg) {
			for _, part := range []Part{Shallow, Probe} {
				got, err := CountPart(cfg, shape, part, branch)
				if err != nil {
					t.Fatal(err)
				}
				params, tensors, cut := declared(t, cfg, shape, part, branch)
				if got.Params != params || got.Tensors != tensors || got.CutBytes != cut {
					t.Errorf("%s branch %d part %d: counted %d params in %d tensors and a %g-byte cut, the call reads %d in %d and cuts %g bytes",
						name, branch, part, got.Params, got.Tensors, got.CutBytes, params, tensors, cut)
				}
				if !(got.Total > 0 && got.Total < whole.Total) {
					t.Errorf("%s branch %d part %d: %g FLOPs of a whole call's %g", name, branch, part, got.Total, whole.Total)
				}
			}
		}
	}
	if _, err := CountPart(XTConfig(), shape, Shallow, unet.Branches(XTConfig())); err == nil {
		t.Error("a branch past the last was counted")
	}
}

// declared counts the parameters and tensors unet's call of part at branch reads, and the
// bytes of the feature (Shallow) or skip (Probe) at the branch.
func declared(t *testing.T, cfg unet.Config, s Shape, part Part, branch int) (params, tensors int64, cut float64) {
	t.Helper()
	inputs := func(g *graph.Graph) (sample, ts, ehs, ids *graph.Node) {
		return graph.Parameter(g, "sample", nn.F32(s.Batch, s.Frames, cfg.InChannels, s.Height, s.Width)),
			graph.Parameter(g, "timestep", nn.F32(1)),
			graph.Parameter(g, "ehs", nn.F32(s.Batch, 1, cfg.CrossAttentionDim[0])),
			graph.Parameter(g, "ids", nn.F32(s.Batch, cfg.NumAddedTimeIDs()))
	}
	var feature []int
	if _, err := nn.DeclareShapes(func(sc nn.Scope, g *graph.Graph) error {
		a, b, c, d := inputs(g)
		_, f := unet.BuildKeep(sc, cfg, branch, a, b, c, d)
		feature = f.Shape().Dimensions
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	exp, err := nn.DeclareShapes(func(sc nn.Scope, g *graph.Graph) error {
		a, b, c, d := inputs(g)
		if part == Probe {
			skips := unet.BuildProbe(sc, cfg, branch, a, b, c, d)
			feature = skips[len(skips)-1].Shape().Dimensions
		} else {
			unet.BuildShallow(sc, cfg, branch, graph.Parameter(g, "feature", nn.F32(feature...)), a, b, c, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range exp {
		n := int64(1)
		for _, d := range shape {
			n *= int64(d)
		}
		params += n
		tensors++
	}
	cut = 4
	for _, d := range feature {
		cut *= float64(d)
	}
	return params, tensors, cut
}
