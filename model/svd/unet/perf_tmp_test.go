package unet

import (
	"fmt"
	"os"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

const perfSmallConfig = `{
  "addition_time_embed_dim": 32, "projection_class_embeddings_input_dim": 96,
  "block_out_channels": [32, 64, 128], "cross_attention_dim": 128,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
  "in_channels": 8, "out_channels": 4, "layers_per_block": 2,
  "num_attention_heads": [1, 1, 2], "num_frames": 14
}`

type perfCase struct {
	cfg            checkpoint.UNetConfig
	b, t, h, w, s  int
}

func perfCfg(t testing.TB, name string) perfCase {
	switch name {
	case "dev":
		js, _ := os.ReadFile("/work/shared/golden/dev/unet/config.json")
		return perfCase{parseConfig(t, string(js)), 2, 8, 16, 16, 1}
	case "mid":
		return perfCase{parseConfig(t, midConfig), 1, 14, 32, 32, 1}
	}
	return perfCase{parseConfig(t, perfSmallConfig), 2, 14, 8, 8, 1}
}

func TestPerfOps(t *testing.T) {
	if os.Getenv("VDPP_PERF") == "" {
		t.Skip()
	}
	pc := perfCfg(t, os.Getenv("VDPP_CFG"))
	cfg := pc.cfg
	b, _ := nn.NewBackend("go")
	counts := map[string]int{}
	bytes := map[string]int64{}
	var dots []string
	var flops, smallFlops float64
	_, err := nn.Declare(b, func(s nn.Scope, g *graph.Graph) error {
		sample := graph.Parameter(g, "sample", nn.F32(pc.b, pc.t, cfg.InChannels, pc.h, pc.w))
		ts := graph.Parameter(g, "ts", nn.F32(1))
		ehs := graph.Parameter(g, "ehs", nn.F32(pc.b, pc.s, cfg.CrossAttentionDim[0]))
		ids := graph.Parameter(g, "ids", nn.F32(pc.b, 3))
		Build(s, cfg, sample, ts, ehs, ids)
		for _, n := range g.Nodes() {
			k := n.Type().String()
			counts[k]++
			bytes[k] += int64(n.Shape().Size() * 4)
			if k == "DotGeneral" {
				in := n.Inputs()
				ld := in[0].Shape().Dimensions
				kk := ld[len(ld)-1]
				if in[1].Rank() == 3 {
					kk *= ld[len(ld)-2]
				}
				f := 2.0 * float64(n.Shape().Size()) * float64(kk)
				flops += f
				// contracting size = lhs size * rhs size / (out size * batch...) approximate via shapes
				l, r := in[0].Shape().Size(), in[1].Shape().Size()
				_ = l
				_ = r
				dots = append(dots, fmt.Sprintf("%8.1f %v x %v -> %v", f/1e6, in[0].Shape().Dimensions, in[1].Shape().Dimensions, n.Shape().Dimensions))
				_ = f
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dot GFLOP %.3f", flops/1e9)
	_ = smallFlops
	keys := make([]string, 0, len(counts))
	total := 0
	for k := range counts {
		keys = append(keys, k)
		total += counts[k]
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	for _, k := range keys {
		t.Logf("%-28s %5d  %8.1f MB", k, counts[k], float64(bytes[k])/1e6)
	}
	t.Logf("total nodes %d", total)
	if os.Getenv("VDPP_DOTS") != "" {
		for _, d := range dots {
			t.Log(d)
		}
	}
}

func TestPerfRun(t *testing.T) {
	if os.Getenv("VDPP_PERF") == "" {
		t.Skip()
	}
	pc := perfCfg(t, os.Getenv("VDPP_CFG"))
	cfg := pc.cfg
	conf := os.Getenv("VDPP_SG")
	if conf == "" {
		conf = nn.SimpleGoConfig
	}
	be, err := backends.NewWithConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg, randomWeights(t, cfg, 3), be)
	if err != nil {
		t.Fatal(err)
	}
	sample := randomTensor(1, pc.b, pc.t, cfg.InChannels, pc.h, pc.w)
	ehs := randomTensor(2, pc.b, pc.s, cfg.CrossAttentionDim[0])
	ids := &tensor.Dense{Shape: []int{pc.b, 3}, Data: make([]float32, 3*pc.b)}
	for i := range pc.b {
		copy(ids.Data[3*i:], []float32{6, 127, 0.02})
	}
	ts := &tensor.Dense{Shape: []int{1}, Data: []float32{0.7}}
	st := time.Now()
	out, err := m.Forward(sample, ts, ehs, ids)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first call (compile+run) %v", time.Since(st))
	n := 3
	if v := os.Getenv("VDPP_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	st = time.Now()
	best := time.Hour
	for range n {
		s0 := time.Now()
		if _, err := m.Forward(sample, ts, ehs, ids); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(s0))
	}
	t.Logf("best %v", best)
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration((r1.Utime.Nano()+r1.Stime.Nano())-(r0.Utime.Nano()+r0.Stime.Nano())) / time.Duration(n)
	t.Logf("cpu %v per call", cpu)
	t.Logf("config %q: %v per call; out[0..3] %v", conf, time.Since(st)/time.Duration(n), out.Data[:3])
	if p := os.Getenv("VDPP_SAVE"); p != "" {
		f, _ := os.Create(p)
		defer f.Close()
		for _, v := range out.Data {
			fmt.Fprintf(f, "%g\n", v)
		}
	}
}
