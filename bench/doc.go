// Package bench runs vdpp's benchmarks and reports them: it turns what a run measured
// (sample completion times, per-rank timeline events, the baseline's numbers) into a
// Report (the JSON written by `vdpp bench --json FILE`), a Markdown results table, a
// Chrome trace (opens in Perfetto or chrome://tracing) and an SVG Gantt chart.
//
// Contract of the reporting half: every function that turns measurements into numbers or
// documents is pure and deterministic (no clocks, no goroutines, no file system); it reads
// its inputs and writes to the io.Writer it is given. Statistics that cannot be computed
// honestly from the data (too few samples, an empty window) return an error wrapping a
// sentinel such as ErrTooFewSamples instead of a made-up number. Timestamps are Unix
// nanoseconds from one host's wall clock; durations in reports are milliseconds.
package bench
