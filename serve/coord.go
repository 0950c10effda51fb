package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/tensor"
)

// Coordinator errors.
var (
	// ErrQueueFull: the bounded queue has no room (HTTP 429).
	ErrQueueFull = errors.New("serve: queue full")
	// ErrFinished: the job already ended (HTTP 409 for a cancel or a premature download).
	ErrFinished = errors.New("serve: job already finished")
	// ErrNotReady: the job has no output yet (HTTP 409).
	ErrNotReady = errors.New("serve: job has no output yet")
	// ErrClosed: the coordinator is shutting down (HTTP 503).
	ErrClosed = errors.New("serve: server shutting down")
)

// inputFile and finalFile are the per-job files in the store.
const (
	inputFile = "input.img"
	finalFile = "final.f32"
)

// CoordConfig configures a Coordinator.
type CoordConfig struct {
	// Model prepares jobs (the served model's conditioning role).
	Model generator
	Store *Store
	// NProc is the number of worker ranks.
	NProc int
	// MaxBatch bounds the samples of one denoiser call (default Model.MaxBatch()).
	MaxBatch int
	// MaxQueue bounds the jobs waiting for a slot (default 64); beyond it Submit fails
	// with ErrQueueFull.
	MaxQueue int
	// MaxRunning bounds the jobs holding a pipeline slot (default 2*NProc*MaxBatch).
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
	Metrics      *Metrics
	Log          *slog.Logger
	Now          func() time.Time
}

