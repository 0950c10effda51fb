package plan

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

// small is the bench default latent: 4 frames of 4x16x16 (16 KiB per sample).
func small(steps, samples int, guided bool) Workload {
	return Workload{Steps: steps, Samples: samples, Frames: 4, Height: 16, Width: 16, Channels: 4, Guided: guided, MicroBatch: 1}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

func TestPredictFormulas(t *testing.T) {
	lat := Link{LatencyMS: 0.1}
	syn := SyntheticCosts(1, 4, lat)
	withPrep := syn
	withPrep.PrepareMS = 1
	bw := SyntheticCosts(1, 4, Link{BytesPerS: 16384 / 0.005}) // 16 KiB latent: 5 ms hand-off
	mb := small(28, 5, false)
	mb.MicroBatch = 2
	tests := []struct {
		name     string
		w        Workload
		m        Mesh
		c        Costs
		stages   [][2]int
		step     float64
		first    float64
		interval float64
		tput     float64
		makespan float64
		active   int
	}{
		{"pp7 of 28 steps", small(28, 60, false), Mesh{7, 1, 1, 1}, syn,
			[][2]int{{0, 4}, {4, 8}, {8, 12}, {12, 16}, {16, 20}, {20, 24}, {24, 28}}, 1, 28 + 6*0.1, 4, 250, 28.6 + 59*4, 1},
		{"dp7 of 28 steps", small(28, 60, false), Mesh{1, 1, 1, 7}, syn,
			[][2]int{{0, 28}}, 1, 28, 28, 250, 28 + 8*28, 7},
		{"pp7 of 25 steps: 4,4,4,4,3,3,3", small(25, 60, false), Mesh{7, 1, 1, 1}, syn,
			[][2]int{{0, 4}, {4, 8}, {8, 12}, {12, 16}, {16, 19}, {19, 22}, {22, 25}}, 1, 25 + 0.6, 4, 250, 25.6 + 59*4, 1},
		{"dp7 of 25 steps", small(25, 60, false), Mesh{1, 1, 1, 7}, syn,
			[][2]int{{0, 25}}, 1, 25, 25, 280, 25 + 8*25, 7},
		{"one device guided: 2 rows per step", small(28, 10, true), Mesh{1, 1, 1, 1}, syn,
			[][2]int{{0, 28}}, 2, 56, 56, 1000.0 / 56, 560, 1},
		{"cfg2: one row per rank plus an all-gather", small(28, 10, true), Mesh{1, 2, 1, 1}, syn,
			[][2]int{{0, 28}}, 1.1, 28 * 1.1, 28 * 1.1, 1000 / 30.8, 308, 1},
		{"cp2: half the frames plus an all-to-all", small(28, 10, false), Mesh{1, 1, 2, 1}, syn,
			[][2]int{{0, 28}}, 0.5 + 0.1, 28 * 0.6, 28 * 0.6, 1000 / 16.8, 168, 1},
		{"cp3 of 4 frames: the largest share is 2", small(28, 10, false), Mesh{1, 1, 3, 1}, syn,
			[][2]int{{0, 28}}, 0.5 + 2*0.1, 28 * 0.7, 28 * 0.7, 1000 / 19.6, 196, 1},
		{"prepare on stage 0 moves the cut", small(4, 3, false), Mesh{2, 1, 1, 1}, withPrep,
			[][2]int{{0, 2}, {2, 4}}, 1, 3 + 2 + 0.1, 3, 1000.0 / 3, 5.1 + 2*3, 1},
		{"hand-off bound pipeline", small(28, 60, false), Mesh{7, 1, 1, 1}, bw,
			[][2]int{{0, 4}, {4, 8}, {8, 12}, {12, 16}, {16, 20}, {20, 24}, {24, 28}}, 1, 28 + 6*5, 5, 200, 58 + 59*5, 1},
		{"micro-batch 2 over 2 replicas", mb, Mesh{1, 1, 1, 2}, syn,
			[][2]int{{0, 28}}, 2, 56, 56, 2 * 2 * 1000.0 / 56, 56 + 56, 2},
		{"more replicas than items", small(28, 3, false), Mesh{1, 1, 1, 7}, syn,
			[][2]int{{0, 28}}, 1, 28, 28, 3 * 1000.0 / 28, 28, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Predict(tc.w, tc.m, tc.c, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.StageSteps, tc.stages) {
				t.Errorf("stages %v, want %v", p.StageSteps, tc.stages)
			}
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"step", p.StepMS, tc.step}, {"first", p.FirstSampleMS, tc.first}, {"interval", p.IntervalMS, tc.interval},
				{"steady throughput", p.SteadyThroughputPerS, tc.tput}, {"makespan", p.MakespanMS, tc.makespan}} {
				if !near(f.got, f.want) {
					t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
				}
			}
			if p.ActiveReplicas != tc.active {
				t.Errorf("active replicas %d, want %d", p.ActiveReplicas, tc.active)
			}
			if !p.Feasible {
				t.Error("infeasible without a memory limit")
			}
		})
	}
}

