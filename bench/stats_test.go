package bench

import (
	"errors"
	"math"
	"testing"
)

const ms = int64(1_000_000)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func TestFirstSampleMS(t *testing.T) {
	tests := []struct {
		name    string
		start   int64
		comp    []int64
		want    float64
		wantErr error
	}{
		{"earliest of unordered", 1000 * ms, []int64{1300 * ms, 1100 * ms, 1200 * ms}, 100, nil},
		{"single", 0, []int64{5*ms + 500_000}, 5.5, nil},
		{"at start", 7, []int64{7}, 0, nil},
		{"none", 0, nil, 0, ErrTooFewSamples},
		{"before start", 10 * ms, []int64{9 * ms}, 0, ErrBadWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FirstSampleMS(tc.start, tc.comp)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && !near(got, tc.want) {
				t.Errorf("got %v ms, want %v", got, tc.want)
			}
		})
	}
}

func TestSteadyIntervalMS(t *testing.T) {
	tests := []struct {
		name    string
		comp    []int64
		warmup  int
		want    float64
		wantErr error
	}{
		{"even spacing", []int64{0, 10 * ms, 20 * ms, 30 * ms}, 0, 10, nil},
		{"unsorted input is sorted", []int64{30 * ms, 0, 20 * ms, 10 * ms}, 0, 10, nil},
		// sorted: 0,100,110,130,160 -> warmup 1 drops 0 -> intervals 10,20,30 -> median 20;
		// the 100 ms warm-up gap is not counted.
		{"warmup dropped, odd count", []int64{160 * ms, 0, 110 * ms, 100 * ms, 130 * ms}, 1, 20, nil},
		// intervals 10,20,30,100 -> median (20+30)/2 = 25
		{"even count averages middle", []int64{0, 10 * ms, 30 * ms, 60 * ms, 160 * ms}, 0, 25, nil},
		{"outlier does not move median", []int64{0, 10 * ms, 20 * ms, 1000 * ms, 1010 * ms}, 0, 10, nil},
		{"exactly two measured", []int64{0, 5 * ms, 8 * ms}, 1, 3, nil},
		{"sub-millisecond", []int64{0, 250_000, 500_000}, 0, 0.25, nil},
		{"one measured", []int64{0, 5 * ms, 8 * ms}, 2, 0, ErrTooFewSamples},
		{"warmup beyond count", []int64{0, 5 * ms}, 5, 0, ErrTooFewSamples},
		{"empty", nil, 0, 0, ErrTooFewSamples},
		{"negative warmup", []int64{0, 1, 2}, -1, 0, ErrTooFewSamples},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]int64(nil), tc.comp...)
			got, err := SteadyIntervalMS(tc.comp, tc.warmup)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && !near(got, tc.want) {
				t.Errorf("got %v ms, want %v", got, tc.want)
			}
			for i := range in {
				if in[i] != tc.comp[i] {
					t.Fatalf("input modified: %v -> %v", in, tc.comp)
				}
			}
		})
	}
}

func TestThroughputPerS(t *testing.T) {
	tests := []struct {
		name    string
		comp    []int64
		warmup  int
		want    float64
		wantErr error
	}{
		// 4 measured over 30 ms -> 3 intervals / 0.03 s = 100/s
		{"even", []int64{0, 10 * ms, 20 * ms, 30 * ms}, 0, 100, nil},
		// sorted 0,500,510,520,540: measured 510..540 (3) -> 2 / 0.03 s
		{"warmup window", []int64{540 * ms, 0, 520 * ms, 500 * ms, 510 * ms}, 2, 2 / 0.03, nil},
		{"same instant", []int64{0, 5, 5}, 1, 0, ErrBadWindow},
		{"too few", []int64{0, 5}, 1, 0, ErrTooFewSamples},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ThroughputPerS(tc.comp, tc.warmup)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && !near(got, tc.want) {
				t.Errorf("got %v /s, want %v", got, tc.want)
			}
		})
	}
}

