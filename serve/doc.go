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
//     error) or cancelled, never silently lost.
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
// stage of work. I/O lives at the edges (http.go, store.go, pool.go, conn.go); the batching
// and planning rules (batch.go) and the retention rule (ExpiredJobs in retention.go) are
// pure.
package serve
