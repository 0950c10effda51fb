package plan

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/tensor"
)

// fakeClock is a clock that only moves when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(ms float64) {
	c.mu.Lock()
	c.t = c.t.Add(time.Duration(ms * float64(time.Millisecond)))
	c.mu.Unlock()
}
func (c *fakeClock) sleepUntil(d time.Time) {
	c.mu.Lock()
	if d.After(c.t) {
		c.t = d
	}
	c.mu.Unlock()
}

// costModel is a denoiser whose calls advance the fake clock by fixed + row*rows*frames/ref.
type costModel struct {
	clock           *fakeClock
	fixed, row, ref float64
	fail            error
}

func (m *costModel) Predict(_ context.Context, in model.Input) (*tensor.Dense, error) {
	if m.fail != nil {
		return nil, m.fail
	}
	m.clock.advance(m.fixed + m.row*float64(in.Rows())*float64(in.Latents.Shape[1])/m.ref)
	return tensor.New(in.Latents.Shape...), nil
}
func (m *costModel) WeightBytes() int64 { return 0 }

// slowLink wraps an in-process transport so that every send advances the clock by
// latency + bytes/bandwidth.
type slowLink struct {
	comm.Transport
	clock         *fakeClock
	latency, bpms float64
}

func (s slowLink) Send(ctx context.Context, to int, m comm.Message) error {
	n := 0
	for _, t := range m.Tensors {
		n += 4 * t.Tensor.Len()
	}
	s.clock.advance(s.latency + float64(n)/s.bpms)
	return s.Transport.Send(ctx, to, m)
}

func TestMeasureStep(t *testing.T) {
	tests := []struct {
		name  string
		model func(*fakeClock) model.Denoiser
		shape []int
		want  StepCost
	}{
		{"synthetic 2 ms sleep: per row, proportional to nothing but rows", func(c *fakeClock) model.Denoiser {
			return &synthetic.Denoiser{StepMS: 2, SleepUntil: c.sleepUntil, Now: c.Now}
		}, []int{4, 4, 2, 2}, StepCost{RowMS: 2, RefFrames: 4, FrameScaling: 0}},
		{"fixed plus per row-frame", func(c *fakeClock) model.Denoiser {
			return &costModel{clock: c, fixed: 0.5, row: 3, ref: 8}
		}, []int{8, 1, 2, 2}, StepCost{FixedMS: 0.5, RowMS: 3, RefFrames: 8, FrameScaling: 1}},
		{"odd frames", func(c *fakeClock) model.Denoiser {
			return &costModel{clock: c, fixed: 0, row: 1, ref: 5}
		}, []int{5, 1, 1, 1}, StepCost{RowMS: 1, RefFrames: 5, FrameScaling: 1}},
		{"one frame: no frame scaling measured", func(c *fakeClock) model.Denoiser {
			return &costModel{clock: c, fixed: 1, row: 2, ref: 1}
		}, []int{1, 1, 1, 1}, StepCost{FixedMS: 1, RowMS: 2, RefFrames: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(100, 0)}
			cal := &Calibrator{Now: clk.Now, Repeats: 3}
			got, ms, err := cal.MeasureStep(context.Background(), tc.model(clk), tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got.FixedMS, tc.want.FixedMS) || !near(got.RowMS, tc.want.RowMS) || got.RefFrames != tc.want.RefFrames ||
				!near(got.FrameScaling, tc.want.FrameScaling) {
				t.Errorf("step cost %+v, want %+v (measurements %+v)", got, tc.want, ms)
			}
		})
	}
	clk := &fakeClock{}
	cal := &Calibrator{Now: clk.Now}
	boom := errors.New("boom")
	if _, _, err := cal.MeasureStep(context.Background(), &costModel{clock: clk, fail: boom}, []int{1, 1, 1, 1}); !errors.Is(err, boom) {
		t.Errorf("model error: %v", err)
	}
	if _, _, err := cal.MeasureStep(context.Background(), &costModel{clock: clk}, []int{1, 1}); !errors.Is(err, ErrBadInput) {
		t.Errorf("bad shape: %v", err)
	}
}

func TestMeasureLink(t *testing.T) {
	clk := &fakeClock{t: time.Unix(100, 0)}
	pair := func(context.Context) (comm.Transport, comm.Transport, func(), error) {
		ts := comm.NewLocal(2, comm.Options{RecvTimeout: time.Second})
		// 0.05 ms latency, 1000 bytes per ms (1 MB/s); the ping-pong makes two sends.
		return slowLink{ts[0], clk, 0.05, 1000}, slowLink{ts[1], clk, 0.05, 1000}, func() { ts[0].Close(); ts[1].Close() }, nil
	}
	cal := &Calibrator{Now: clk.Now, Repeats: 3, Pair: pair}
	got, ms, err := cal.MeasureLink(context.Background(), 4004)
	if err != nil {
		t.Fatal(err)
	}
	// one way: 0.05 + 4/1000 for the small message; 0.05 + 4004/1000 for the big one.
	want := Link{LatencyMS: 0.05 + 0.004, BytesPerS: 1e6}
	if !near(got.LatencyMS, want.LatencyMS) || math.Abs(got.BytesPerS-want.BytesPerS) > 1e-5*want.BytesPerS {
		t.Errorf("link %+v, want %+v (measurements %+v)", got, want, ms)
	}
	failing := &Calibrator{Now: clk.Now, Pair: func(context.Context) (comm.Transport, comm.Transport, func(), error) {
		return nil, nil, nil, errors.New("no network")
	}}
	if _, _, err := failing.MeasureLink(context.Background(), 10); err == nil || !strings.Contains(err.Error(), "no network") {
		t.Errorf("pair error: %v", err)
	}
}