func TestComputeTimingPipeline(t *testing.T) {
	// In an ideal pipeline the steady interval is the slowest stage's time per sample:
	// here the last rank receives for 0.5 ms, does 7 steps of 2 ms, then a 3 ms decode.
	const t0 = int64(1_700_000_000_000_000_000)
	_, _, comp := simPipeline(t0, 4, 25, 12, 2*ms, ms/2, 3*ms)
	tm, err := ComputeTiming(t0, comp, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !near(tm.SteadySampleMS, 17.5) {
		t.Errorf("steady = %v ms, want 17.5", tm.SteadySampleMS)
	}
	if !near(tm.ThroughputSamplesPerS, 1000.0/17.5) {
		t.Errorf("throughput = %v /s, want %v", tm.ThroughputSamplesPerS, 1000.0/17.5)
	}
	// First sample: 25 steps * 2 ms + 3 hand-offs * 0.5 ms + 3 ms decode.
	if !near(tm.FirstSampleMS, 54.5) {
		t.Errorf("first = %v ms, want 54.5", tm.FirstSampleMS)
	}
	if tm.Measured != 9 {
		t.Errorf("measured = %d, want 9", tm.Measured)
	}
	if _, err := ComputeTiming(t0, comp[:3], 3); !errors.Is(err, ErrTooFewSamples) {
		t.Errorf("3 samples with 3 warm-up: err = %v, want ErrTooFewSamples", err)
	}
}

func TestRankAccounting(t *testing.T) {
	ev := func(rank int, kind string, s, e int64) Event {
		return Event{Rank: rank, Kind: kind, Sample: -1, Start: s * ms, End: e * ms}
	}
	tests := []struct {
		name       string
		events     []Event
		nranks     int
		start, end int64 // ms
		want       []RankStats
	}{
		{
			name:   "simple per kind",
			events: []Event{ev(0, KindCompute, 0, 40), ev(0, KindSend, 40, 45), ev(0, KindRecv, 50, 60), ev(0, KindWait, 60, 70)},
			nranks: 1, start: 0, end: 100,
			want: []RankStats{{Rank: 0, BusyFraction: 0.4, ComputeMS: 40, CommMS: 15, WaitMS: 10}},
		},
		{
			name:   "clipped to window",
			events: []Event{ev(0, KindCompute, -50, 20), ev(0, KindCompute, 90, 150), ev(0, KindWait, 200, 300)},
			nranks: 1, start: 0, end: 100,
			want: []RankStats{{Rank: 0, BusyFraction: 0.3, ComputeMS: 30}},
		},
		{
			name: "overlaps counted once",
			events: []Event{ev(0, KindCompute, 0, 30), ev(0, KindCompute, 10, 20), ev(0, KindCompute, 25, 50),
				ev(0, KindSend, 0, 10), ev(0, KindRecv, 5, 15)},
			nranks: 1, start: 0, end: 100,
			want: []RankStats{{Rank: 0, BusyFraction: 0.5, ComputeMS: 50, CommMS: 15}},
		},
		{
			name:   "decode and encode are compute; unknown kinds ignored",
			events: []Event{ev(1, KindEncode, 0, 10), ev(1, KindDecode, 20, 30), ev(1, "idle", 30, 90)},
			nranks: 2, start: 0, end: 100,
			want: []RankStats{{Rank: 0}, {Rank: 1, BusyFraction: 0.2, ComputeMS: 20}},
		},
		{
			name:   "out-of-range and invalid events ignored",
			events: []Event{ev(5, KindCompute, 0, 10), ev(-1, KindCompute, 0, 10), ev(0, KindCompute, 10, 5)},
			nranks: 1, start: 0, end: 100,
			want: []RankStats{{Rank: 0}},
		},
		{
			name:   "empty window",
			events: []Event{ev(0, KindCompute, 0, 10)},
			nranks: 2, start: 10, end: 10,
			want: []RankStats{{Rank: 0}, {Rank: 1}},
		},
		{
			name:   "touching intervals",
			events: []Event{ev(0, KindCompute, 0, 10), ev(0, KindCompute, 10, 20)},
			nranks: 1, start: 0, end: 40,
			want: []RankStats{{Rank: 0, BusyFraction: 0.5, ComputeMS: 20}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RankAccounting(tc.events, tc.nranks, tc.start*ms, tc.end*ms)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d ranks, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Rank != w.Rank || !near(g.BusyFraction, w.BusyFraction) || !near(g.ComputeMS, w.ComputeMS) ||
					!near(g.CommMS, w.CommMS) || !near(g.WaitMS, w.WaitMS) {
					t.Errorf("rank %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestRankAccountingPipelineBottleneck(t *testing.T) {
	// The bottleneck (last) stage's period is 0.25 ms recv + 12 ms steps + 2 ms decode;
	// over the steady window it computes 14 ms of every 14.25 ms and receives the rest.
	events, _, comp := simPipeline(0, 4, 24, 20, 2*ms, ms/4, 2*ms)
	st := RankAccounting(events, 4, comp[5], comp[15])
	if !near(st[3].BusyFraction, 14/14.25) || !near(st[3].ComputeMS, 140) || !near(st[3].CommMS, 2.5) {
		t.Errorf("bottleneck = %+v, want busy %v, compute 140 ms, comm 2.5 ms", st[3], 14/14.25)
	}
	// Over the whole run, rank 0 computes 20 * 12 ms; rank 1 waits for the pipeline to fill.
	start, end, _ := EventWindow(events)
	all := RankAccounting(events, 4, start, end)
	if !near(all[0].ComputeMS, 240) {
		t.Errorf("rank 0 compute = %v ms, want 240", all[0].ComputeMS)
	}
	if !near(all[1].WaitMS, 12) {
		t.Errorf("rank 1 wait = %v ms, want 12 (rank 0's first stage)", all[1].WaitMS)
	}
}

func FuzzRankAccounting(f *testing.F) {
	f.Add(int64(0), int64(10), int64(5), int64(20), uint8(0), int64(3), int64(17))
	f.Fuzz(func(t *testing.T, s1, e1, s2, e2 int64, kind uint8, ws, we int64) {
		kinds := []string{KindCompute, KindSend, KindRecv, KindWait, KindDecode, "other"}
		k := kinds[int(kind)%len(kinds)]
		// Keep spans small enough that their sum cannot overflow.
		clamp := func(v int64) int64 { return v % (1 << 40) }
		events := []Event{
			{Rank: 0, Kind: k, Start: clamp(s1), End: clamp(e1)},
			{Rank: 0, Kind: k, Start: clamp(s2), End: clamp(e2)},
		}
		ws, we = clamp(ws), clamp(we)
		st := RankAccounting(events, 1, ws, we)
		windowMS := float64(max(we-ws, 0)) / 1e6
		r := st[0]
		for _, v := range []float64{r.ComputeMS, r.CommMS, r.WaitMS} {
			if v < 0 || v > windowMS*(1+1e-12) {
				t.Fatalf("duration %v outside [0, %v]: %+v", v, windowMS, r)
			}
		}
		if r.BusyFraction < 0 || r.BusyFraction > 1+1e-12 {
			t.Fatalf("busy %v outside [0,1]", r.BusyFraction)
		}
	})
}

func TestEventWindow(t *testing.T) {
	if _, _, ok := EventWindow(nil); ok {
		t.Error("empty: ok = true")
	}
	s, e, ok := EventWindow([]Event{{Start: 5, End: 9}, {Start: 2, End: 4}, {Start: 9, End: 1}, {Start: 3, End: 12}})
	if !ok || s != 2 || e != 12 {
		t.Errorf("got [%d, %d] %v, want [2, 12] true (the invalid event is skipped)", s, e, ok)
	}
}

func TestSteadyPerSampleMS(t *testing.T) {
	ms := func(v float64) int64 { return int64(v * 1e6) }
	tests := []struct {
		name     string
		replicas []map[int64]int64
		micro    int
		warmup   int
		want     float64
	}{
		{"one replica equals the median interval", []map[int64]int64{{0: ms(10), 1: ms(14), 2: ms(18), 3: ms(23)}}, 1, 0, 4},
		{"warm-up dropped", []map[int64]int64{{0: ms(1), 1: ms(20), 2: ms(24), 3: ms(28)}}, 1, 1, 4},
		{"micro-batch finishes together", []map[int64]int64{{0: ms(8), 1: ms(8), 2: ms(16), 3: ms(16), 4: ms(24), 5: ms(24)}}, 2, 0, 4},
		{"two replicas in step", []map[int64]int64{{0: ms(10), 2: ms(20), 4: ms(30)}, {1: ms(10.1), 3: ms(20.1), 5: ms(30.1)}}, 1, 0, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SteadyPerSampleMS(tc.replicas, tc.micro, tc.warmup)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := SteadyPerSampleMS([]map[int64]int64{{0: 1}}, 1, 0); !errors.Is(err, ErrTooFewSamples) {
		t.Fatalf("one sample: %v", err)
	}
}