func TestPredictMemory(t *testing.T) {
	c := SyntheticCosts(1, 1, Link{})
	c.Weights = Weights{Condition: 3 + 2, Denoiser: 10, Decode: 4}
	c.ActivationBytesPerRowFrame = 1
	w := Workload{Steps: 8, Samples: 4, Frames: 1, Height: 1, Width: 1, Channels: 1, Guided: true}
	tests := []struct {
		m      Mesh
		limit  int64
		stages []int64
		weight int64
		memory int64
		fits   bool
	}{
		{Mesh{1, 1, 1, 2}, 0, []int64{19}, 19, 21, true},   // guided: 2 rows x 1 frame of activations
		{Mesh{1, 1, 1, 2}, 20, []int64{19}, 19, 21, false}, // weights fit, activations do not
		{Mesh{2, 1, 1, 1}, 17, []int64{15, 14}, 15, 17, true},
		{Mesh{4, 1, 1, 1}, 16, []int64{15, 10, 10, 14}, 15, 17, false},
		{Mesh{2, 2, 1, 1}, 16, []int64{15, 14}, 15, 16, true}, // cfg 2: one row per rank
	}
	for _, tc := range tests {
		p, err := Predict(w, tc.m, c, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.StageWeightBytes, tc.stages) || p.WeightBytesPerDevice != tc.weight ||
			p.MemoryBytesPerDevice != tc.memory || p.Feasible != tc.fits {
			t.Errorf("%v limit %d: stages %v weight %d memory %d fits %v; want %v %d %d %v", tc.m, tc.limit,
				p.StageWeightBytes, p.WeightBytesPerDevice, p.MemoryBytesPerDevice, p.Feasible, tc.stages, tc.weight, tc.memory, tc.fits)
		}
	}
}

