package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
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
	Spec      ModelSpec
	Generator Generator
	Store     *Store
	// NProc is the number of worker ranks.
	NProc int
	// MaxBatch bounds the samples of one denoiser call (default 4).
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
	if c.Generator == nil || c.Store == nil {
		return fmt.Errorf("serve: coordinator needs a generator and a store")
	}
	if c.MaxBatch < 1 {
		c.MaxBatch = 4
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

// job is the coordinator's view of one job.
type job struct {
	rec       Record
	img       []byte // the upload, until prepared (loaded from the store after a restart)
	it        *item  // while running
	stepsDone int
	stage     int
	stages    int
	cancelReq bool
	started   time.Time
	created   time.Time
	version   uint64
	subs      map[chan struct{}]struct{}
	// writes counts the record writes of this job still in flight; a job is never
	// expired while one could put its record back.
	writes int
	// wmu serialises the job's record writes; recVer counts the record versions handed to
	// persistLocked, savedVer is the latest one that landed (saved is closed then).
	wmu              sync.Mutex
	recVer, savedVer uint64
	saved            chan struct{}
	// before is the state the job had when it ended; it is reported until the end record
	// has landed (endSaved).
	before   State
	endSaved bool
	// completing: the last step came back and the output is being written; a cancel is too
	// late now (409).
	completing bool
}

// item is a running sample: the coordinator keeps its latest latent (the last one a worker
// handed back) until the next stage's result arrives.
type item struct {
	job      *job
	step     int
	latent   *tensor.Dense // [1, T, C, H, W] at step
	cond     model.Conditioning
	guidance []float32
	// sched is the scheduler's state of the job at step (nil for Euler).
	sched    sched.State
	batch    *batch
	attempts int
	// stalls counts this sample's runs ended by the stall watchdog (each doubles the next
	// run's limit, see stallLimit).
	stalls int
}

func (it *item) key(start, end int) batchKey {
	return batchKey{steps: it.job.rec.Params.Steps, start: start, end: end, shape: it.latent.Shape, guidance: it.guidance}
}

// batch is a group of items sent to one worker for steps [start, end).
type batch struct {
	id         int64
	w          *workerConn
	items      []*item // by row; nil once dropped
	start, end int
	stage      int
	last       time.Time // when the batch was sent or last reported progress
}

// Coordinator owns the jobs, the queue, the workers and the scheduling.
type Coordinator struct {
	cfg CoordConfig

	mu        sync.Mutex
	closed    bool
	jobs      map[string]*job
	queue     []*job  // waiting for a slot, by seq
	ready     []*item // prepared, waiting for a worker, by seq
	running   int     // jobs holding a slot
	reserving int     // submissions being persisted
	nextSeq   uint64
	nextBatch int64
	workers   map[int]*workerConn // live, by rank
	counts    map[State]int
	runEWMA   float64 // ms per job, for Retry-After
	// wg counts everything that may still write to the store: submissions being persisted,
	// prepares, record and output writes, sweeps, and the read loops of worker connections
	// (a result a read loop has received is recorded). It is only incremented under mu
	// while !closed, or by a goroutine it already counts, so Close's Wait sees them all.
	wg sync.WaitGroup
	// unreaped holds expired jobs whose record delete failed; the next sweep retries.
	unreaped []Record
	// onLost is called (under mu) when a worker's connection is lost.
	onLost func(rank, pid int)
	// rate is the measured step time per unit of work (the stall watchdog's yardstick).
	rate stepRate
	// closing is closed by Close: store retries give up.
	closing chan struct{}
	health  storeHealth
	hooks   coordHooks
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
	c := &Coordinator{cfg: cfg, jobs: map[string]*job{}, workers: map[int]*workerConn{}, counts: map[State]int{},
		closing: make(chan struct{})}
	recs, err := cfg.Store.All()
	if err != nil {
		return nil, err
	}
	var resumed []*job
	for _, r := range recs {
		j := &job{rec: r, stage: -1, created: r.CreatedAt, endSaved: r.State.Final()}
		if r.StartedAt != nil {
			j.started = *r.StartedAt // a finished job keeps its timings
		}
		c.nextSeq = max(c.nextSeq, r.Seq)
		c.jobs[r.ID] = j
		c.counts[j.rec.State]++
		if !r.State.Final() {
			// An unfinished job lived through a server restart: count it, and rerun it
			// unless a cancel was accepted for it.
			j.rec.Restarts++
			j.rec.StartedAt, j.started = nil, time.Time{}
			c.setState(j, StateQueued)
			resumed = append(resumed, j)
		}
	}
	if len(c.queue) > 0 {
		cfg.Log.Info("resuming jobs from the store", "queued", len(c.queue), "total", len(recs))
	}
	cfg.Metrics.attach(c)
	c.mu.Lock()
	for _, j := range resumed {
		if j.rec.CancelRequested {
			c.endLocked(j, StateCancelled, "")
			continue
		}
		c.queue = append(c.queue, j)
		c.persistLocked(j) // the restart count
	}
	c.admitLocked()
	c.mu.Unlock()
	return c, nil
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
	if c.closed {
		c.mu.Unlock()
		return Status{}, ErrClosed
	}
	if len(c.queue)+c.reserving >= c.cfg.MaxQueue {
		c.mu.Unlock()
		c.cfg.Metrics.rejected.Inc()
		return Status{}, ErrQueueFull
	}
	c.reserving++
	c.nextSeq++
	seq := c.nextSeq
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()

	now := c.cfg.Now().UTC()
	rec := Record{ID: newID(), Seq: seq, State: StateQueued, Params: p, Prompt: pr, CreatedAt: now}
	var err error
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
	c.reserving--
	if err != nil {
		return Status{}, err
	}
	j := &job{rec: rec, img: img, stage: -1, created: now, recVer: 1, savedVer: 1}
	c.jobs[rec.ID] = j
	c.counts[StateQueued]++
	i := sort.Search(len(c.queue), func(i int) bool { return c.queue[i].rec.Seq > seq })
	c.queue = append(c.queue, nil)
	copy(c.queue[i+1:], c.queue[i:])
	c.queue[i] = j
	c.cfg.Metrics.submitted.Inc()
	c.admitLocked()
	return c.statusLocked(j), nil
}

// RetryAfter estimates how many seconds until the queue has room.
func (c *Coordinator) RetryAfter() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	per := c.runEWMA / 1000 / float64(max(1, c.cfg.MaxRunning))
	s := int(per*float64(len(c.queue)-c.cfg.MaxQueue+1) + 0.999)
	return min(max(s, 1), 60)
}