// TestTCPLoopbackLink measures a real loopback link: positive, finite numbers.
func TestTCPLoopbackLink(t *testing.T) {
	cal := &Calibrator{Repeats: 3}
	l, _, err := cal.MeasureLink(context.Background(), 16384)
	if err != nil {
		t.Fatal(err)
	}
	if l.LatencyMS <= 0 || l.LatencyMS > 1000 || l.BytesPerS < 0 || math.IsInf(l.BytesPerS, 0) {
		t.Errorf("loopback link %+v", l)
	}
}

func TestCalibrateRoundTrip(t *testing.T) {
	clk := &fakeClock{t: time.Unix(100, 0)}
	pair := func(context.Context) (comm.Transport, comm.Transport, func(), error) {
		ts := comm.NewLocal(2, comm.Options{RecvTimeout: time.Second})
		return slowLink{ts[0], clk, 0.1, 1e4}, slowLink{ts[1], clk, 0.1, 1e4}, func() {}, nil
	}
	cal := &Calibrator{Now: clk.Now, Repeats: 1, Pair: pair}
	d := &synthetic.Denoiser{StepMS: 1.5, SleepUntil: clk.sleepUntil, Now: clk.Now}
	c, err := cal.Calibrate(context.Background(), "synthetic", d, []int{4, 4, 16, 16}, Weights{Denoiser: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !near(c.Costs.Step.RowMS, 1.5) || c.Costs.HandOff != c.Costs.Collective || c.Costs.Weights.Denoiser != 7 || len(c.Measurements) != 5 {
		t.Errorf("calibration %+v", c)
	}
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := SaveCalibration(path, c); err != nil {
		t.Fatal(err)
	}
	back, err := LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n%+v\n%+v", back, c)
	}
}

func TestReadCalibrationRejects(t *testing.T) {
	good := `{"version":1,"model":"synthetic","latent_shape":[4,4,16,16],"costs":{"step":{"row_ms":1,"ref_frames":4,"frame_scaling":1}}}`
	if _, err := ReadCalibration(strings.NewReader(good)); err != nil {
		t.Fatalf("good file: %v", err)
	}
	tests := map[string]string{
		"not json":       `{`,
		"version":        strings.Replace(good, `"version":1`, `"version":2`, 1),
		"shape rank":     strings.Replace(good, `[4,4,16,16]`, `[4,16,16]`, 1),
		"zero dim":       strings.Replace(good, `[4,4,16,16]`, `[0,4,16,16]`, 1),
		"negative cost":  strings.Replace(good, `"row_ms":1`, `"row_ms":-1`, 1),
		"scaling > 1":    strings.Replace(good, `"frame_scaling":1`, `"frame_scaling":1.5`, 1),
		"no ref frames":  strings.Replace(good, `"ref_frames":4`, `"ref_frames":0`, 1),
		"trailing data":  good + `{}`,
		"negative bytes": strings.Replace(good, `"costs":{`, `"costs":{"weights":{"denoiser":-1},`, 1),
	}
	for name, in := range tests {
		if _, err := ReadCalibration(strings.NewReader(in)); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: err %v, want ErrBadInput", name, err)
		}
	}
}

func FuzzReadCalibration(f *testing.F) {
	f.Add([]byte(`{"version":1,"model":"synthetic","latent_shape":[4,4,16,16],"costs":{"step":{"row_ms":1,"ref_frames":4,"frame_scaling":1},"hand_off":{"latency_ms":0.05,"bytes_per_s":1e9}}}`))
	f.Add([]byte(`{"version":1,"latent_shape":[1,1,1,1],"costs":{}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadCalibration(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("error %v does not wrap ErrBadInput", err)
			}
			return
		}
		// Anything accepted must plan without error and write back identically.
		w := Workload{Steps: 2, Samples: 2, Frames: c.LatentShape[0], Channels: 1, Height: 1, Width: 1}
		if _, err := Plan(Request{Workload: w, Devices: 2, Costs: c.Costs}); err != nil {
			t.Fatalf("accepted calibration does not plan: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteCalibration(&buf, c); err != nil {
			t.Fatal(err)
		}
		back, err := ReadCalibration(&buf)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, back, c)
		}
	})
}
