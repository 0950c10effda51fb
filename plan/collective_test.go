package plan

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cli"
)

// The per-step collective cost with all-gathers measured per group size injected.
func TestPredictMeasuredAllGathers(t *testing.T) {
	w := Workload{Steps: 10, Samples: 4, Frames: 8, Height: 16, Width: 16, Channels: 4, Guided: true, MicroBatch: 1}
	latent := w.FrameBytes() * 8
	measured := []GroupCost{{Size: 2, Bytes: latent, MS: 1.5}, {Size: 4, Bytes: latent, MS: 2.5}}
	syn := SyntheticCosts(5, 8, Link{LatencyMS: 0.02})
	inj := syn
	inj.AllGathers = measured
	svd := inj
	svd.CPAllToAllsPerStep = 3
	bw := syn
	bw.Collective.BytesPerS = float64(latent) * 1e3 // one latent per ms
	bw.AllGathers = []GroupCost{{Size: 2, Bytes: latent / 2, MS: 1}}
	tests := []struct {
		name    string
		m       Mesh
		c       Costs
		compute float64
		coll    float64
	}{
		{"one rank: no collective", Mesh{1, 1, 1, 1}, inj, 10, 0},
		{"cfg2: one measured all-gather over 2", Mesh{1, 2, 1, 1}, inj, 5, 1.5},
		{"cfg2 unmeasured: the link's ring", Mesh{1, 2, 1, 1}, syn, 5, 0.02},
		{"cp4: one measured all-gather over 4", Mesh{1, 1, 4, 1}, inj, 2.5, 2.5},
		{"cp2 x cfg2: one joint all-gather over 4", Mesh{1, 2, 2, 1}, inj, 2.5, 2.5},
		{"cp4 unmeasured: ring of 3 messages", Mesh{1, 1, 4, 1}, syn, 2.5, 0.06},
		{"cp2 svd: gather plus 3 all-to-alls", Mesh{1, 1, 2, 1}, svd, 5, 1.5 + 3*0.02},
		{"cp4 x cfg2: joint over 8, unmeasured: ring of 7", Mesh{1, 2, 4, 1}, inj, 1.25, 7 * 0.02},
		{"pp2 x dp2: no collective", Mesh{2, 1, 1, 2}, inj, 10, 0},
		{"cfg2: bytes beyond the measured ones at the bandwidth", Mesh{1, 2, 1, 1}, bw, 5, 1 + 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Predict(w, tc.m, tc.c, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !near(p.ComputeStepMS, tc.compute) || !near(p.CollectiveStepMS, tc.coll) || !near(p.StepMS, tc.compute+tc.coll) {
				t.Errorf("compute %v collective %v step %v, want %v %v", p.ComputeStepMS, p.CollectiveStepMS, p.StepMS, tc.compute, tc.coll)
			}
			if !near(p.FirstSampleMS, 10*(tc.compute+tc.coll)+float64(tc.m.PP-1)*p.HandOffMS) {
				t.Errorf("first %v for step %v", p.FirstSampleMS, p.StepMS)
			}
		})
	}
}

func TestCostsRejectBadAllGathers(t *testing.T) {
	for _, gs := range [][]GroupCost{{{Size: 1, MS: 1}}, {{Size: 2, MS: -1}}, {{Size: 2, MS: 1}, {Size: 2, MS: 2}}, {{Size: 3, Bytes: -4}}} {
		c := SyntheticCosts(1, 4, Link{})
		c.AllGathers = gs
		if err := c.Validate(); !errors.Is(err, ErrBadInput) {
			t.Errorf("%+v: %v", gs, err)
		}
	}
}

func TestCalibrationRoundTripAllGathers(t *testing.T) {
	c := SyntheticCosts(5, 8, Link{LatencyMS: 0.05, BytesPerS: 1e9})
	pc := ProcessCosts{HandOff: Link{LatencyMS: 0.3}, AllGathers: []GroupCost{{Size: 2, Bytes: 32768, MS: 1.25}, {Size: 4, Bytes: 32768, MS: 2.5}}}
	cal := Calibration{Version: CalibrationVersion, Model: "synthetic", LatentShape: []int{8, 4, 16, 16}, Costs: pc.Apply(c)}
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := SaveCalibration(path, cal); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cal) {
		t.Errorf("round trip\n got %+v\nwant %+v", got, cal)
	}
	if got.Costs.HandOff != pc.HandOff || got.Costs.Collective != c.Collective {
		t.Errorf("applied hand-off %+v collective %+v", got.Costs.HandOff, got.Costs.Collective)
	}
	var buf bytes.Buffer
	if err := WriteCalibration(&buf, cal); err != nil || !bytes.Contains(buf.Bytes(), []byte(`"all_gathers"`)) {
		t.Errorf("file %s: %v", buf.String(), err)
	}
}