func (c *Coordinator) setState(j *job, s State) {
	c.counts[j.rec.State]--
	c.counts[s]++
	j.rec.State = s
}

// admitLocked moves queued jobs into free slots, FIFO.
func (c *Coordinator) admitLocked() {
	for len(c.queue) > 0 && c.running < c.cfg.MaxRunning && !c.closed {
		j := c.queue[0]
		c.queue = c.queue[1:]
		c.running++
		c.setState(j, StateRunning)
		j.started = c.cfg.Now()
		t := j.started.UTC()
		j.rec.StartedAt = &t
		c.touchLocked(j)
		c.wg.Add(1)
		go c.prepare(j)
	}
}

// prepare builds the job's initial sample off the lock.
func (c *Coordinator) prepare(j *job) {
	defer c.wg.Done()
	it, err := c.buildItem(j)
	c.mu.Lock()
	defer c.mu.Unlock()
	j.img = nil
	switch {
	case c.closed:
	case err != nil:
		c.endLocked(j, StateFailed, err.Error())
	case j.cancelReq:
		c.endLocked(j, StateCancelled, "")
	default:
		j.it = it
		c.readyLocked(it)
		c.dispatchLocked()
	}
}

func (c *Coordinator) buildItem(j *job) (*item, error) {
	if pr := j.rec.Prompt; pr != nil {
		pg, ok := c.cfg.Generator.(PromptGenerator)
		if !ok || !pg.TextConditioned() {
			return nil, errors.New("the model takes an image, not a prompt")
		}
		sc, err := NewScheduler(c.cfg.Spec, j.rec.Params.Steps)
		if err != nil {
			return nil, err
		}
		s, err := pg.PreparePrompt(context.Background(), *pr, j.rec.Params, sc)
		if err != nil {
			return nil, err
		}
		return &item{job: j, latent: s.Latent, cond: s.Cond, guidance: s.Guidance}, nil
	}
	data := j.img
	if data == nil {
		var err error
		if data, err = c.cfg.Store.ReadFile(j.rec.ID, inputFile); err != nil {
			c.cfg.Log.Error("read upload", "id", j.rec.ID, "err", err)
			return nil, errors.New("reading the stored upload failed") // no paths for clients
		}
	}
	// The decoded image counts against the decode budget until Prepare is done with it.
	img, release, err := decodeImage(context.Background(), data, 0)
	if err != nil {
		return nil, err
	}
	defer release()
	sc, err := NewScheduler(c.cfg.Spec, j.rec.Params.Steps)
	if err != nil {
		return nil, err
	}
	s, err := c.cfg.Generator.Prepare(context.Background(), img, j.rec.Params, sc)
	if err != nil {
		return nil, err
	}
	return &item{job: j, latent: s.Latent, cond: s.Cond, guidance: s.Guidance}, nil
}

