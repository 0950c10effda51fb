// Package serve is vdpp's inference server (`vdpp serve`): an HTTP API that accepts
// video jobs, a bounded FIFO queue, a coordinator that runs every job's denoising steps on
// K worker processes (a mesh: Config.Mesh) with step-level batching, progress events,
// cancellation, Prometheus metrics, a durable job store (bbolt plus files) and recovery
// from a lost worker.
//
// The server sees its model only through the family seam (package model/family): the
// served model's defaults, latent shape, scheduler, batching, cost estimates and input
// (image or prompt) are its family's (OpenModel, Model); the workers load the family's
// denoising role (RunWorker).
//
// Packages:
//   - serve/job: the job API's types and pure rules (parameters, limits, costs, states,
//     records, retention);
//   - serve/dispatch: the dispatcher, a deterministic state machine with no goroutines,
//     sockets, clocks or files: events in, actions out;
//   - serve (this package): the driver that feeds the dispatcher under one lock and
//     performs its actions (the coordinator), the store, the worker pool, the model's
//     conditioning and decoding, renders, and Server, which puts them together; Options,
//     the flags of `vdpp serve` (Config checks them and builds a Config), and
//     WorkerOptions, those of the worker ranks it starts (WorkerArgs renders them from
//     their flag set, so a flag is declared once);
//   - serve/httpapi: the HTTP layer (native API, probes, limits, metrics, admin, web
//     page, connection bounds); serve/openai: the OpenAI Videos API beside it;
//   - serve/worker and serve/wire: the worker rank's loop and the protocol between them.
//
// Contract:
//   - A job's final latent is bit-identical to Reference (a one-process run of the same
//     model, parameters and seed) whatever the number of workers, the batch composition,
//     worker deaths or server restarts, provided the model computes each batch row
//     independently (family.Description.IndependentRows). For other models --max-batch
//     defaults to 1 (Model.MaxBatch).
//   - An accepted job (202) is on disk before the reply; it ends succeeded, failed (with an
//     error) or cancelled, never silently lost. An end is reported only once its record is
//     on disk, so a restart never undoes it; a 202 to DELETE means the job will not
//     succeed. Store writes are retried with backoff; storage trouble answers /readyz and
//     submissions with 503 (507 for a full disk) and a generic message.
//   - The HTTP side is bounded: connection timeouts, connections per client address and
//     in all (from the descriptor limit, leaving descriptors for the store and the
//     workers), image decodes within a memory budget after a header check, one render per
//     job shared by concurrent downloads.
//   - A job is admitted only within the served model's cost limits (job.CostLimits: pixels,
//     pixels·frames·steps, and a step's working memory estimated from the model's real
//     sizes); beyond them it is refused 413 before anything is queued. GET /v1/limits shows
//     them.
//   - Every bad request gets a 4xx JSON body; nothing a client sends can crash the server
//     or disturb another job.
//   - Retention (Config.KeepJobs, `vdpp serve --keep-jobs`, default job.DefaultKeepJobs, 0 =
//     forever): a finished job whose FinishedAt is more than KeepJobs ago is deleted, from
//     memory first (every route then answers 404 as for an unknown id), then its files, then
//     its record; queued and running jobs never are. Sweeps run at start-up and then every
//     KeepJobs/10, clamped to [1 s, 1 h]; which records expire at a time T is the pure
//     job.ExpiredJobs.
//   - Close loses no computed result: it waits for the worker read loops (a result already
//     received is handled), the writes they start, submissions being persisted, sweeps and
//     renders before it closes the store.
//
// With a mesh of cfg 2 or cp above 1, every stage is a unit of cfg x cp worker ranks
// splitting the model call as `vdpp generate`'s ranks of that mesh do (unit.go); the
// dispatcher sees the unit's leader, and a member's loss is the unit's loss.
//
// The coordinator is the keeper of every sample's latest latent: it hands a batch "run
// steps [a,b) on these latents" to the worker owning that stage and keeps the input latent
// until the worker returns the result, so a worker's death costs at most one stage of work.
package serve
