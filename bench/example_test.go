package bench_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/vdpp/vdpp/bench"
)

func ExampleComputeTiming() {
	const ms = int64(1_000_000)
	start := int64(0)
	// Completion times of 6 samples (any order); the first 2 are warm-up.
	completions := []int64{120 * ms, 100 * ms, 150 * ms, 180 * ms, 210 * ms, 250 * ms}
	t, err := bench.ComputeTiming(start, completions, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("first %.0f ms, steady %.0f ms/sample, %.1f samples/s over %d measured\n",
		t.FirstSampleMS, t.SteadySampleMS, t.ThroughputSamplesPerS, t.Measured)

	_, err = bench.ComputeTiming(start, completions[:3], 2)
	fmt.Println(err)
	// Output:
	// first 100 ms, steady 30 ms/sample, 30.0 samples/s over 4 measured
	// steady interval: bench: too few measured samples: need at least 2 completions after 2 warm-up, have 3 in all
}

func ExampleRankAccounting() {
	const ms = int64(1_000_000)
	events := []bench.Event{
		{Rank: 0, Kind: bench.KindCompute, Sample: 0, Step0: 0, Step1: 4, Start: 0, End: 40 * ms},
		{Rank: 0, Kind: bench.KindSend, Sample: 0, Start: 40 * ms, End: 45 * ms},
		{Rank: 1, Kind: bench.KindWait, Sample: 0, Start: 0, End: 40 * ms},
		{Rank: 1, Kind: bench.KindRecv, Sample: 0, Start: 40 * ms, End: 45 * ms},
		{Rank: 1, Kind: bench.KindCompute, Sample: 0, Step0: 4, Step1: 8, Start: 45 * ms, End: 85 * ms},
	}
	for _, st := range bench.RankAccounting(events, 2, 0, 100*ms) {
		fmt.Printf("rank %d: busy %.0f%%, compute %.0f ms, comm %.0f ms, wait %.0f ms\n",
			st.Rank, 100*st.BusyFraction, st.ComputeMS, st.CommMS, st.WaitMS)
	}
	// Output:
	// rank 0: busy 40%, compute 40 ms, comm 5 ms, wait 0 ms
	// rank 1: busy 40%, compute 40 ms, comm 5 ms, wait 40 ms
}

func ExampleWriteMarkdown() {
	r := bench.Report{
		Model: "dummy", NProc: 2, PP: 2, TotalSteps: 8, NumSamples: 6, WarmupSamples: 2,
		StageSteps:    [][2]int{{0, 4}, {4, 8}},
		FirstSampleMS: 85, SteadySampleMS: 42, ThroughputSamplesPerS: 23.8,
		BaselineFirstSampleMS: 80, BaselineSteadySampleMS: 80, BaselineThroughputSamplesPerS: 12.5,
		PerRank: []bench.RankStats{{Rank: 0, BusyFraction: 0.95, ComputeMS: 190}, {Rank: 1, BusyFraction: 0.9, ComputeMS: 180, WaitMS: 20}},
	}
	r.ComputeSpeedup()
	if err := bench.WriteMarkdown(os.Stdout, r); err != nil {
		fmt.Println(err)
	}
	// Output:
	// ## vdpp bench: dummy
	//
	// **Configuration:** 2 processes (pp 2) · 8 steps · 6 samples, 2 warm-up
	//
	// | metric | vdpp (2 processes) | baseline (1 process) |
	// |:---|---:|---:|
	// | first sample (ms) | 85.00 | 80.00 |
	// | steady (ms / sample) | 42.00 | 80.00 |
	// | throughput (samples / s) | 23.80 | 12.50 |
	// | speedup (baseline steady / steady) | 1.90× | |
	// | efficiency (speedup / processes) | 95.2 % | |
	// | equal to baseline | not checked | |
	// | wall (ms) | 0 | |
	//
	// ### Per rank
	//
	// | rank | steps [start, end) | busy | compute (ms) | comm (ms) | wait (ms) |
	// |---:|:---|---:|---:|---:|---:|
	// | 0 | [0, 4) | 95.0 % | 190.0 | 0 | 0 |
	// | 1 | [4, 8) | 90.0 % | 180.0 | 0 | 20.00 |
}

func ExampleWriteSVG() {
	const ms = int64(1_000_000)
	events := []bench.Event{
		{Rank: 0, Kind: bench.KindCompute, Sample: 0, Step0: 0, Step1: 4, Start: 0, End: 40 * ms},
		{Rank: 0, Kind: bench.KindSend, Sample: 0, Start: 40 * ms, End: 45 * ms},
		{Rank: 1, Kind: bench.KindRecv, Sample: 0, Start: 40 * ms, End: 45 * ms},
		{Rank: 1, Kind: bench.KindCompute, Sample: 0, Step0: 4, Step1: 8, Start: 45 * ms, End: 85 * ms},
	}
	var svg strings.Builder
	if err := bench.WriteSVG(&svg, events, [][2]int{{0, 4}, {4, 8}}, "two stages\nsteady 40 ms/sample"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.HasPrefix(svg.String(), "<svg "), strings.Count(svg.String(), `class="lane"`), "lanes")
	// Output: true 2 lanes
}