func (c *CoordConfig) defaults() error {
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
	if c.Depth < 1 {
		c.Depth = 2
	}
	if c.MaxRunning < 1 {
		c.MaxRunning = 2 * c.NProc * c.MaxBatch
	}
	if c.MaxAttempts < 1 {
		c.MaxAttempts = 8
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Coordinator is the dispatcher's driver: it owns the lock, the worker connections, the
// store and the goroutines. Every public method and every I/O outcome is an event fed to
// the dispatcher under mu, followed by the actions it returns (flushLocked).
type Coordinator struct {
	cfg CoordConfig

	mu sync.Mutex
	// dispatcher holds every job and worker decision; guarded by mu.
	*dispatcher
	// conns are the worker connections, by the dispatcher's view of them.
	conns map[*rankConn]*workerConn
	// io is what the driver keeps per job: record-write serialisation, waiters, subscribers.
	io map[*job]*jobIO
	// wg counts everything that may still write to the store: submissions being persisted,
	// prepares, record and output writes, sweeps, and the read loops of worker connections
	// (a result a read loop has received is recorded). It is only incremented under mu
	// while !closed, or by a goroutine it already counts, so Close's Wait sees them all.
	wg sync.WaitGroup
	// unreaped holds expired jobs whose record delete failed; the next sweep retries.
	unreaped []Record
	// onLost is called (under mu) when a worker's connection is lost.
	onLost func(rank, pid int)
	// closing is closed by Close: store retries give up.
	closing chan struct{}
	health  storeHealth
	hooks   coordHooks
}

// jobIO is the driver's per-job state.
type jobIO struct {
	// wmu serialises the job's record writes (each writes the latest record).
	wmu sync.Mutex
	// saved is closed when a new record version lands (waitSaved).
	saved chan struct{}
	subs  map[chan struct{}]struct{}
}

// coordHooks are test seams; a nil hook does nothing. They are set before the coordinator
// runs.
type coordHooks struct {
	// received runs in a worker's read loop for each message, before it is handled.
	received func(m comm.Message)
	// draining runs in Close once no new work can start, before it waits for the read
	// loops and the store writes.
	draining func()
}

// NewCoordinator loads the store: finished jobs stay downloadable, queued and running ones
// are queued again (from step 0: a job's result does not depend on where it restarts).
func NewCoordinator(cfg CoordConfig) (*Coordinator, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := newDispatcher(dispatchLimits{MaxBatch: cfg.MaxBatch, MaxQueue: cfg.MaxQueue, MaxRunning: cfg.MaxRunning,
		Depth: cfg.Depth, MaxAttempts: cfg.MaxAttempts, StallTimeout: cfg.StallTimeout})
	c := &Coordinator{cfg: cfg, dispatcher: d, conns: map[*rankConn]*workerConn{}, io: map[*job]*jobIO{},
		closing: make(chan struct{})}
	recs, err := cfg.Store.All()
	if err != nil {
		return nil, err
	}
	cfg.Metrics.attach(c)
	c.mu.Lock()
	c.load(recs, cfg.Now())
	c.flushLocked()
	c.mu.Unlock()
	return c, nil
}

// flushLocked performs the dispatcher's pending actions, in order.
func (c *Coordinator) flushLocked() {
	for _, a := range c.take() {
		switch a := a.(type) {
		case actPrepare:
			c.wg.Add(1)
			go c.prepare(a)
		case actRun:
			if w := c.conns[a.w]; w != nil {
				c.cfg.Metrics.batchSize.Observe(float64(len(a.b.items)))
				w.enqueue(wire.Run(a.item, a.end, a.steps))
			}
		case actCancelRow:
			if w := c.conns[a.w]; w != nil {
				w.enqueue(wire.Cancel(a.batch, a.row))
			}
		case actClose:
			if w := c.conns[a.w]; w != nil {
				w.close()
			}
		case actKill:
			if c.onLost != nil {
				c.onLost(a.rank, a.pid)
			}
		case actPersist:
			c.wg.Add(1)
			go c.writeRecord(a.j, c.ioLocked(a.j))
		case actWriteOutput:
			c.wg.Add(1)
			go c.writeOutput(a.j, a.latent)
		case actNotify:
			if io := c.io[a.j]; io != nil {
				for ch := range io.subs {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		case actSaved:
			if io := c.io[a.j]; io != nil && io.saved != nil {
				close(io.saved)
				io.saved = nil
			}
		case actForget:
			delete(c.io, a.j)
		case actFreeMemory:
			memRelease.soon()
		case actLog:
			c.cfg.Log.Log(context.Background(), a.level, a.msg, a.args...)
		case actMetric:
			c.observe(a)
		default:
			panic(fmt.Sprintf("serve: unknown dispatcher action %T", a))
		}
	}
}

func (c *Coordinator) observe(a actMetric) {
	m := c.cfg.Metrics
	switch a.kind {
	case metricRejected:
		m.rejected.Inc()
	case metricSubmitted:
		m.submitted.Inc()
	case metricFailed:
		m.failed.Inc()
	case metricCompleted:
		m.completed(a.at)
	case metricStepLatency:
		m.stepLatency.WithLabelValues(fmt.Sprint(a.stage)).Observe(a.v)
	case metricWorkerLost:
		m.workerLost.Inc()
	case metricExpired:
		m.expired.Add(a.v)
	}
}

// ioLocked returns j's driver state, creating it.
func (c *Coordinator) ioLocked(j *job) *jobIO {
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
func (c *Coordinator) Submit(p Params, img []byte) (Status, error) { return c.submit(p, img, nil) }

// SubmitPrompt persists a new job of a text-to-video model (its prompt and parameters) and
// queues it, as Submit.
func (c *Coordinator) SubmitPrompt(p Params, pr family.Prompt) (Status, error) {
	return c.submit(p, nil, &pr)
}

func (c *Coordinator) submit(p Params, img []byte, pr *family.Prompt) (Status, error) {
	c.mu.Lock()
	seq, err := c.reserve(c.cfg.Now())
	c.flushLocked()
	if err != nil {
		c.mu.Unlock()
		return Status{}, err
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()

	now := c.cfg.Now().UTC()
	rec := Record{ID: newID(), Seq: seq, State: StateQueued, Params: p, Prompt: pr, CreatedAt: now}
	if pr == nil {
		err = c.retry("upload of job "+rec.ID, submitAttempts, func() error { return c.cfg.Store.WriteFile(rec.ID, inputFile, img) })
	}
	if err == nil {
		if err = c.retry("record of job "+rec.ID, submitAttempts, func() error { return c.cfg.Store.Put(rec) }); err != nil {
			c.cfg.Store.RemoveFiles(rec.ID) // no record points at them; best effort
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j, err := c.submitted(rec, img, err, c.cfg.Now())
	c.flushLocked()
	if err != nil {
		return Status{}, err
	}
	return c.statusLocked(j), nil
}

// RetryAfter estimates how many seconds until the queue has room.
func (c *Coordinator) RetryAfter() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retryAfter()
}

// prepare builds a job's initial sample off the lock (actPrepare).
func (c *Coordinator) prepare(a actPrepare) {
	defer c.wg.Done()
	it, err := c.buildItem(a)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prepared(a.j, it, err, c.cfg.Now())
	c.flushLocked()
}

func (c *Coordinator) buildItem(a actPrepare) (*item, error) {
	in := family.Input{Prompt: a.prompt}
	if a.prompt == nil {
		data := a.img
		if data == nil {
			var err error
			if data, err = c.cfg.Store.ReadFile(a.id, inputFile); err != nil {
				c.cfg.Log.Error("read upload", "id", a.id, "err", err)
				return nil, errors.New("reading the stored upload failed") // no paths for clients
			}
		}
		// The decoded image counts against the decode budget until Prepare is done with it.
		img, release, err := decodeImage(context.Background(), data, 0)
		if err != nil {
			return nil, err
		}
		defer release()
		in.Image = img
	}
	sc, err := c.cfg.Model.Scheduler(a.params.Steps)
	if err != nil {
		return nil, err
	}
	s, err := c.cfg.Model.Prepare(context.Background(), in, a.params, sc)
	if err != nil {
		return nil, err
	}
	return &item{job: a.j, latent: s.Latent, cond: s.Cond, guidance: s.Guidance, windows: s.Windows}, nil
}

// writeOutput writes a job's final latent (actWriteOutput) before it is marked succeeded.
func (c *Coordinator) writeOutput(j *job, latent *tensor.Dense) {
	defer c.wg.Done()
	c.mu.Lock()
	id := j.rec.ID
	c.mu.Unlock()
	err := c.retry("output of job "+id, outputAttempts, func() error {
		return c.cfg.Store.WriteFile(id, finalFile, EncodeLatent(latent))
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outputWritten(j, latent.Shape, err, c.cfg.Now())
	c.flushLocked()
}

// Cancel asks for job id to stop: a queued job ends at once, a running one at its next step
// boundary. It returns once that decision is durable (the cancelled record, or for a
// running job a record saying a cancel was accepted, which a restart honours), so a nil
// error means the job will not succeed. Cancelling a cancelled job is a no-op; a finished
// one, or one whose last step has already come back, gives ErrFinished; any cancel once
// Close has begun ErrClosed (the job stays as the store has it); a store that cannot record
// the cancel within cancelWait ErrStorage (the job is still cancelled in memory).
func (c *Coordinator) Cancel(id string) (Status, error) {
	c.mu.Lock()
	j, ver, err := c.cancel(id, c.cfg.Now())
	c.flushLocked()
	if err != nil {
		var st Status
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
func (c *Coordinator) Status(id string) (Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.lookup(id)
	if !ok {
		return Status{}, notFound(id)
	}
	return c.statusLocked(j), nil
}

// statusLocked is what clients see of j now (dispatcher.status).
func (c *Coordinator) statusLocked(j *job) Status { return c.status(j, c.cfg.Now()) }

// Subscribe returns a channel that receives a token whenever job id changes, and a function
// to stop. The token channel holds at most one token (changes coalesce).
func (c *Coordinator) Subscribe(id string) (<-chan struct{}, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.lookup(id)
	if !ok {
		return nil, nil, notFound(id)
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
func (c *Coordinator) Counts() (map[State]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[State]int, len(c.counts))
	for s, n := range c.counts {
		out[s] = n
	}
	return out, len(c.queue)
}

// Ready reports whether every rank has joined.
func (c *Coordinator) Ready() (joined, want int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.workers), c.cfg.NProc
}

// connected reports whether rank has a live connection.
func (c *Coordinator) connected(rank int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers[rank] != nil
}

// Close stops scheduling, closes the worker connections and waits until nothing can write
// to the store any more: the read loops (a result already received is still handled: a
// job whose last step came back is written as succeeded), the output and record writes
// they start, submissions being persisted, prepares and sweeps. Jobs still running stay
// queued in the store and resume on the next start. The caller may close the store after.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if !c.closed {
		close(c.closing)
	}
	c.close()
	ws := make([]*workerConn, 0, len(c.conns))
	for _, w := range c.conns {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		w.close()
	}
	if h := c.hooks.draining; h != nil {
		h()
	}
	c.wg.Wait()
}

// latentShape returns the final latent shape of a succeeded job.
func (c *Coordinator) latentShape(id string) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.lookup(id)
	if !ok {
		return nil, notFound(id)
	}
	if j.rec.State != StateSucceeded || len(j.rec.LatentShape) == 0 {
		return nil, fmt.Errorf("%w: job %s is %s", ErrNotReady, id, j.rec.State)
	}
	return append([]int(nil), j.rec.LatentShape...), nil
}

// watchStalls feeds the dispatcher's stall watchdog (checkStalls) a tick every second (or
// half the stall timeout) until done.
func (c *Coordinator) watchStalls(done <-chan struct{}) {
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
		c.checkStalls(c.cfg.Now())
		c.flushLocked()
		c.mu.Unlock()
	}
}
