// Package pipeline is vdpp's engine: pipeline parallelism over denoising steps.
//
// The S steps of every sample are cut into K contiguous stages (Plan*), one per rank. A
// work item (a micro-batch of samples, see Item) enters stage 0, runs that stage's steps,
// and is handed to the next stage over a comm.Transport; with many items in flight every
// stage works on a different item at once. The cut (EvenStages, BalanceStages, CutStages)
// balances the steps against each stage's fixed costs (StageExtras: conditioning on the
// first stage, a share of the decode on the decoding stages); the planner and the engine
// make the same cut.
//
// The package is split the way etcd's raft is:
//   - plan.go, stage.go and step math are pure and deterministic (no sockets, clocks or
//     goroutines): Stage is a state machine that says what to do next (prepare, compute a
//     step, forward, finish) and is told what happened;
//   - driver.go is the only place with I/O: it moves items between the transport, the
//     state machine and the denoiser, sends in the background so the next computation
//     overlaps the hand-off, and records a timeline.
//
// The last stage's finishing work (the decode) can be shared with other ranks (Spread,
// PartWorkload): it hands out a sample's independent parts and joins them in order, so the
// result is the one-rank result bit for bit.
//
// A step cache (Cache, ItemCache, docs/caching.md) lets a denoiser that implements
// model.StepCacher reuse work of a sample's earlier steps; its rule, states and records
// travel with the item like the scheduler's state, so caching keeps the promise below. The
// rule and its flags' parsing are cache.go, what a static rule costs each step
// cache_cost.go, an item's states and records cache_state.go, report.json's summary
// cache_report.go, the one line a cached run prints (CacheOutcome) cacheline.go, and a
// cached step with its wire form cachestep.go.
//
// Determinism: the final latents of a K-stage run are bit-identical to the one-stage run with
// the same seeds and micro-batch size, because every item always holds the same samples and
// each step runs the same float32 operations in the same order wherever it runs.
package pipeline
