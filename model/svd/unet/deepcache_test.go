package unet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// shallowWeights lists the module prefixes whose weights a shallow DeepCache call at
// branch reads (declared, nothing compiled).
func shallowWeights(t *testing.T, cfg Config, branch int) map[string]bool {
	t.Helper()
	side := 1 << (cfg.NumBlocks() - 1)
	exp, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
		sample := graph.Parameter(g, "sample", nn.F32(1, 2, cfg.InChannels, 2*side, 2*side))
		ts := graph.Parameter(g, "timestep", nn.F32(1))
		ehs := graph.Parameter(g, "ehs", nn.F32(1, 1, cfg.CrossAttentionDim[0]))
		ids := graph.Parameter(g, "ids", nn.F32(1, cfg.NumAddedTimeIDs()))
		fs := featureShape(t, cfg, branch, 2*side)
		feature := graph.Parameter(g, "feature", nn.F32(append([]int{1, 2}, fs...)...))
		BuildShallow(s, cfg, branch, feature, sample, ts, ehs, ids)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mods := map[string]bool{}
	for name := range exp {
		mods[module(name)] = true
	}
	return mods
}

// featureShape is the [C, h, w] of the feature at branch for a square latent of side.
func featureShape(t *testing.T, cfg Config, branch, side int) []int {
	t.Helper()
	var got []int
	_, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
		sample := graph.Parameter(g, "sample", nn.F32(1, 2, cfg.InChannels, side, side))
		ts := graph.Parameter(g, "timestep", nn.F32(1))
		ehs := graph.Parameter(g, "ehs", nn.F32(1, 1, cfg.CrossAttentionDim[0]))
		ids := graph.Parameter(g, "ids", nn.F32(1, cfg.NumAddedTimeIDs()))
		_, f := BuildKeep(s, cfg, branch, sample, ts, ehs, ids)
		got = f.Shape().Dimensions[2:]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// module cuts a weight name to its module: "down_blocks.0.resnets.1" for every weight of
// that res-block, "conv_in" for conv_in's.
func module(name string) string {
	p := strings.Split(name, ".")
	switch p[0] {
	case "down_blocks", "up_blocks", "mid_block":
		if p[2] == "downsamplers" || p[2] == "upsamplers" {
			return strings.Join(p[:3], ".")
		}
		return strings.Join(p[:4], ".")
	}
	return p[0]
}

// TestDeepCacheBranchesMatchDeepCache: on SVD's layout (layers_per_block 2: the dev
// golden's config), the shallow call at every branch runs exactly the modules DeepCache's
// SVD UNet runs on a cached step, whose indices it computes as written here.
func TestDeepCacheBranchesMatchDeepCache(t *testing.T) {
	cfg, err := ReadConfig(devCheckpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	n, each := cfg.NumBlocks(), cfg.LayersPerBlock[0]+1
	if each != 3 {
		t.Fatalf("dev config has layers_per_block %d, this test needs SVD's 2", each-1)
	}
	if Branches(cfg) != 5 {
		t.Fatalf("Branches = %d, want 5", Branches(cfg))
	}
	for branch := range Branches(cfg) {
		// DeepCache/svd/unet_spatio_temporal_condition.py, forward.
		downBlock, downModule := branch/each, branch%each
		upBlock, upModule := n-1-downBlock, 1-downModule
		if downModule == each-1 {
			upBlock, upModule = upBlock-1, 2
		}
		want := map[string]bool{"conv_in": true, "time_embedding": true, "add_embedding": true, "conv_norm_out": true, "conv_out": true}
		for i := range downBlock + 1 {
			for j := range cfg.LayersPerBlock[i] {
				if i < downBlock || j <= downModule {
					want[fmt.Sprintf("down_blocks.%d.resnets.%d", i, j)] = true
					if cfg.DownHasAttention(i) {
						want[fmt.Sprintf("down_blocks.%d.attentions.%d", i, j)] = true
					}
				}
			}
			if i < n-1 && (i < downBlock || downModule == each-1) {
				want[fmt.Sprintf("down_blocks.%d.downsamplers", i)] = true
			}
		}
		for j := upBlock; j < n; j++ {
			for k := range cfg.LayersPerBlock[n-1-j] + 1 {
				if j > upBlock || k >= upModule {
					want[fmt.Sprintf("up_blocks.%d.resnets.%d", j, k)] = true
					if cfg.UpHasAttention(j) {
						want[fmt.Sprintf("up_blocks.%d.attentions.%d", j, k)] = true
					}
				}
			}
			if j < n-1 {
				want[fmt.Sprintf("up_blocks.%d.upsamplers", j)] = true
			}
		}
		got := shallowWeights(t, cfg, branch)
		if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) {
			t.Errorf("branch %d: shallow call reads\n%v\nDeepCache runs\n%v", branch, sortedKeys(got), sortedKeys(want))
		}
	}
}

// TestDeepCacheMirror: on layouts DeepCache's formulas do not cover (one layer per block,
// per-block layer counts), the shallow call enters the up path at the module consuming the
// branch's skip, and never runs the mid block.
func TestDeepCacheMirror(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		branch    int
		first     string // the first up module the shallow call runs
		notRun    string // the up module before it
		lastDown  string // the last down module it runs
		notDown   string // the down module after it
	}{
		{"l1 branch 0", smallConfig2, 0, "up_blocks.1.resnets.0", "up_blocks.0.resnets.1", "down_blocks.0.resnets.0", "down_blocks.0.downsamplers"},
		{"l1 branch 1 (downsampler)", smallConfig2, 1, "up_blocks.0.resnets.1", "up_blocks.0.resnets.0", "down_blocks.0.downsamplers", "down_blocks.1.resnets.0"},
		{"l1 branch 2", smallConfig2, 2, "up_blocks.0.resnets.0", "mid_block.resnets.1", "down_blocks.1.resnets.0", "mid_block.resnets.0"},
		{"mixed branch 2", smallConfig3, 2, "up_blocks.1.resnets.1", "up_blocks.1.resnets.0", "down_blocks.1.resnets.0", "down_blocks.1.resnets.1"},
		{"mixed branch 3", smallConfig3, 3, "up_blocks.1.resnets.0", "up_blocks.0.resnets.1", "down_blocks.1.resnets.1", "down_blocks.1.downsamplers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, tc.cfg)
			got := shallowWeights(t, cfg, tc.branch)
			if !got[tc.first] || !got[tc.lastDown] || got[tc.notRun] || got[tc.notDown] || got["mid_block.resnets.0"] {
				t.Fatalf("shallow call at branch %d reads %v", tc.branch, sortedKeys(got))
			}
		})
	}
}