// readyLocked queues an item for a worker, in submission order.
func (c *Coordinator) readyLocked(it *item) {
	seq := it.job.rec.Seq
	i := sort.Search(len(c.ready), func(i int) bool { return c.ready[i].job.rec.Seq > seq })
	c.ready = append(c.ready, nil)
	copy(c.ready[i+1:], c.ready[i:])
	c.ready[i] = it
	j := it.job
	j.stepsDone, j.stage = it.step, -1
	c.touchLocked(j)
}

// liveRanksLocked returns the ranks of the connected workers, ascending.
func (c *Coordinator) liveRanksLocked() []int {
	ranks := make([]int, 0, len(c.workers))
	for r := range c.workers {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	return ranks
}

// dispatchLocked hands ready items to workers with room, forming batches.
func (c *Coordinator) dispatchLocked() {
	if c.closed || len(c.ready) == 0 || len(c.workers) == 0 {
		return
	}
	ranks := c.liveRanksLocked()
	plans := map[int][]pipeline.Range{}
	type target struct{ rank, stage, end int }
	where := func(it *item) (target, bool) {
		n := it.job.rec.Params.Steps
		plan, ok := plans[n]
		if !ok {
			var err error
			if plan, err = stagePlan(n, len(ranks)); err != nil {
				return target{}, false
			}
			plans[n] = plan
		}
		st, end := stageOf(plan, it.step)
		if st < 0 {
			return target{}, false
		}
		return target{ranks[st], st, end}, true
	}
	for progress := true; progress; {
		progress = false
		for _, r := range ranks {
			w := c.workers[r]
			if len(w.outstanding) >= c.cfg.Depth {
				continue
			}
			var b *batch
			var key batchKey
			rest := c.ready[:0:0]
			for _, it := range c.ready {
				t, ok := where(it)
				switch {
				case !ok || t.rank != r || (b != nil && len(b.items) >= c.cfg.MaxBatch):
					rest = append(rest, it)
				case b == nil:
					c.nextBatch++
					b = &batch{id: c.nextBatch, w: w, items: []*item{it}, start: it.step, end: t.end, stage: t.stage}
					key = it.key(it.step, t.end)
				case key.compatible(it.key(it.step, t.end)):
					b.items = append(b.items, it)
				default:
					rest = append(rest, it)
				}
			}
			if b == nil {
				continue
			}
			c.ready = rest
			c.sendBatchLocked(w, b, len(ranks))
			progress = true
		}
	}
}

func (c *Coordinator) sendBatchLocked(w *workerConn, b *batch, stages int) {
	first := b.items[0]
	per := first.latent.Len()
	shape := append([]int{len(b.items)}, first.latent.Shape[1:]...)
	pit := &pipeline.Item{Group: b.id, Step: b.start, Latent: tensor.New(shape...), Guidance: first.guidance}
	states := make([]sched.State, len(b.items))
	for r, it := range b.items {
		states[r] = it.sched
		pit.Samples = append(pit.Samples, int64(r))
		copy(pit.Latent.Data[r*per:(r+1)*per], it.latent.Data)
		pit.Cond = append(pit.Cond, it.cond)
		it.batch = b
		it.job.stage = b.stage
		it.job.stages = min(stages, it.job.rec.Params.Steps)
		c.touchLocked(it.job)
	}
	var err error
	if pit.SchedState, err = sched.StackRows(states); err != nil {
		// The items share the scheduler and the step, so their states have the same names.
		c.requeueLocked(b, err.Error())
		return
	}
	b.last = c.cfg.Now()
	w.outstanding[b.id] = b
	c.cfg.Metrics.batchSize.Observe(float64(len(b.items)))
	w.enqueue(wire.Run(pit, b.end, first.job.rec.Params.Steps))
}

// requeueLocked puts the live items of a batch back in the ready list at the latent they
// were sent with (a lost worker's batch restarts from its last hand-off).
func (c *Coordinator) requeueLocked(b *batch, why string) {
	for r, it := range b.items {
		if it == nil {
			continue
		}
		b.items[r] = nil
		it.batch = nil
		if it.job.cancelReq {
			c.endLocked(it.job, StateCancelled, "")
			continue
		}
		it.attempts++
		if it.attempts > c.cfg.MaxAttempts {
			c.endLocked(it.job, StateFailed, fmt.Sprintf("steps [%d,%d) failed %d times: %s", b.start, b.end, it.attempts, why))
			continue
		}
		it.job.rec.Restarts++
		c.readyLocked(it)
	}
}

// endLocked finishes a job that did not succeed (cancelled or failed), freeing its slot, and
// persists the outcome in the background.
func (c *Coordinator) endLocked(j *job, s State, msg string) {
	if j.rec.State.Final() {
		return
	}
	if j.rec.State == StateRunning && !j.completing {
		c.running--
	}
	j.completing = false
	j.before = j.rec.State
	if j.it != nil {
		c.removeReadyLocked(j.it)
		j.it = nil
	}
	c.setState(j, s)
	j.rec.Error = msg
	t := c.cfg.Now().UTC()
	j.rec.FinishedAt = &t
	j.stage = -1
	if s == StateFailed {
		c.cfg.Metrics.failed.Inc()
		c.cfg.Log.Warn("job failed", "id", j.rec.ID, "err", msg)
	}
	c.touchLocked(j)
	c.persistLocked(j)
	c.admitLocked()
	memRelease.soon()
}

func (c *Coordinator) removeReadyLocked(it *item) {
	for i, x := range c.ready {
		if x == it {
			c.ready = append(c.ready[:i], c.ready[i+1:]...)
			return
		}
	}
}

// completeLocked takes a sample that ran its last step: its slot is freed at once and the
// final latent is written before the job is marked succeeded.
func (c *Coordinator) completeLocked(it *item) {
	j := it.job
	j.it = nil
	j.stepsDone = j.rec.Params.Steps
	j.stage = -1
	j.completing = true
	c.running--
	c.admitLocked()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.retry("output of job "+j.rec.ID, outputAttempts, func() error {
			return c.cfg.Store.WriteFile(j.rec.ID, finalFile, EncodeLatent(it.latent))
		})
		c.mu.Lock()
		defer c.mu.Unlock()
		if j.rec.State.Final() {
			return
		}
		if err != nil {
			// The cause (with its paths) is in the log; the job's error is for clients.
			c.endLocked(j, StateFailed, "storing the output failed")
			return
		}
		now := c.cfg.Now()
		t := now.UTC()
		j.completing = false
		j.before = j.rec.State
		c.setState(j, StateSucceeded)
		j.rec.FinishedAt, j.rec.LatentShape = &t, it.latent.Shape
		run := now.Sub(j.started).Seconds() * 1000
		if c.runEWMA == 0 {
			c.runEWMA = run
		}
		c.runEWMA = 0.9*c.runEWMA + 0.1*run
		c.cfg.Metrics.completed(now)
		c.persistLocked(j) // reported succeeded once the record has landed
		memRelease.soon()
	}()
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
	if c.closed {
		c.mu.Unlock()
		return Status{}, ErrClosed
	}
	j, ok := c.lookupLocked(id)
	if !ok {
		c.mu.Unlock()
		return Status{}, notFound(id)
	}
	switch {
	case j.rec.State == StateCancelled:
	case j.rec.State.Final() || j.completing:
		st := c.statusLocked(j)
		state := j.rec.State
		if j.completing {
			state = "finishing"
		}
		c.mu.Unlock()
		return st, fmt.Errorf("%w: %s is %s", ErrFinished, id, state)
	case j.rec.State == StateQueued:
		for i, q := range c.queue {
			if q == j {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				break
			}
		}
		c.endLocked(j, StateCancelled, "")
	case !j.cancelReq:
		j.cancelReq = true
		j.rec.CancelRequested = true
		c.persistLocked(j)
		c.touchLocked(j)
		if it := j.it; it != nil {
			if it.batch == nil {
				c.endLocked(j, StateCancelled, "")
			} else if j.stepsDone < j.rec.Params.Steps {
				b := it.batch
				for r, x := range b.items {
					if x == it {
						b.w.enqueue(cancelMessage(b.id, r))
					}
				}
			}
		}
	}
	ver := j.recVer
	c.mu.Unlock()
	err := c.waitSaved(j, ver, cancelWait)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(j), err
}

