package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/dispatch"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/tensor"
)

// inputFile and finalFile are the per-job files in the store.
const (
	// idLen is the length of the ids this server hands out (newID: 12 random bytes in hex).
	idLen = 24

	inputFile     = "input.img"
	lastInputFile = "last.img" // a first-last-frame job's last image
	finalFile     = "final.f32"
)

// coordConfig configures a coordinator.
type coordConfig struct {
	// Model prepares jobs (the served model's conditioning role).
	Model generator
	Store *jobStore
	// Records are the store's jobs at start-up (openStore), in submission order.
	Records []job.Record
	// NProc is the number of worker ranks.
	NProc int
	// Replicas are the ranks that join the dispatcher, by replica in stage order
	// (dispatch.Limits.Replicas; default: one pipeline of the NProc ranks).
	Replicas [][]int
	// Mesh, when its cfg or cp is above 1, gives every rank of Replicas a unit of ranks
	// that compute its steps with it (meshUnits); zero or cfg = cp = 1: none.
	Mesh comm.Mesh
	// MaxBatch bounds the samples of one denoiser call (default Model.MaxBatch()).
	MaxBatch int
	// MaxQueue is the places of the queue of jobs waiting for a slot (default 64), shared
	// fairly between clients (dispatch.Dispatcher.Reserve: each its share, at most twice
	// MaxQueue in all); beyond a client's share Submit fails with ErrQueueFull.
	MaxQueue int
	// MaxPrepares bounds the prepares (image decode and resize, conditioning) in flight
	// beside the denoising (default DefaultMaxPrepares).
	MaxPrepares int
	// MaxRunning bounds the jobs holding a pipeline slot (default 2*MaxBatch per rank that
	// connects).
	MaxRunning int
	// Depth is how many batches a worker may hold at once (default 2: one computing, one
	// waiting, so transfers overlap compute).
	Depth int
	// MaxAttempts bounds how often one stage of a sample is re-run after worker losses
	// before the job fails (default 8).
	MaxAttempts int
	// StallTimeout: a worker that holds a batch without reporting a step for this long is
	// treated as dead (its connection is closed and its process killed). 0 disables.
	StallTimeout time.Duration
	// StepRatePrior predicts a step's seconds per unit of work before one was measured
	// (dispatch.Limits.StepRatePrior).
	StepRatePrior float64
	// HoldFile: see Config.HoldFile.
	HoldFile string
	Metrics  *metricSet
	Log      *slog.Logger
	Now      func() time.Time
}

// stages counts the ranks that connect: one per stage of each replica.
func (c *coordConfig) stages() int {
	n := 0
	for _, r := range c.Replicas {
		n += len(r)
	}
	return n
}

// connects reports whether rank is one of the ranks that connect.
func (c *coordConfig) connects(rank int) bool {
	for _, rep := range c.Replicas {
		if slices.Contains(rep, rank) {
			return true
		}
	}
	return false
}