// callInputs are a call's random inputs: rows videos of frames latents of h x w.
func callInputs(cfg Config, rows, frames, h, w int) (sample, ts, ehs, ids *tensor.Dense) {
	ids = tensor.New(rows, 3)
	for r := range rows {
		copy(ids.Data[3*r:], []float32{6, 127, 0.02})
	}
	return randomTensor(1, rows, frames, cfg.InChannels, h, w), &tensor.Dense{Shape: []int{1}, Data: []float32{0.7}},
		randomTensor(2, rows, 1, cfg.CrossAttentionDim[0]), ids
}

// deepCacheModel loads random weights for a small config.
func deepCacheModel(t *testing.T, js string) *Model {
	t.Helper()
	cfg := parseConfig(t, js)
	m, err := New(cfg, randomWeights(t, cfg, 7), backend(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestDeepCacheKeepAndShallow: at every branch, the full call's prediction is Forward's
// bit for bit, and a shallow call on the same inputs with the kept feature gives it again
// (the deep part it skips is exactly what the feature replaces); with another step's
// feature it differs. Two rows exercise the row-parallel split of the feature.
func TestDeepCacheKeepAndShallow(t *testing.T) {
	m := deepCacheModel(t, smallConfig2)
	cfg := m.Config()
	sample, ts, ehs, ids := callInputs(cfg, 2, 3, 6, 4)
	want, err := m.Forward(sample, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	other := randomTensor(3, sample.Shape...)
	for branch := range Branches(cfg) {
		out, feature, err := m.ForwardKeep(branch, sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if !tensor.BitEqual(out, want) {
			t.Fatalf("branch %d: full call differs from Forward (rel L2 %.3g)", branch, tensor.RelL2(out, want))
		}
		if feature.Shape[0] != 2 || feature.Shape[1] != 3 {
			t.Fatalf("branch %d: feature %v", branch, feature.Shape)
		}
		shallow, err := m.ForwardShallow(branch, feature, sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if rel := tensor.RelL2(shallow, want); rel > 1e-6 {
			t.Fatalf("branch %d: shallow call with its own feature: rel L2 %.3g", branch, rel)
		}
		_, stale, err := m.ForwardKeep(branch, other, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		reused, err := m.ForwardShallow(branch, stale, sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if rel := tensor.RelL2(reused, want); rel < 1e-4 {
			t.Fatalf("branch %d: another input's feature changed nothing (rel L2 %.3g)", branch, rel)
		}
	}
}

// TestProbeAndRest: at every branch, a probe returns the skips down to the branch (the
// last one the branch's), and the rest of the call from them gives Forward's prediction
// bit for bit: the layers the probe ran are not run twice, nor differently.
func TestProbeAndRest(t *testing.T) {
	m := deepCacheModel(t, smallConfig3)
	cfg := m.Config()
	sample, ts, ehs, ids := callInputs(cfg, 2, 3, 8, 8)
	want, err := m.Forward(sample, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	for branch := range Branches(cfg) {
		skips, err := m.ForwardProbe(branch, sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(skips) != branch+2 {
			t.Fatalf("branch %d: %d skips", branch, len(skips))
		}
		_, feature, err := m.ForwardKeep(branch, sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		// The branch's skip has the resolution of the feature consumed beside it.
		if sd, fd := skips[branch+1].Shape, feature.Shape; sd[3] != fd[3] || sd[4] != fd[4] {
			t.Fatalf("branch %d: skip %v beside feature %v", branch, sd, fd)
		}
		out, err := m.ForwardRest(branch, skips, sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if !tensor.BitEqual(out, want) {
			t.Fatalf("branch %d: probe + rest differs from Forward (rel L2 %.3g)", branch, tensor.RelL2(out, want))
		}
	}
	if _, err := m.ForwardRest(0, nil, sample, ts, ehs, ids); !errors.Is(err, ErrBranch) {
		t.Fatalf("rest without skips: %v", err)
	}
}

func TestDeepCacheErrors(t *testing.T) {
	m := deepCacheModel(t, smallConfig2)
	cfg := m.Config()
	sample, ts, ehs, ids := callInputs(cfg, 1, 2, 4, 4)
	for _, b := range []int{-1, Branches(cfg)} {
		if _, _, err := m.ForwardKeep(b, sample, ts, ehs, ids); !errors.Is(err, ErrBranch) {
			t.Errorf("ForwardKeep(branch %d): %v, want ErrBranch", b, err)
		}
	}
	_, feature, err := m.ForwardKeep(0, sample, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*tensor.Dense{
		"nil":          nil,
		"other frames": randomTensor(4, 1, 3, feature.Shape[2], feature.Shape[3], feature.Shape[4]),
		"other branch": randomTensor(4, 1, 2, feature.Shape[2], feature.Shape[3]/2, feature.Shape[4]/2),
	} {
		if _, err := m.ForwardShallow(0, f, sample, ts, ehs, ids); !errors.Is(err, ErrBranch) {
			t.Errorf("ForwardShallow with a %s feature: %v, want ErrBranch", name, err)
		}
	}
}

// TestDeepCacheFrames: the context-parallel full, shallow, probe and rest calls, joined
// over two members, match the one-rank calls (prediction, feature, skips) within the CP
// tolerance.
func TestDeepCacheFrames(t *testing.T) {
	m := deepCacheModel(t, smallConfig2)
	cfg := m.Config()
	sample, ts, ehs, ids := callInputs(cfg, 1, 3, 4, 4)
	branch := 1
	wantOut, wantFeature, err := m.ForwardKeep(branch, sample, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	next := randomTensor(5, sample.Shape...)
	wantShallow, err := m.ForwardShallow(branch, wantFeature, next, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	parts := frameRanges([]int{2, 1})
	comms := localComms(t, len(parts))
	wantProbe, err := m.ForwardProbe(branch, next, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	wantRest, err := m.Forward(next, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	outs, features, shallow, rest := make([]*tensor.Dense, 2), make([]*tensor.Dense, 2), make([]*tensor.Dense, 2), make([]*tensor.Dense, 2)
	probes := make([][]*tensor.Dense, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			ctx := context.Background()
			outs[i], features[i], errs[i] = m.ForwardFramesKeep(ctx, branch, sliceT(sample, p.Lo, p.Hi), ts, ehs, ids, p, comms[i])
			if errs[i] == nil {
				shallow[i], errs[i] = m.ForwardFramesShallow(ctx, branch, features[i], sliceT(next, p.Lo, p.Hi), ts, ehs, ids, p, comms[i])
			}
			if errs[i] == nil {
				probes[i], errs[i] = m.ForwardFramesProbe(ctx, branch, sliceT(next, p.Lo, p.Hi), ts, ehs, ids, p, comms[i])
			}
			if errs[i] == nil {
				rest[i], errs[i] = m.ForwardFramesRest(ctx, branch, probes[i], sliceT(next, p.Lo, p.Hi), ts, ehs, ids, p, comms[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	pairs := map[string][2]*tensor.Dense{
		"full": {joinT(outs), wantOut}, "feature": {joinT(features), wantFeature}, "shallow": {joinT(shallow), wantShallow},
		"rest": {joinT(rest), wantRest},
	}
	if len(probes[0]) != branch+2 || len(probes[1]) != branch+2 {
		t.Fatalf("probes of %d and %d skips, want %d", len(probes[0]), len(probes[1]), branch+2)
	}
	for k := range wantProbe {
		pairs[fmt.Sprintf("probe skip %d", k)] = [2]*tensor.Dense{joinT([]*tensor.Dense{probes[0][k], probes[1][k]}), wantProbe[k]}
	}
	for name, pair := range pairs {
		if !tensor.SameShape(pair[0], pair[1]) {
			t.Fatalf("%s: shape %v, want %v", name, pair[0].Shape, pair[1].Shape)
		}
		if rel := tensor.RelL2(pair[0], pair[1]); rel > cpTolerance {
			t.Errorf("%s: rel L2 %.3g > %.0e", name, rel, cpTolerance)
		}
	}
}