// Status returns job id's status.
func (c *Coordinator) Status(id string) (Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.lookupLocked(id)
	if !ok {
		return Status{}, notFound(id)
	}
	return c.statusLocked(j), nil
}

// statusLocked is what clients see of j. An end (succeeded, failed, cancelled) is shown
// only once its record has landed in the store; until then j shows the state it ended
// from, so no client ever sees an end state that a restart could undo.
func (c *Coordinator) statusLocked(j *job) Status {
	rec := j.rec
	if rec.State.Final() && !j.endSaved {
		rec.State, rec.Error, rec.FinishedAt = j.before, "", nil
	}
	st := Status{ID: rec.ID, State: rec.State, Error: rec.Error, Params: rec.Params, CreatedAt: rec.CreatedAt,
		FinishedAt: rec.FinishedAt, Restarts: rec.Restarts, Version: j.version,
		Progress: Progress{Step: j.stepsDone, Steps: rec.Params.Steps, Stage: j.stage, Stages: j.stages}}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	now := c.cfg.Now()
	switch {
	case rec.State == StateQueued:
		st.Timings.QueuedMS = ms(now.Sub(j.created))
	case !j.started.IsZero():
		st.Timings.QueuedMS = ms(j.started.Sub(j.created))
		end := now
		if rec.FinishedAt != nil {
			end = *rec.FinishedAt
		}
		st.Timings.RunMS = ms(end.Sub(j.started))
	}
	if rec.FinishedAt != nil {
		st.Timings.TotalMS = ms(rec.FinishedAt.Sub(rec.CreatedAt))
		if rec.State == StateSucceeded {
			st.Progress.Step = rec.Params.Steps
		}
	}
	return st
}