func (c *coordConfig) defaults() error {
	if c.NProc < 1 {
		return fmt.Errorf("serve: --nproc %d: need at least 1", c.NProc)
	}
	if c.Model == nil || c.Store == nil {
		return fmt.Errorf("serve: coordinator needs a model and a store")
	}
	if c.MaxBatch < 1 {
		c.MaxBatch = c.Model.MaxBatch()
	}
	if c.MaxQueue < 1 {
		c.MaxQueue = 64
	}
	if c.MaxPrepares < 1 {
		c.MaxPrepares = DefaultMaxPrepares()
	}
	if c.Depth < 1 {
		c.Depth = 2
	}
	if c.Replicas == nil {
		c.Replicas = [][]int{make([]int, c.NProc)}
		for r := range c.NProc {
			c.Replicas[0][r] = r
		}
	}
	if c.MaxRunning < 1 {
		c.MaxRunning = 2 * c.stages() * c.MaxBatch
	}
	if c.MaxAttempts < 1 {
		c.MaxAttempts = 8
	}
	if c.Metrics == nil {
		c.Metrics = newMetrics()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// coordinator is the dispatcher's driver: it owns the lock, the worker connections, the
// store and the goroutines. Every public method and every I/O outcome is an event fed to
// the dispatcher under mu, followed by the actions it returns (flushLocked).
type coordinator struct {
	cfg coordConfig

	mu sync.Mutex
	// d holds every job and worker decision; guarded by mu.
	d *dispatch.Dispatcher
	// conns are the worker connections, by the dispatcher's view of them.
	conns map[*dispatch.Worker]*workerConn
	// io is what the driver keeps per job: record-write serialisation, waiters, subscribers.
	io map[*dispatch.Job]*jobIO
	// wg counts everything that may still write to the store: submissions being persisted,
	// prepares, record and output writes, sweeps, and the read loops of worker connections
	// (a result a read loop has received is recorded). It is only incremented under mu
	// while !closed, or by a goroutine it already counts, so Close's Wait sees them all.
	wg sync.WaitGroup
	// unreaped holds expired jobs whose record delete failed; the next sweep retries.
	unreaped []job.Record
	// onLost is called (under mu) when a worker's connection is lost.
	onLost func(rank, pid int)
	// closing is closed by Close: store retries give up.
	closing chan struct{}
	// ctx ends with Close: prepares in flight stop.
	ctx    context.Context
	cancel context.CancelFunc
	// joined is closed and replaced whenever a worker joins (waitReady).
	joined chan struct{}
	// units are the mesh's cfg x cp units by each of their ranks (nil: none; see unit.go);
	// the map is fixed, the units' fields are guarded by mu.
	units map[int]*unit
	// unitHost is the host of the worker listener, where the units' stores listen.
	unitHost string
	health   storeHealth
	hooks    coordHooks
}

// jobIO is the driver's per-job state.
type jobIO struct {
	// wmu serialises the job's record writes (each writes the latest record).
	wmu sync.Mutex
	// saved is closed when a new record version lands (waitSaved).
	saved chan struct{}
	subs  map[chan struct{}]struct{}
	// cancelPrepare stops the job's prepare in flight (nil: none).
	cancelPrepare context.CancelFunc
}

// coordHooks are test seams; a nil hook does nothing. They are set before the coordinator
// runs.
type coordHooks struct {
	// received runs in rank's read loop for each message, before it is handled.
	received func(rank int, m comm.Message)
	// draining runs in Close once no new work can start, before it waits for the read
	// loops and the store writes.
	draining func()
}

// DefaultMaxPrepares is --max-prepares' default: half the cores, 1 to 4 (a prepare's
// network calls take the model's lock one at a time; the rest, decoding and resizing the
// image, runs beside).
func DefaultMaxPrepares() int { return min(4, max(1, runtime.NumCPU()/2)) }

// newCoordinator takes the store's records: finished jobs stay downloadable, queued and
// running ones are queued again (from step 0: a job's result does not depend on where it restarts).
func newCoordinator(cfg coordConfig) (*coordinator, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := dispatch.New(dispatch.Limits{MaxBatch: cfg.MaxBatch, MaxQueue: cfg.MaxQueue, MaxRunning: cfg.MaxRunning, MaxPrepares: cfg.MaxPrepares,
		Depth: cfg.Depth, MaxAttempts: cfg.MaxAttempts, StallTimeout: cfg.StallTimeout, StepRatePrior: cfg.StepRatePrior,
		Replicas: cfg.Replicas})
	c := &coordinator{cfg: cfg, d: d, conns: map[*dispatch.Worker]*workerConn{}, io: map[*dispatch.Job]*jobIO{},
		closing: make(chan struct{}), joined: make(chan struct{}), units: meshUnits(cfg.Mesh)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cfg.Metrics.attach(c)
	c.mu.Lock()
	c.d.Load(cfg.Records, cfg.Now())
	c.flushLocked()
	c.mu.Unlock()
	return c, nil
}

// flushLocked performs the dispatcher's pending actions, in order.
func (c *coordinator) flushLocked() {
	for _, a := range c.d.Take() {
		switch a := a.(type) {
		case dispatch.Prepare:
			c.wg.Add(1)
			ctx, cancel := context.WithCancel(c.ctx)
			c.ioLocked(a.Job).cancelPrepare = cancel
			go c.prepare(ctx, cancel, a)
		case dispatch.CancelPrepare:
			if io := c.io[a.Job]; io != nil && io.cancelPrepare != nil {
				io.cancelPrepare()
			}
		case dispatch.Run:
			if w := c.conns[a.Worker]; w != nil {
				c.cfg.Metrics.batchSize.Observe(float64(a.Rows))
				m := wire.Run(a.Item, a.End, a.Steps, a.Spec)
				w.enqueue(m)
				for _, mw := range c.unitMirror(w) {
					mw.enqueue(m)
				}
			}
		case dispatch.CancelRow:
			// A unit's members must step the same rows: its cancelled rows are dropped
			// when the batch comes back.
			if w := c.conns[a.Worker]; w != nil && c.units[w.rank] == nil {
				w.enqueue(wire.Cancel(a.Batch, a.Row))
			}
		case dispatch.CloseWorker:
			if w := c.conns[a.Worker]; w != nil {
				w.close()
			}
		case dispatch.Kill:
			if c.onLost != nil {
				c.onLost(a.Rank, a.Pid)
			}
		case dispatch.Persist:
			c.wg.Add(1)
			go c.writeRecord(a.Job, c.ioLocked(a.Job))
		case dispatch.WriteOutput:
			c.wg.Add(1)
			go c.writeOutput(a.Job, a.Latent)
		case dispatch.Notify:
			if io := c.io[a.Job]; io != nil {
				for ch := range io.subs {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		case dispatch.Saved:
			if io := c.io[a.Job]; io != nil && io.saved != nil {
				close(io.saved)
				io.saved = nil
			}
		case dispatch.Forget:
			delete(c.io, a.Job)
		case dispatch.FreeMemory:
			memRelease.soon()
		case dispatch.Log:
			c.cfg.Log.Log(context.Background(), a.Level, a.Msg, a.Args...)
		case dispatch.Metric:
			c.observe(a)
		default:
			panic(fmt.Sprintf("serve: unknown dispatcher action %T", a))
		}
	}
}

func (c *coordinator) observe(a dispatch.Metric) {
	m := c.cfg.Metrics
	switch a.Kind {
	case dispatch.MetricRejected:
		m.rejected.Inc()
	case dispatch.MetricSubmitted:
		m.submitted.Inc()
	case dispatch.MetricFailed:
		m.failed.Inc()
	case dispatch.MetricCompleted:
		m.completed(a.At)
	case dispatch.MetricStepLatency:
		m.stepLatency.WithLabelValues(fmt.Sprint(a.Stage)).Observe(a.V)
	case dispatch.MetricWorkerLost:
		m.workerLost.Inc()
	case dispatch.MetricExpired:
		m.expired.Add(a.V)
	case dispatch.MetricPreparing:
		m.preparing.Set(a.V)
	}
}

// ioLocked returns j's driver state, creating it.
func (c *coordinator) ioLocked(j *dispatch.Job) *jobIO {
	io := c.io[j]
	if io == nil {
		io = &jobIO{}
		c.io[j] = io
	}
	return io
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Submit persists a new job (image bytes and parameters) and queues it. It fails with
// ErrQueueFull when the queue is full.
func (c *coordinator) Submit(p job.Params, img []byte) (job.Status, error) {
	return c.submit(p, job.Input{Image: img})
}

// SubmitPrompt persists a new job of a text-to-video model (its prompt and parameters) and
// queues it, as Submit.
func (c *coordinator) SubmitPrompt(p job.Params, pr family.Prompt) (job.Status, error) {
	return c.submit(p, job.Input{Prompt: &pr})
}

// SubmitInput persists a new job of any inputs (a prompt, an image, a last image: what the
// model takes, checked by the caller) and queues it for in's client (the queue's fair
// share is per client), as Submit.
func (c *coordinator) SubmitInput(p job.Params, in job.Input) (job.Status, error) {
	return c.submit(p, in)
}

func (c *coordinator) submit(p job.Params, in job.Input) (job.Status, error) {
	img, pr := in.Image, in.Prompt
	c.mu.Lock()
	seq, err := c.d.Reserve(in.Client, c.cfg.Now())
	c.flushLocked()
	if err != nil {
		c.mu.Unlock()
		return job.Status{}, err
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()

	now := c.cfg.Now().UTC()
	rec := job.Record{ID: newID(), Seq: seq, State: job.StateQueued, Params: p, Prompt: pr, CreatedAt: now, Rev: 1,
		Image: pr != nil && img != nil, LastImage: in.LastImage != nil, Client: in.Client, InputPixels: in.Pixels}
	if rec.HasImage() {
		err = c.retry("upload of job "+rec.ID, submitAttempts, func() error { return c.cfg.Store.WriteFile(rec.ID, inputFile, img) })
	}
	if err == nil && rec.LastImage {
		err = c.retry("last image of job "+rec.ID, submitAttempts, func() error { return c.cfg.Store.WriteFile(rec.ID, lastInputFile, in.LastImage) })
	}
	if err == nil {
		if err = c.retry("record of job "+rec.ID, submitAttempts, func() error { return c.cfg.Store.Put(rec) }); err != nil {
			c.cfg.Store.RemoveFiles(rec.ID) // no record points at them; best effort
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j, err := c.d.Submitted(rec, img, err, c.cfg.Now())
	c.flushLocked()
	if err != nil {
		return job.Status{}, err
	}
	return c.statusLocked(j), nil
}

// RetryAfter estimates how many seconds until the queue has room.
func (c *coordinator) RetryAfter() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.RetryAfter()
}

// prepare builds a job's initial sample off the lock (actPrepare), until ctx ends (the job
// cancelled, the server closing).
func (c *coordinator) prepare(ctx context.Context, cancel context.CancelFunc, a dispatch.Prepare) {
	defer c.wg.Done()
	defer cancel()
	t0 := time.Now()
	s, err := c.buildSample(ctx, a)
	if err == nil {
		c.cfg.Metrics.prepareSeconds.Observe(time.Since(t0).Seconds())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if io := c.io[a.Job]; io != nil {
		io.cancelPrepare = nil
	}
	c.d.Prepared(a.Job, s, err, c.cfg.Now())
	c.flushLocked()
}

func (c *coordinator) buildSample(ctx context.Context, a dispatch.Prepare) (*dispatch.Sample, error) {
	in := family.Input{Prompt: a.Prompt}
	if a.Prompt == nil || a.Image {
		data := a.Img
		if data == nil {
			var err error
			if data, err = c.cfg.Store.ReadFile(a.ID, inputFile); err != nil {
				c.cfg.Log.Error("read upload", "id", a.ID, "err", err)
				return nil, errors.New("reading the stored upload failed") // no paths for clients
			}
		}
		// The decoded image counts against the decode budget until Prepare is done with it.
		img, release, err := decodeImage(ctx, data, 0)
		if err != nil {
			return nil, err
		}
		defer release()
		in.Image = img
	}
	if a.LastImage {
		data, err := c.cfg.Store.ReadFile(a.ID, lastInputFile)
		if err != nil {
			c.cfg.Log.Error("read upload", "id", a.ID, "err", err)
			return nil, errors.New("reading the stored last image failed")
		}
		img, release, err := decodeImage(context.Background(), data, 0)
		if err != nil {
			return nil, err
		}
		defer release()
		in.LastImage = img
	}
	sc, err := c.cfg.Model.Scheduler(a.Params)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := c.cfg.Model.Prepare(ctx, in, a.Params, sc)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// writeOutput writes a job's final latent (actWriteOutput) before it is marked succeeded.
func (c *coordinator) writeOutput(j *dispatch.Job, latent *tensor.Dense) {
	defer c.wg.Done()
	id := j.ID()
	err := c.retry("output of job "+id, outputAttempts, func() error {
		return c.cfg.Store.WriteFile(id, finalFile, encodeLatent(latent))
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d.OutputWritten(j, latent.Shape, err, c.cfg.Now())
	c.flushLocked()
}

// Cancel asks for job id to stop: a queued job ends at once, a running one at its next step
// boundary. It returns once that decision is durable (the cancelled record, or for a
// running job a record saying a cancel was accepted, which a restart honours), so a nil
// error means the job will not succeed. A job that has ended (cancelled included), or one
// whose last step has already come back, gives ErrFinished (409); any cancel once
// Close has begun ErrClosed (the job stays as the store has it); a store that cannot record
// the cancel within cancelWait ErrStorage (the job is still cancelled in memory).
func (c *coordinator) Cancel(id string) (job.Status, error) {
	c.mu.Lock()
	j, ver, err := c.d.Cancel(id, c.cfg.Now())
	c.flushLocked()
	if err != nil {
		var st job.Status
		if j != nil {
			st = c.statusLocked(j)
		}
		c.mu.Unlock()
		return st, err
	}
	c.mu.Unlock()
	err = c.waitSaved(j, ver, cancelWait)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(j), err
}

// Status returns job id's status.
func (c *coordinator) Status(id string) (job.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.d.Lookup(id)
	if !ok {
		return job.Status{}, job.NotFound(id)
	}
	return c.statusLocked(j), nil
}

// statusLocked is what clients see of j now (dispatcher.status).
func (c *coordinator) statusLocked(j *dispatch.Job) job.Status { return c.d.Status(j, c.cfg.Now()) }

// Subscribe returns a channel that receives a token whenever job id changes, and a function
// to stop. The token channel holds at most one token (changes coalesce).
func (c *coordinator) Subscribe(id string) (<-chan struct{}, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.d.Lookup(id)
	if !ok {
		return nil, nil, job.NotFound(id)
	}
	ch := make(chan struct{}, 1)
	io := c.ioLocked(j)
	if io.subs == nil {
		io.subs = map[chan struct{}]struct{}{}
	}
	io.subs[ch] = struct{}{}
	return ch, func() {
		c.mu.Lock()
		delete(io.subs, ch)
		c.mu.Unlock()
	}, nil
}

// Counts returns the number of jobs in each state and the queue depth.
func (c *coordinator) Counts() (map[job.State]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Counts()
}

// Ready reports whether every rank that connects has joined.
func (c *coordinator) Ready() (joined, want int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Workers(), c.cfg.stages()
}

// waitReady returns once every rank has joined, or when ctx ends (its error).
func (c *coordinator) waitReady(ctx context.Context) error {
	for {
		c.mu.Lock()
		ready, ch := c.d.Workers() == c.cfg.stages(), c.joined
		c.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// connected reports whether rank has a live connection.
func (c *coordinator) connected(rank int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Connected(rank) || c.unitConnectedLocked(rank)
}

// Close stops scheduling, closes the worker connections and waits until nothing can write
// to the store any more: the read loops (a result already received is still handled: a
// job whose last step came back is written as succeeded), the output and record writes
// they start, submissions being persisted, prepares and sweeps. Jobs still running stay
// queued in the store and resume on the next start. The caller may close the store after.
func (c *coordinator) Close() {
	c.mu.Lock()
	if !c.d.Closed() {
		close(c.closing)
	}
	c.cancel() // prepares in flight stop at their next check
	c.d.Close()
	ws := make([]*workerConn, 0, len(c.conns))
	for _, w := range c.conns {
		ws = append(ws, w)
	}
	var stores []*comm.Store
	for _, u := range c.units {
		for _, w := range u.conns {
			ws = append(ws, w)
		}
		if u.store != nil {
			stores = append(stores, u.store)
			u.store = nil
		}
	}
	c.mu.Unlock()
	for _, st := range stores {
		st.Close()
	}
	for _, w := range ws {
		w.close()
	}
	if h := c.hooks.draining; h != nil {
		h()
	}
	c.wg.Wait()
}

// latentShape returns the final latent shape of a succeeded job.
func (c *coordinator) latentShape(id string) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.d.Lookup(id)
	if !ok {
		return nil, job.NotFound(id)
	}
	rec, _ := c.d.Record(j)
	if rec.State != job.StateSucceeded || len(rec.LatentShape) == 0 {
		return nil, fmt.Errorf("%w: job %s is %s", job.ErrNotReady, id, rec.State)
	}
	return append([]int(nil), rec.LatentShape...), nil
}

// watchStalls feeds the dispatcher's stall watchdog (checkStalls) a tick every second (or
// half the stall timeout) until done.
func (c *coordinator) watchStalls(done <-chan struct{}) {
	if c.cfg.StallTimeout <= 0 {
		return
	}
	t := time.NewTicker(min(time.Second, c.cfg.StallTimeout/2))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		c.d.CheckStalls(c.cfg.Now())
		c.flushLocked()
		c.mu.Unlock()
	}
}
