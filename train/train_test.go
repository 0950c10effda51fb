package train

import (
	stdcontext "context"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/tensor"
)

// microConfigs shrinks the networks so that a training step takes well under a second.
func microConfigs() Configs {
	c := TinyConfigs()
	c.VAE["block_out_channels"] = []int{32, 32}
	c.VAE["down_block_types"] = []string{"DownEncoderBlock2D", "DownEncoderBlock2D"}
	c.VAE["latent_channels"] = 4
	c.UNet["in_channels"], c.UNet["out_channels"] = 8, 4
	c.UNet["block_out_channels"] = []int{32, 32}
	c.UNet["num_attention_heads"] = []int{1, 1}
	c.UNet["num_frames"] = 2
	return c
}

func vaeExpected(cfg vae.Config) (map[string][]int, error) { return vae.ExpectedTensors(cfg) }

// microVAE returns the micro VAE's config and initial weights (InitWeights with seed and
// mixFactor).
func microVAE(t *testing.T, seed uint64, mixFactor float32) (vae.Config, map[string]*tensor.Dense) {
	t.Helper()
	_, vcfg, _, err := microConfigs().Parsed()
	if err != nil {
		t.Fatal(err)
	}
	exp, err := vaeExpected(vcfg)
	if err != nil {
		t.Fatal(err)
	}
	return vcfg, InitWeights(exp, seed, mixFactor)
}

// microUNet returns the micro UNet's config and initial weights (seed 1).
func microUNet(t *testing.T) (unet.Config, map[string]*tensor.Dense) {
	t.Helper()
	ucfg, _, _, err := microConfigs().Parsed()
	if err != nil {
		t.Fatal(err)
	}
	w, err := UNetInitWeights(ucfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ucfg, w
}

// unetBatch returns one fixed micro-UNet training batch: x0, noise, sigma 1.5, image
// latents, image embedding and added time ids.
func unetBatch() (x0, noise, sigma, lat, ehs, ids *tensor.Dense) {
	return fill(2, 1, 2, 4, 4, 4), fill(3, 1, 2, 4, 4, 4), &tensor.Dense{Shape: []int{1}, Data: []float32{1.5}},
		fill(4, 1, 4, 4, 4), fill(5, 1, 1, 64), &tensor.Dense{Shape: []int{1, 3}, Data: []float32{6, 127, 0.02}}
}

// frames returns random frames in (-1, 1): tanh of unit Gaussians.
func frames(seed uint64, shape ...int) *tensor.Dense {
	x := fill(seed, shape...)
	for i := range x.Data {
		x.Data[i] = float32(math.Tanh(float64(x.Data[i])))
	}
	return x
}

func equalAny(a, b any) bool { return reflect.DeepEqual(a, b) }

func fill(seed uint64, shape ...int) *tensor.Dense {
	r := rngFor(Options{Seed: seed}, 0)
	return normal(r, shape...)
}

// TestVAELossDecreases overfits one batch with the micro VAE: the loss must fall.
func TestVAELossDecreases(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	vcfg, w := microVAE(t, 1, 0)
	ctx := newContext(w)
	s, err := newStepper(b, ctx, 3e-3, 0, func(sc nn.Scope, in []*graph.Node) []*graph.Node {
		l, m := vaeLoss(sc, vcfg, in[0], in[1], 2)
		return []*graph.Node{l, m}
	})
	if err != nil {
		t.Fatal(err)
	}
	x := frames(1, 2, 3, 8, 8)
	eps := tensor.New(2, 4, 4, 4) // deterministic decoder input: the posterior mean
	var first, last float64
	for i := 0; i < 8; i++ {
		v, err := s.Step(x, eps)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = v[0]
		}
		last = v[0]
	}
	if !(last < 0.9*first) {
		t.Fatalf("loss %v -> %v: did not decrease by 10%%", first, last)
	}
}

// TestUNetLossDecreases overfits one batch with the micro UNet under the EDM v-loss.
func TestUNetLossDecreases(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	ucfg, w := microUNet(t)
	ctx := newContext(w)
	s, err := newStepper(b, ctx, 3e-3, 0, func(sc nn.Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{unetLoss(sc, ucfg, in[0], in[1], in[2], in[3], in[4], in[5])}
	})
	if err != nil {
		t.Fatal(err)
	}
	x0, noise, sigma, lat, ehs, ids := unetBatch()
	var first, last float64
	for i := 0; i < 6; i++ {
		v, err := s.Step(x0, noise, sigma, lat, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = v[0]
		}
		last = v[0]
	}
	if !(last < 0.9*first) {
		t.Fatalf("loss %v -> %v: did not decrease by 10%%", first, last)
	}
}