// localLaunch runs the calibrate job's GroupWorker on nproc in-process ranks, as
// `vdpp worker calibrate` does in nproc processes, and writes rank 0's result.
func localLaunch(t *testing.T, clk *tickClock) LaunchFunc {
	return func(ctx context.Context, nproc int, args []string) error {
		w := DefaultCalibrateWorker()
		fs := cli.New("worker calibrate", nil, nil)
		w.RegisterFlags(fs)
		if len(args) < 2 || args[0] != "worker" || args[1] != "calibrate" || fs.Parse(args[2:]) != nil || w.Out == "" {
			t.Fatalf("worker args %v", args)
		}
		n := w.Bytes
		trs := comm.NewLocal(nproc, comm.Options{RecvTimeout: 5 * time.Second})
		res := make([]GroupResult, nproc)
		errs := make([]error, nproc)
		var wg sync.WaitGroup
		for r := range nproc {
			wg.Go(func() {
				c := &Calibrator{Repeats: 5, Gap: -1}
				if r == 0 {
					c.Now = clk.now
				}
				res[r], errs[r] = c.GroupWorker(ctx, trs[r], n)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return WriteGroupResult(w.Out, res[0])
	}
}

// tickClock advances by step on every reading.
type tickClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *tickClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func TestProcessCalibratorMeasure(t *testing.T) {
	// Every reading of rank 0's clock moves 1 ms: the pause alone and the pause plus a
	// gather both read two ticks apart, so the gathers cost 0; a round trip is 1 ms.
	clk := &tickClock{t: time.Unix(0, 0), step: time.Millisecond}
	p := &ProcessCalibrator{Launch: localLaunch(t, clk), Dir: t.TempDir()}
	pc, err := p.Measure(context.Background(), 4, 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := []GroupCost{{Size: 2, Bytes: 4096, MS: 0}, {Size: 4, Bytes: 4096, MS: 0}}
	if !reflect.DeepEqual(pc.AllGathers, want) {
		t.Errorf("all-gathers %+v, want %+v", pc.AllGathers, want)
	}
	if pc.HandOff != (Link{LatencyMS: 0.5}) {
		t.Errorf("hand-off %+v, want 0.5 ms latency", pc.HandOff)
	}
	if len(pc.Measurements) != 4 || pc.Measurements[1].Name != "all-gather/4" {
		t.Errorf("measurements %+v", pc.Measurements)
	}
	c := pc.Apply(SyntheticCosts(1, 4, Link{LatencyMS: 9}))
	if c.HandOff.LatencyMS != 0.5 || c.Collective.LatencyMS != 9 || len(c.AllGathers) != 2 {
		t.Errorf("applied %+v", c)
	}
	if _, err := (&ProcessCalibrator{}).Measure(context.Background(), 2, 4); !errors.Is(err, ErrBadInput) {
		t.Errorf("no launcher: %v", err)
	}
}

func TestGroupResultCostsRejects(t *testing.T) {
	for _, r := range []GroupResult{
		{World: 3, Bytes: 4},
		{World: 4, Bytes: 4, AllGathers: []GroupCost{{Size: 3, MS: 1}}},
		{World: 4, Bytes: 4, AllGathers: []GroupCost{{Size: 2, MS: -1}}},
	} {
		if _, err := r.Costs(4); !errors.Is(err, ErrBadInput) {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

func TestFitLink(t *testing.T) {
	tests := []struct {
		bytes      int64
		small, big float64
		want       Link
	}{
		{1004, 0.1, 0.2, Link{LatencyMS: 0.1, BytesPerS: 1e7}},
		{1004, 0.3, 0.2, Link{LatencyMS: 0.3}},
		{4, 0.1, 0.2, Link{LatencyMS: 0.2}},
	}
	for _, tc := range tests {
		if got := FitLink(tc.bytes, tc.small, tc.big); !near(got.LatencyMS, tc.want.LatencyMS) || !near(got.BytesPerS, tc.want.BytesPerS) {
			t.Errorf("FitLink(%d, %v, %v) = %+v, want %+v", tc.bytes, tc.small, tc.big, got, tc.want)
		}
	}
}