func TestLinkCollectives(t *testing.T) {
	l := Link{LatencyMS: 0.5, BytesPerS: 1e6} // 1 byte per microsecond
	tests := []struct {
		name      string
		got, want float64
	}{
		{"message", l.MS(1000), 0.5 + 1},
		{"all-gather of 1", l.AllGatherMS(1, 1000), 0},
		{"all-gather of 2", l.AllGatherMS(2, 1000), 1.5},
		{"all-gather of 4", l.AllGatherMS(4, 1000), 3 * 1.5},
		{"all-to-all of 4", l.AllToAllMS(4, 4000), 3 * 1.5},
		{"unlimited bandwidth", Link{LatencyMS: 0.2}.MS(1 << 30), 0.2},
		{"frame scaling 0.5 at half the frames", StepCost{FixedMS: 1, RowMS: 2, RefFrames: 8, FrameScaling: 0.5}.MS(3, 4), 1 + 2*3*0.75},
	}
	for _, tc := range tests {
		if !near(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestPredictRejects(t *testing.T) {
	w := small(4, 2, false)
	c := SyntheticCosts(1, 4, Link{})
	bad := c
	bad.Step.RowMS = math.NaN()
	tests := []struct {
		name string
		w    Workload
		m    Mesh
		c    Costs
	}{
		{"cfg2 unguided", w, Mesh{1, 2, 1, 1}, c},
		{"more stages than steps", w, Mesh{5, 1, 1, 1}, c},
		{"more cp ranks than frames", w, Mesh{1, 1, 5, 1}, c},
		{"zero degree", w, Mesh{0, 1, 1, 1}, c},
		{"cfg3", small(4, 2, true), Mesh{1, 3, 1, 1}, c},
		{"no frames", Workload{Steps: 4, Samples: 1, Height: 1, Width: 1, Channels: 1}, Mesh{1, 1, 1, 1}, c},
		{"NaN cost", w, Mesh{1, 1, 1, 1}, bad},
	}
	for _, tc := range tests {
		if _, err := Predict(tc.w, tc.m, tc.c, 0); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: err %v, want ErrBadInput", tc.name, err)
		}
	}
}

func TestEnumerate(t *testing.T) {
	got, err := Enumerate(small(28, 8, true), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mesh{{1, 1, 1, 4}, {1, 1, 2, 2}, {1, 1, 4, 1}, {1, 2, 1, 2}, {1, 2, 2, 1},
		{2, 1, 1, 2}, {2, 1, 2, 1}, {2, 2, 1, 1}, {4, 1, 1, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Enumerate = %v\nwant %v", got, want)
	}
	got, _ = Enumerate(Workload{Steps: 2, Samples: 1, Frames: 1, Height: 1, Width: 1, Channels: 1}, 4)
	if want := []Mesh{{1, 1, 1, 4}, {2, 1, 1, 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("unguided, 1 frame, 2 steps: %v, want %v", got, want)
	}
	if _, err := Enumerate(small(4, 1, false), 0); !errors.Is(err, ErrBadInput) {
		t.Errorf("0 devices: %v", err)
	}
}

func TestWindowThroughput(t *testing.T) {
	tests := []struct {
		name   string
		c      []float64
		warmup int
		want   float64
		ok     bool
	}{
		{"even completions", []float64{10, 20, 30, 40}, 0, 3 / 30.0 * 1e3, true},
		{"warm-up dropped, any order", []float64{40, 10, 30, 20, 50}, 2, 2 / 20.0 * 1e3, true},
		{"bursts of 4, warm-up = one burst", []float64{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, 4, 7 / 1.0 * 1e3, true},
		{"too few after warm-up", []float64{1, 2, 3}, 2, 0, false},
		{"all at once", []float64{5, 5, 5}, 0, 0, false},
		{"negative warm-up is none", []float64{0, 4}, -1, 1 / 4.0 * 1e3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := WindowThroughput(tc.c, tc.warmup)
			if ok != tc.ok || !near(got, tc.want) {
				t.Fatalf("WindowThroughput = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestSampleCompletions(t *testing.T) {
	w := small(16, 7, false)
	w.MicroBatch = 2 // items {0,1} {2,3} {4,5} {6}
	got := SampleCompletions(w, 2, 100, 10)
	// items 0 and 1 on replicas 0 and 1 finish at 100; items 2 and 3 at 110.
	want := []float64{100, 100, 100, 100, 110, 110, 110}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SampleCompletions = %v, want %v", got, want)
	}
}

// TestPredictBenchQuantities checks that Predict reports the numbers `vdpp bench` measures:
// the throughput over the window after the warm-up completions and the steady time per
// sample of SteadyPerSampleMS.
func TestPredictBenchQuantities(t *testing.T) {
	syn := SyntheticCosts(5, 8, Link{})
	w := Workload{Steps: 16, Samples: 24, Frames: 8, Channels: 4, Height: 16, Width: 16, Guided: true, Warmup: 4}
	tests := []struct {
		name         string
		m            Mesh
		tput, steady float64
		steadyTput   float64
	}{
		// 24 samples in bursts of 4 every 160 ms; the first burst is the warm-up: 19 samples
		// in 4 intervals.
		{"dp4 finishes in bursts", Mesh{1, 1, 1, 4}, 19 / (4 * 160.0) * 1e3, 40, 25},
		// one completion every 40 ms: 19 intervals for 19 samples.
		{"pp4 completes evenly", Mesh{4, 1, 1, 1}, 25, 40, 25},
		// bursts of 2 every 80 ms (cfg halves the step): warm-up = two bursts; 19 in 9.
		{"cfg2 dp2", Mesh{1, 2, 1, 2}, 19 / (9 * 80.0) * 1e3, 40, 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Predict(w, tc.m, syn, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !near(p.ThroughputPerS, tc.tput) || !near(p.SteadySampleMS, tc.steady) || !near(p.SteadyThroughputPerS, tc.steadyTput) {
				t.Fatalf("throughput %v steady %v ms steady rate %v; want %v, %v, %v",
					p.ThroughputPerS, p.SteadySampleMS, p.SteadyThroughputPerS, tc.tput, tc.steady, tc.steadyTput)
			}
		})
	}
}
