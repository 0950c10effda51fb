// Package plan is vdpp's cost model and planner: from a workload (steps, samples, latent
// shape, guidance, micro-batch), a number of devices, the memory of each, and measured or
// given costs, it predicts for every feasible mesh pp x cfg x cp x dp = devices the
// first-sample latency, the steady throughput and the weight memory per device, ranks the
// meshes for a goal (latency or throughput), and says in plain words, from the numbers,
// where data parallelism equals or beats the step pipeline and where the pipeline wins.
//
// Contract: the cost model and the planner (Predict, Enumerate, Plan) are pure and
// deterministic: no clocks, no I/O, no goroutines; the same inputs give the same ranking
// and the same notes. Every formula lives in formulas.go. Clocks and sockets live only in
// the calibration code (Calibrator), whose clock and transports are struct fields so tests
// can swap them. Calibration files are JSON, read with ReadCalibration (validated).
package plan
