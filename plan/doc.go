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
//
// The commands' side: ResolveShape turns a workload's video size into its latent through
// the model's family; AutoMesh is every command's --plan auto (the step measured here, the
// collectives between real processes); Command is `vdpp plan` (its flags, the costs
// measured, read from a calibration file or given, the table and the command lines that run
// the best mesh); CalibrateWorker is the `vdpp worker calibrate` job those measurements
// launch, its arguments rendered from its flag set.
package plan
