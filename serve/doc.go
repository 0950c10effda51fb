// Package serve is vdpp's inference server: an HTTP API that accepts image-to-video jobs,
// a bounded FIFO queue, a coordinator that runs every job's denoising steps on K worker
// processes with step-level batching, progress events, cancellation, Prometheus metrics,
// a durable job store (bbolt plus files) and recovery from a lost worker.
//
// Contract:
//   - A job's final latent is bit-identical to Reference (a one-process run of the same
//     Generator, Stepper and seed) whatever the number of workers, the batch composition,
//     worker deaths or server restarts, provided the model computes each batch row
//     independently (the synthetic and dummy models do; model.Denoiser documents it). For
//     checkpoint models, whose rows are not promised independent, --max-batch defaults to 1
//     (ModelSpec.DefaultMaxBatch). A model family that loads from a folder (SVD, the
//     built-in model) gets a FamilyGenerator: its family.Sampler's conditioning and
//     decoding roles; the workers hold its denoising role.
//   - An accepted job (202) is on disk before the reply; it ends succeeded, failed (with an
//     error) or cancelled, never silently lost. An end is reported only once its record is
//     on disk, so a restart never undoes it; a 202 to DELETE means the job will not
//     succeed. Store writes are retried with backoff; storage trouble answers /readyz and
//     submissions with 503 (507 for a full disk) and a generic message.
//   - The HTTP side is bounded: connection timeouts, connections per client address and
//     in all (ConnLimits, from the descriptor limit, leaving descriptors for the store and
//     the workers), image decodes within a memory budget after a header check, one render
//     per job shared by concurrent downloads.
//   - A job is admitted only within the served model's cost limits (CostLimits: pixels,
//     pixels·frames·steps, and a step's working memory estimated from the model's real
//     sizes, each at most Config.CostMultiple times the model's native job's); beyond them
//     it is refused 413 before anything is queued. GET /v1/limits shows them.
//   - Every bad request gets a 4xx JSON body {"error": "..."}; nothing a client sends can
//     crash the server or disturb another job.
//   - Retention (Config.KeepJobs, `vdpp serve --keep-jobs`, default DefaultKeepJobs, 0 =
//     forever): a finished job whose FinishedAt is more than KeepJobs ago is deleted, from
//     memory first (every route then answers 404 as for an unknown id), then its files, then
//     its record; queued and running jobs never are. Sweeps run at start-up (which also
//     removes job folders with no record) and then every KeepJobs/10, clamped to [1 s, 1 h];
//     which records expire at a time T is the pure ExpiredJobs.
//   - The OpenAI Videos API (openai*.go) serves the same jobs on the same paths: an id
//     "video_HEX" names native job HEX, a JSON or OpenAI-field multipart POST /v1/videos is
//     an OpenAI create (OpenAIParams maps its fields); its errors are OpenAI's
//     {"error": {"message", "type", "param", "code"}}. GET / is an embedded web page.
//   - Close loses no computed result: it waits for the worker read loops (a result already
//     received is handled), the writes they start, submissions being persisted, sweeps and
//     renders before it closes the store.
//
// The coordinator (Coordinator) is the keeper of every sample's latest latent: it hands a
// batch "run steps [a,b) on these latents" to the worker owning that stage and keeps the
// input latent until the worker returns the result, so a worker's death costs at most one
// stage of work. Its decisions are one deterministic state machine, the dispatcher
// (dispatch.go, dispatch_worker.go): no goroutines, sockets, clocks or files; it takes
// events (submit, cancel, a worker joined or lost, progress, a batch's result or failure,
// a write landed, the stall watchdog's tick, a retention sweep) with the time as a value
// and returns actions (dispatch_action.go: prepare, run a batch, cancel a row, close or
// kill a rank, persist a record before reporting, write an output, notify subscribers,
// forget a job). Coordinator is its driver: it feeds events under one lock and performs
// the actions; I/O lives at the edges (coord.go, conn.go, durable.go, http.go, store.go,
// pool.go). The batching and planning rules (batch.go) and the retention rule
// (ExpiredJobs in retention.go) are pure too. The worker side is package serve/worker, the
// protocol between them package serve/wire; RunWorker loads a rank's model and runs it.
package serve
