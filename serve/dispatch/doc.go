// Package dispatch is the coordinator's state machine, in the manner of etcd raft's
// RawNode: it holds every job's lifecycle (queue, admission, running slots, the latest
// latent of each sample), the live workers and their batches, and decides. A driver (the
// coordinator of package serve) feeds it events and performs the actions it returns. It
// has no goroutines, sockets, clocks or files: time comes in with the events, and what
// must happen in the world (send a batch, write a record, wake subscribers) goes out as
// actions, so every rule is tested with tables of events and actions and a fuzzer that
// checks its invariants.
//
// Events: Load (the store's records at start), Reserve/Submitted (a submission before and
// after its files are written), Prepared (a job's initial sample is built), Cancel, Join
// and Lost (a worker's connection), Message (a worker's progress, dropped rows, result,
// failure), OutputWritten and RecordSaved (a write landed or failed for good), CheckStalls
// (the watchdog's tick), Expire and Remove (retention and DELETE), Close. Take returns the
// actions of the events since the last call, in order.
//
// Contract: a job's end (succeeded, failed, cancelled) is shown to clients (Status) only
// once its record has landed; a sample's latest latent is kept until the next stage's
// result arrives, so a lost worker costs at most one stage; a sample's steps are cut over the
// live stages of a data-parallel replica (Limits.Replicas) and each batch goes to the least
// busy replica whose stage holds its first step; batches join only samples that
// share schedule, step range, shape, guidance and windows; a worker silent on a batch
// beyond its stall limit (scaled by the batch's work and the measured step rate) is closed.
// The package imports nothing that does I/O (a test checks it).
package dispatch