// TestResumeEqualsUninterrupted: 2 steps + resume to 4 gives the same weights, Adam state
// and loss log values as 4 steps in one go.
func TestResumeEqualsUninterrupted(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg := microConfigs()
	opts := func(dir string, steps int, resume bool) Options {
		o := DefaultOptions()
		o.Dir, o.Steps, o.Resume, o.Configs = dir, steps, resume, &cfg
		o.VAEFrames, o.VAECrop, o.CheckpointEvery, o.Train = 2, 16, 0, 8
		return o
	}
	a, c := t.TempDir(), t.TempDir()
	ra, err := Run(stdcontext.Background(), b, opts(a, 4, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(stdcontext.Background(), b, opts(c, 2, false)); err != nil {
		t.Fatal(err)
	}
	rc, err := Run(stdcontext.Background(), b, opts(c, 4, true))
	if err != nil {
		t.Fatal(err)
	}
	if rc.FromStep != 2 || rc.Step != 4 || ra.Step != 4 {
		t.Fatalf("steps: resumed %d -> %d, straight %d", rc.FromStep, rc.Step, ra.Step)
	}
	if ra.LastLoss != rc.LastLoss {
		t.Fatalf("last loss %v (straight) != %v (resumed)", ra.LastLoss, rc.LastLoss)
	}
	ca, _, err := loadContext(StatePath(a, PhaseVAE))
	if err != nil {
		t.Fatal(err)
	}
	cc, _, err := loadContext(StatePath(c, PhaseVAE))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for v := range ca.IterVariables() {
		w := cc.GetVariableByScopeAndName(v.Scope(), v.Name())
		if w == nil {
			t.Fatalf("resumed state lacks %s", v.ScopeAndName())
		}
		x, y := v.MustValue().Value(), w.MustValue().Value()
		if !equalAny(x, y) {
			t.Fatalf("variable %s differs after resume", v.ScopeAndName())
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d variables compared", n)
	}
	if _, err := os.Stat(LossLogPath(c)); err != nil {
		t.Fatal(err)
	}
	// The VAE checkpoint records the clip length it trained on (Export's decode chunk).
	if _, meta, err := loadContext(StatePath(c, PhaseVAE)); err != nil || meta[metaVAEFrames] != "2" {
		t.Fatalf("VAE checkpoint metadata %s = %q (%v), want 2", metaVAEFrames, meta[metaVAEFrames], err)
	}
	// The checkpoint records its dataset rule; resuming on another rule is refused.
	other := opts(c, 6, true)
	other.Rule = procedural.HeadingRule
	if other.Rule == DefaultOptions().Rule {
		other.Rule = procedural.ColourRule
	}
	if _, err := Run(stdcontext.Background(), b, other); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "rule") {
		t.Fatalf("resume on the %s rule: %v, want ErrOptions naming the rule", other.Rule, err)
	}
}

// microFolder writes a diffusers folder of the micro configs (VAE seed 42, UNet seed
// unetSeed) and returns it with its VAE and UNet weights.
func microFolder(t *testing.T, unetSeed uint64) (cfg Configs, folder string, vw, uw map[string]*tensor.Dense) {
	t.Helper()
	cfg = microConfigs()
	ucfg, vcfg, ccfg, err := cfg.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := vaeExpected(vcfg)
	vw = InitWeights(exp, 42, 0)
	uw, _ = UNetInitWeights(ucfg, unetSeed)
	cw, _ := CLIPWeights(ccfg, 1)
	folder = t.TempDir()
	if err := WriteFolder(folder, cfg, uw, vw, cw); err != nil {
		t.Fatal(err)
	}
	return cfg, folder, vw, uw
}

// checkpointWeights returns the model weights of a phase's checkpoint in dir.
func checkpointWeights(t *testing.T, dir, phase string) map[string]*tensor.Dense {
	t.Helper()
	ctx, _, err := loadContext(StatePath(dir, phase))
	if err != nil {
		t.Fatal(err)
	}
	w, err := modelWeights(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// requireSameWeights fails unless got holds exactly want's tensors, bit for bit.
func requireSameWeights(t *testing.T, what string, got, want map[string]*tensor.Dense) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for n, w := range want {
		if !tensor.BitEqual(got[n], w) {
			t.Fatalf("%s: tensor %s differs from the expected one", what, n)
		}
	}
}

// TestInitFromFolder: a phase started from a diffusers folder holds exactly its weights.
func TestInitFromFolder(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg, folder, vw, _ := microFolder(t, 1)
	o := DefaultOptions()
	o.Dir, o.Steps, o.Configs, o.InitFrom, o.CheckpointEvery = t.TempDir(), 0, &cfg, folder, 0
	if _, err := Run(stdcontext.Background(), b, o); err != nil {
		t.Fatal(err)
	}
	requireSameWeights(t, "vae", checkpointWeights(t, o.Dir, PhaseVAE), vw)
}

// TestInitFromFolderUNet: a UNet phase started from a folder into an empty run folder
// freezes the folder's VAE (written as the run's VAE checkpoint) and starts from its UNet;
// a VAE checkpoint already in the run folder is kept.
func TestInitFromFolderUNet(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg, folder, vw, uw := microFolder(t, 7)
	o := DefaultOptions()
	o.Phase, o.Train = PhaseUNet, 2
	o.Dir, o.Steps, o.Configs, o.InitFrom, o.CheckpointEvery = t.TempDir(), 0, &cfg, folder, 0
	if _, err := Run(stdcontext.Background(), b, o); err != nil {
		t.Fatal(err)
	}
	requireSameWeights(t, "vae", checkpointWeights(t, o.Dir, PhaseVAE), vw)
	requireSameWeights(t, "unet", checkpointWeights(t, o.Dir, PhaseUNet), uw)

	// A run folder with its own VAE keeps it.
	o.Dir = t.TempDir()
	v := o
	v.Phase, v.InitFrom, v.Seed = PhaseVAE, "", 43
	if _, err := Run(stdcontext.Background(), b, v); err != nil {
		t.Fatal(err)
	}
	own := checkpointWeights(t, o.Dir, PhaseVAE)
	if tensor.BitEqual(own["quant_conv.weight"], vw["quant_conv.weight"]) {
		t.Fatal("the run's own VAE equals the folder's; the test cannot tell them apart")
	}
	if _, err := Run(stdcontext.Background(), b, o); err != nil {
		t.Fatal(err)
	}
	requireSameWeights(t, "own vae", checkpointWeights(t, o.Dir, PhaseVAE), own)
}

func TestInitLogVar(t *testing.T) {
	vcfg, w := microVAE(t, 1, 0)
	before := w["quant_conv.bias"].Clone()
	initLogVar(w, vcfg.LatentChannels)
	b := w["quant_conv.bias"].Data
	lc := vcfg.LatentChannels
	for i := range b {
		want := before.Data[i]
		if i >= lc {
			want = initLogVarBias
		}
		if b[i] != want {
			t.Fatalf("quant_conv.bias[%d] = %v, want %v (mean half unchanged, log-variance half %v)", i, b[i], want, float32(initLogVarBias))
		}
	}
}

// TestCropAtHoldsAnObject: every VAE crop lies inside the frame and contains the centre of
// one of frame 0's objects.
func TestCropAtHoldsAnObject(t *testing.T) {
	dc := procedural.DefaultConfig()
	for _, cs := range []int{16, 32, 48} {
		r := rngFor(Options{Seed: 4}, cs)
		for i := 0; i < 200; i++ {
			sc := procedural.NewScene(dc, 1, procedural.Train, i)
			oy, ox := cropAt(r, sc, dc, cs)
			if oy < 0 || ox < 0 || oy+cs > dc.Height || ox+cs > dc.Width {
				t.Fatalf("crop %d at (%d, %d) leaves the %dx%d frame", cs, oy, ox, dc.Height, dc.Width)
			}
			held := false
			for _, o := range sc.Objects {
				if y, x := int(o.Y), int(o.X); y >= oy && y < oy+cs && x >= ox && x < ox+cs {
					held = true
				}
			}
			if !held {
				t.Fatalf("clip %d: crop %d at (%d, %d) holds no object centre of %+v", i, cs, oy, ox, sc.Objects)
			}
		}
	}
}
