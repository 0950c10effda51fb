package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sampleReport is a fully populated report used by several tests.
func sampleReport() Report {
	eq := true
	l2 := 0.0
	return Report{
		Model: "svd-dev", Command: "vdpp bench --nproc 4 --model svd-dev",
		Host:  Host{GOOS: "linux", GOARCH: "amd64", NumCPU: 16, GoVersion: "go1.26.8"},
		NProc: 4, PP: 4, CFG: 1, CP: 1, DP: 1,
		TotalSteps: 25, NumSamples: 16, WarmupSamples: 4, MicroBatch: 1,
		LatentShape: []int{1, 14, 4, 72, 128}, StepMS: 12.3456,
		StageSteps:    [][2]int{{0, 7}, {7, 13}, {13, 19}, {19, 25}},
		FirstSampleMS: 345.678, SteadySampleMS: 90.5, ThroughputSamplesPerS: 11.0497,
		BaselineFirstSampleMS: 310.2, BaselineSteadySampleMS: 308.75, BaselineThroughputSamplesPerS: 3.2389,
		Speedup: 308.75 / 90.5, Efficiency: 308.75 / 90.5 / 4,
		PerRank: []RankStats{
			{Rank: 0, BusyFraction: 0.9512, ComputeMS: 1033.2, CommMS: 12.5, WaitMS: 0},
			{Rank: 1, BusyFraction: 0.812, ComputeMS: 885.25, CommMS: 25.125, WaitMS: 150.5},
			{Rank: 2, BusyFraction: 0.8, ComputeMS: 880, CommMS: 24, WaitMS: 160},
			{Rank: 3, BusyFraction: 0.99, ComputeMS: 1090.0, CommMS: 11, WaitMS: 0.0005},
		},
		EqualToBaseline: &eq, MaxRelL2VsBaseline: &l2, WallMS: 2345.6,
	}
}

func TestReportJSONFieldNames(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"model", "command", "host", "nproc", "pp", "cfg", "cp", "dp", "total_steps",
		"num_samples", "warmup_samples", "micro_batch", "latent_shape", "step_ms", "stage_steps",
		"first_sample_ms", "steady_sample_ms", "throughput_samples_per_s", "baseline_first_sample_ms",
		"baseline_steady_sample_ms", "baseline_throughput_samples_per_s", "speedup", "efficiency",
		"per_rank", "equal_to_baseline", "max_rel_l2_vs_baseline", "wall_ms"}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("keys:\n got %v\nwant %v", got, want)
	}
	pr := m["per_rank"].([]any)[0].(map[string]any)
	for _, k := range []string{"rank", "busy_fraction", "compute_ms", "comm_ms", "wait_ms"} {
		if _, ok := pr[k]; !ok {
			t.Errorf("per_rank entry lacks %q", k)
		}
	}
	if ss := m["stage_steps"].([]any)[1].([]any); ss[0].(float64) != 7 || ss[1].(float64) != 13 {
		t.Errorf("stage_steps[1] = %v, want [7 13]", ss)
	}
}

func TestReportNoBaselineJSON(t *testing.T) {
	r := sampleReport()
	r.EqualToBaseline, r.MaxRelL2VsBaseline = nil, nil
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	if !strings.Contains(s, `"equal_to_baseline": null`) {
		t.Errorf("equal_to_baseline should be null when no baseline ran:\n%s", s)
	}
	if strings.Contains(s, "max_rel_l2_vs_baseline") {
		t.Error("max_rel_l2_vs_baseline should be omitted when nil")
	}
}

func TestReportRoundTrip(t *testing.T) {
	want := sampleReport()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestWriteJSONRejectsNaN(t *testing.T) {
	r := sampleReport()
	r.SteadySampleMS = math.NaN()
	if err := WriteJSON(&bytes.Buffer{}, r); err == nil {
		t.Error("NaN steady interval: want an error")
	}
}

func TestReadReportInvalid(t *testing.T) {
	tests := []struct{ name, in string }{
		{"not json", "hello"},
		{"trailing", `{"model":"x"} {"model":"y"}`},
		{"negative nproc", `{"nproc":-1}`},
		{"stage past total", `{"total_steps":10,"stage_steps":[[0,5],[5,11]]}`},
		{"stage reversed", `{"stage_steps":[[5,2]]}`},
		{"per-rank rank too big", `{"nproc":2,"per_rank":[{"rank":2}]}`},
		{"negative latent dim", `{"latent_shape":[1,-4]}`},
		{"wrong type", `{"nproc":"four"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadReport(strings.NewReader(tc.in)); !errors.Is(err, ErrBadReport) {
				t.Errorf("err = %v, want ErrBadReport", err)
			}
		})
	}
}

func TestComputeSpeedup(t *testing.T) {
	tests := []struct {
		name                 string
		steady, base         float64
		nproc                int
		wantSpeedup, wantEff float64
	}{
		{"4x on 4", 25, 100, 4, 4, 1},
		{"half efficient", 50, 100, 4, 2, 0.5},
		{"no baseline", 50, 0, 4, 0, 0},
		{"no steady", 0, 100, 4, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Report{NProc: tc.nproc, SteadySampleMS: tc.steady, BaselineSteadySampleMS: tc.base, Speedup: 9, Efficiency: 9}
			r.ComputeSpeedup()
			if !near(r.Speedup, tc.wantSpeedup) || !near(r.Efficiency, tc.wantEff) {
				t.Errorf("speedup %v eff %v, want %v %v", r.Speedup, r.Efficiency, tc.wantSpeedup, tc.wantEff)
			}
		})
	}
}

func TestSetTiming(t *testing.T) {
	var r Report
	r.SetTiming(Timing{FirstSampleMS: 1, SteadySampleMS: 2, ThroughputSamplesPerS: 3})
	r.SetBaselineTiming(Timing{FirstSampleMS: 4, SteadySampleMS: 5, ThroughputSamplesPerS: 6})
	if r.FirstSampleMS != 1 || r.SteadySampleMS != 2 || r.ThroughputSamplesPerS != 3 ||
		r.BaselineFirstSampleMS != 4 || r.BaselineSteadySampleMS != 5 || r.BaselineThroughputSamplesPerS != 6 {
		t.Errorf("got %+v", r)
	}
}

func FuzzReadReport(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleReport()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"nproc":2,"stage_steps":[[0,1],[1,2]],"total_steps":2}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ReadReport(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadReport) {
				t.Fatalf("error %v does not wrap ErrBadReport", err)
			}
			return
		}
		// A report that was accepted must survive a write/read round trip unchanged.
		var out bytes.Buffer
		if err := WriteJSON(&out, r); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		again, err := ReadReport(&out)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the report:\n%+v\n%+v", r, again)
		}
		// Markdown, title and validation never fail on an accepted report.
		if err := WriteMarkdown(&bytes.Buffer{}, r); err != nil {
			t.Fatalf("markdown: %v", err)
		}
		_ = SVGTitle(r)
	})
}
