// Package job holds the types and pure rules of vdpp's server jobs, shared by the
// dispatcher, the driver, the store and both HTTP APIs: a job's parameters and their
// parsing against the server's limits and the model (Params, Limits, ParseModelParams), its
// cost against the model's limits (Cost, CostLimits), its lifecycle (State, Record,
// Status), the retention rule (ExpiredJobs) and the errors every layer maps to a status.
//
// Contract: everything here is pure (no I/O, no clock, no goroutines; a test in
// serve/dispatch checks the imports); errors wrap the sentinels below, so callers answer
// them with errors.Is.
package job
