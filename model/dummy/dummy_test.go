package dummy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

var smallCfg = Config{HiddenChannels: 8, LatentChannels: 4, Seed: 7}

// testInput makes n rows of [T=3, C, H=5, W=4] latents with random conditioning vectors.
func testInput(seed uint64, n, c int, uncond []bool) model.Input {
	r := rand.New(rand.NewPCG(seed, 99))
	lat := tensor.New(n, 3, c, 5, 4)
	for i := range lat.Data {
		lat.Data[i] = float32(r.NormFloat64())
	}
	in := model.Input{Latents: lat, Sigma: 2, Timestep: 0.25 * float32(math.Log(2)), Step: 3, Uncond: uncond}
	for range n {
		v := tensor.New(c)
		for i := range v.Data {
			v.Data[i] = float32(r.NormFloat64())
		}
		in.Cond = append(in.Cond, model.Conditioning{CondKey: v})
	}
	if in.Uncond == nil {
		in.Uncond = make([]bool, n)
	}
	return in
}

func mustNew(t testing.TB, cfg Config) *Denoiser {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func predict(t testing.TB, d model.Denoiser, in model.Input) *tensor.Dense {
	t.Helper()
	out, err := d.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func rowOf(x *tensor.Dense, r int) *tensor.Dense {
	per := x.Len() / x.Shape[0]
	return &tensor.Dense{Shape: append([]int{1}, x.Shape[1:]...), Data: x.Data[r*per : (r+1)*per]}
}

func TestMatchesReference(t *testing.T) {
	for _, cfg := range []Config{smallCfg, {HiddenChannels: 5, LatentChannels: 3, Seed: -2}} {
		t.Run(fmt.Sprintf("hd%d-c%d", cfg.HiddenChannels, cfg.LatentChannels), func(t *testing.T) {
			d := mustNew(t, cfg)
			in := testInput(1, 3, cfg.LatentChannels, []bool{false, true, false})
			delete(in.Cond[2], CondKey) // row 2: no conditioning -> ones
			got := predict(t, d, in)
			if !tensor.SameShape(got, in.Latents) {
				t.Fatalf("shape %v, want %v", got.Shape, in.Latents.Shape)
			}
			w := InitWeights(cfg)
			for r := range 3 {
				vec := make([]float32, cfg.LatentChannels)
				switch r {
				case 0:
					copy(vec, in.Cond[0][CondKey].Data)
				case 2:
					for i := range vec {
						vec[i] = 1
					}
				}
				want := refPredictRow(cfg, w, rowOf(in.Latents, r).Data, 3, 5, 4, in.Timestep, vec)
				wantD := &tensor.Dense{Shape: rowOf(got, r).Shape, Data: want}
				if e := tensor.RelL2(rowOf(got, r), wantD); !(e <= 1e-5) {
					t.Fatalf("row %d: relative L2 error %g", r, e)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	in := testInput(2, 4, 4, nil)
	a := predict(t, mustNew(t, smallCfg), in)
	d2 := mustNew(t, smallCfg)
	b := predict(t, d2, in)
	c := predict(t, d2, in)
	if !tensor.BitEqual(a, b) || !tensor.BitEqual(b, c) {
		t.Fatal("same seed and input gave different outputs")
	}
	other := smallCfg
	other.Seed++
	if e := tensor.RelL2(predict(t, mustNew(t, other), in), a); e < 1e-2 {
		t.Fatalf("different seeds give nearly equal outputs (rel L2 %g)", e)
	}
}

func TestRowIndependentOfBatch(t *testing.T) {
	d := mustNew(t, smallCfg)
	in := testInput(3, 5, 4, []bool{false, true, false, false, true})
	all := predict(t, d, in)
	for r := range 5 {
		one := model.Input{Latents: rowOf(in.Latents, r).Clone(), Timestep: in.Timestep, Cond: in.Cond[r : r+1], Uncond: in.Uncond[r : r+1]}
		if !tensor.BitEqual(predict(t, d, one), rowOf(all, r)) {
			t.Fatalf("row %d differs when computed alone", r)
		}
	}
}

func TestConditioning(t *testing.T) {
	d := mustNew(t, smallCfg)
	in := testInput(4, 2, 4, []bool{false, true})
	// Same latents for both rows: cond vs uncond must differ.
	copy(rowOf(in.Latents, 1).Data, rowOf(in.Latents, 0).Data)
	out := predict(t, d, in)
	if e := tensor.RelL2(rowOf(out, 1), rowOf(out, 0)); e < 1e-3 {
		t.Fatalf("uncond row equals cond row (rel L2 %g)", e)
	}
	// An unconditional row ignores its conditioning vector entirely.
	in2 := testInput(4, 2, 4, []bool{false, true})
	copy(rowOf(in2.Latents, 1).Data, rowOf(in.Latents, 1).Data)
	for i := range in2.Cond[1][CondKey].Data {
		in2.Cond[1][CondKey].Data[i] = 100
	}
	out2 := predict(t, d, in2)
	if !tensor.BitEqual(rowOf(out2, 1), rowOf(out, 1)) {
		t.Fatal("uncond row depends on its conditioning vector")
	}
	// The timestep matters.
	in3 := in
	in3.Timestep += 0.5
	if e := tensor.RelL2(predict(t, d, in3), out); e < 1e-3 {
		t.Fatalf("timestep has no effect (rel L2 %g)", e)
	}
}

func TestErrors(t *testing.T) {
	d := mustNew(t, smallCfg)
	tests := []struct {
		name string
		in   model.Input
	}{
		{"channels", testInput(5, 1, 3, nil)},
		{"cond-length", func() model.Input {
			in := testInput(5, 1, 4, nil)
			in.Cond[0][CondKey] = tensor.New(5)
			return in
		}()},
		{"rows", func() model.Input { in := testInput(5, 2, 4, nil); in.Uncond = in.Uncond[:1]; return in }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := d.Predict(context.Background(), tc.in); err == nil {
				t.Fatal("no error")
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Predict(ctx, testInput(5, 1, 4, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
	if _, err := New(Config{HiddenChannels: -1, LatentChannels: 4}); err == nil {
		t.Fatal("negative channels accepted")
	}
}

func TestModelConfigAndWeights(t *testing.T) {
	den, err := New(FromModelConfig(model.Config{Name: "dummy", HiddenChannels: 8, LatentChannels: 4, Seed: 7}))
	if err != nil {
		t.Fatal(err)
	}
	defer den.Close()
	in := testInput(6, 2, 4, nil)
	if !tensor.BitEqual(predict(t, den, in), predict(t, mustNew(t, smallCfg), in)) {
		t.Fatal("the instance from a model.Config differs from New with the same config")
	}
	want := int64(0)
	for _, s := range ExpectedTensors(smallCfg) {
		want += 4 * int64(tensor.NumElements(s))
	}
	if got := den.WeightBytes(); got != want || want == 0 {
		t.Fatalf("WeightBytes = %d, want %d", got, want)
	}
	def, err := New(FromModelConfig(model.Config{Name: "dummy"}))
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	if c := def.Config(); c.HiddenChannels != DefaultHiddenChannels || c.LatentChannels != DefaultLatentChannels {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

// outputHash runs the fixed batch and hashes the output bits.
func outputHash(t testing.TB) string {
	out := predict(t, mustNew(t, smallCfg), testInput(8, 3, 4, []bool{false, true, false}))
	h := fnv.New64a()
	for _, v := range out.Data {
		b := math.Float32bits(v)
		h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

const helperEnv = "VDPP_DUMMY_HASH_HELPER"

// TestHashHelper prints the output hash when run as a helper process.
func TestHashHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process only")
	}
	fmt.Println("HASH=" + outputHash(t))
}

func TestAcrossProcesses(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, raw)
	}
	want := outputHash(t)
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "HASH="); ok {
			if h != want {
				t.Fatalf("other process hash %s, this process %s", h, want)
			}
			return
		}
	}
	t.Fatalf("helper printed no hash:\n%s", raw)
}