// Subscribe returns a channel that receives a token whenever job id changes, and a function
// to stop. The token channel holds at most one token (changes coalesce).
func (c *Coordinator) Subscribe(id string) (<-chan struct{}, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.lookupLocked(id)
	if !ok {
		return nil, nil, notFound(id)
	}
	ch := make(chan struct{}, 1)
	if j.subs == nil {
		j.subs = map[chan struct{}]struct{}{}
	}
	j.subs[ch] = struct{}{}
	return ch, func() {
		c.mu.Lock()
		delete(j.subs, ch)
		c.mu.Unlock()
	}, nil
}

func (c *Coordinator) touchLocked(j *job) {
	j.version++
	for ch := range j.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
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
	c.closed = true
	ws := make([]*workerConn, 0, len(c.workers))
	for _, w := range c.workers {
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
	j, ok := c.lookupLocked(id)
	if !ok {
		return nil, notFound(id)
	}
	if j.rec.State != StateSucceeded || len(j.rec.LatentShape) == 0 {
		return nil, fmt.Errorf("%w: job %s is %s", ErrNotReady, id, j.rec.State)
	}
	return append([]int(nil), j.rec.LatentShape...), nil
}

// watchStalls closes the connection of any worker holding a batch that has not reported a
// step for StallTimeout (a hung process still answering pings); the loss path then re-plans
// its work and the pool restarts it.
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
		now := c.cfg.Now()
		for _, w := range c.workers {
			for _, b := range w.outstanding {
				work, reruns := batchStallInfo(b)
				limit := stallLimit(c.cfg.StallTimeout, c.rate.perUnit, work, reruns)
				if now.Sub(b.last) > limit {
					c.cfg.Log.Warn("worker stalled", "rank", w.rank, "batch", b.id, "silent", now.Sub(b.last), "limit", limit)
					for _, it := range b.items {
						if it != nil {
							it.stalls++
						}
					}
					w.close()
					break
				}
			}
		}
		c.mu.Unlock()
	}
}
