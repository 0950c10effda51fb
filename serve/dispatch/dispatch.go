package dispatch

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// Dispatcher holds every job's lifecycle and every worker decision (see the package doc).
type Dispatcher struct {
	lim       Limits
	closed    bool
	jobs      map[string]*Job
	queue     []*Job  // waiting for a slot, by seq
	ready     []*item // prepared, waiting for a worker, by seq
	running   int     // jobs holding a slot
	reserving int     // submissions being persisted
	nextSeq   uint64
	nextBatch int64
	workers   map[int]*Worker // live, by rank
	counts    map[job.State]int
	runEWMA   float64 // ms per job, for Retry-After
	// rate is the measured step time per unit of work (the stall watchdog's yardstick).
	rate stepRate
	// out collects the actions of the events since the last take.
	out []Action
	// gone remembers the places (seq) of the last jobs forgotten (deleted or expired), in
	// the order they left, so a list that continues after one of them continues from where
	// it stood (Page); at most goneKeep of them.
	gone      map[string]uint64
	goneOrder []string
	// preparing counts the jobs whose initial sample is being built (at most
	// MaxPrepares at once); queuedBy the queued jobs (and reservations) of each client;
	// served the admission number of each client's last admitted job (round robin).
	preparing  int
	queuedBy   map[string]int
	served     map[string]uint64
	admissions uint64
}

// goneKeep bounds how many forgotten jobs' places Page remembers.
const goneKeep = 4096

// Limits are what the dispatcher decides with: batch size, queue and slot bounds, how many
// batches a worker may hold, re-runs before a job fails, the stall watchdog's base time.
type Limits struct {
	MaxBatch, MaxQueue, MaxRunning, Depth, MaxAttempts int
	// MaxPrepares bounds the jobs whose initial sample (decode, resize, conditioning) is
	// built at once, beside the denoising (0: 1).
	MaxPrepares  int
	StallTimeout time.Duration
	// StepRatePrior is the seconds of one unit of step work the watchdog assumes until a
	// step has been measured (0: StallTimeout alone bounds a first step).
	StepRatePrior float64
	// Replicas are the data-parallel pipelines: Replicas[r] lists the ranks of replica r's
	// stages, in stage order (the ranks that connect: one per stage). A job's steps are cut
	// over the live stages of a replica, and each batch goes to the least busy replica
	// whose stage holds its first step; a replica whose rank is lost plans over the stages
	// it has left. nil: one pipeline of every rank that joins, in rank order.
	Replicas [][]int
}

// Job is the dispatcher's view of one job.
type Job struct {
	rec       job.Record
	img       []byte // the upload, until prepared (loaded from the store after a restart)
	it        *item  // while running
	stepsDone int
	stage     int
	stages    int
	cancelReq bool
	started   time.Time
	created   time.Time
	version   uint64
	// writes counts the record writes of this job still in flight; a job is never
	// expired while one could put its record back.
	writes int
	// recVer counts the record versions handed to actPersist, savedVer is the latest one
	// that landed.
	recVer, savedVer uint64
	// before is the state the job had when it ended; it is reported until the end record
	// has landed (endSaved).
	before   job.State
	endSaved bool
	// completing: the last step came back and the output is being written; a cancel is too
	// late now (409).
	completing bool
	// preparing: the job's initial sample is being built (a Prepare in flight).
	preparing bool
}

// item is a running sample: the dispatcher keeps its latest latent (the last one a worker
// handed back) until the next stage's result arrives.
type item struct {
	job      *Job
	step     int
	latent   *tensor.Dense // [1, T, C, H, W] at step
	cond     model.Conditioning
	guidance []float32
	// windows cut a long video into temporal windows (nil: one window).
	windows *pipeline.Windows
	// sched is the scheduler's state of the job at step (nil for Euler).
	sched sched.State
	// cache is the job's step cache at step (nil without one); cacheReuse a reusing
	// call's cost as a fraction of a computing one's (Sample.CacheReuse).
	cache      *pipeline.ItemCache
	cacheReuse float64
	// prepared is when the sample was prepared: its denoising began then.
	prepared time.Time
	batch    *batch
	attempts int
	// stalls counts this sample's runs ended by the stall watchdog (each doubles the next
	// run's limit, see stallLimit).
	stalls int
}

func (it *item) key(start, end int) batchKey {
	return batchKey{steps: it.job.rec.Params.Steps, spec: it.job.rec.Params.RunSpec(), start: start, end: end, shape: it.latent.Shape, guidance: it.guidance, windows: it.windows,
		cache: it.job.rec.Params.Cache}
}

// batch is a group of items sent to one worker for steps [start, end).
type batch struct {
	id         int64
	w          *Worker
	items      []*item // by row; nil once dropped
	start, end int
	stage      int
	last       time.Time // when the batch was sent or last reported progress
}

// Worker is one worker connection as the dispatcher sees it.
type Worker struct {
	rank, pid   int
	outstanding map[int64]*batch
}

func New(lim Limits) *Dispatcher {
	lim.MaxPrepares = max(lim.MaxPrepares, 1)
	return &Dispatcher{lim: lim, jobs: map[string]*Job{}, workers: map[int]*Worker{}, counts: map[job.State]int{},
		queuedBy: map[string]int{}, served: map[string]uint64{}}
}

// Take returns the actions of the events handled since the last call.
func (d *Dispatcher) Take() []Action {
	out := d.out
	d.out = nil
	return out
}

func (d *Dispatcher) emit(a Action) { d.out = append(d.out, a) }

func (d *Dispatcher) log(level slog.Level, msg string, args ...any) {
	d.emit(Log{Level: level, Msg: msg, Args: args})
}

// jobLog logs one line about job j at now: its id, size, steps and timings (queued until
// started; run since started and total since submitted, once started), then more.
func (d *Dispatcher) jobLog(level slog.Level, j *Job, msg string, now time.Time, more ...any) {
	p := j.rec.Params
	args := []any{"id", j.rec.ID, "frames", p.NumFrames, "size", fmt.Sprintf("%dx%d", p.Width, p.Height), "steps", p.Steps}
	ms := func(t time.Duration) int64 { return t.Milliseconds() }
	if j.started.IsZero() {
		args = append(args, "queued_ms", ms(now.Sub(j.created)))
	} else {
		args = append(args, "queued_ms", ms(j.started.Sub(j.created)), "run_ms", ms(now.Sub(j.started)), "total_ms", ms(now.Sub(j.created)))
	}
	if j.rec.Restarts > 0 {
		args = append(args, "restarts", j.rec.Restarts)
	}
	d.log(level, msg, append(args, more...)...)
}

func (d *Dispatcher) metric(kind MetricKind, stage int, v float64, at time.Time) {
	d.emit(Metric{Kind: kind, Stage: stage, V: v, At: at})
}

// Load takes the store's records at start-up: finished jobs stay as they are, queued and
// running ones are queued again from step 0 (a job's result does not depend on where it
// restarts), or end cancelled when a cancel had been accepted for them.
func (d *Dispatcher) Load(recs []job.Record, now time.Time) {
	var resumed []*Job
	for _, r := range recs {
		j := &Job{rec: r, stage: -1, created: r.CreatedAt, endSaved: r.State.Final()}
		if r.StartedAt != nil {
			j.started = *r.StartedAt // a finished job keeps its timings
		}
		d.nextSeq = max(d.nextSeq, r.Seq)
		d.jobs[r.ID] = j
		d.counts[j.rec.State]++
		if !r.State.Final() {
			// An unfinished job lived through a server restart: count it, and rerun it
			// unless a cancel was accepted for it.
			j.rec.Restarts++
			j.rec.StartedAt, j.started = nil, time.Time{}
			d.setState(j, job.StateQueued)
			resumed = append(resumed, j)
		}
	}
	if len(resumed) > 0 {
		d.log(slog.LevelInfo, "resuming jobs from the store", "queued", len(resumed), "total", len(recs))
	}
	slices.SortFunc(resumed, func(a, b *Job) int { return cmpSeq(a.rec.Seq, b.rec.Seq) })
	for _, j := range resumed {
		if j.rec.CancelRequested {
			d.end(j, job.StateCancelled, "", now)
			continue
		}
		d.queue = append(d.queue, j)
		d.queuedBy[j.rec.Client]++
		d.persist(j) // the restart count
	}
	d.admit(now)
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Reserve takes a place in the queue for a submission of client whose files are being
// written and returns its sequence number. The queue is shared fairly: each client may
// hold its share of the MaxQueue places (MaxQueue over the clients with jobs queued, itself
// included, at least one), so a client with nothing queued always has room, and one
// client's burst, refused beyond its share, never refuses another; in all the queue holds
// at most twice MaxQueue. A refusal is ErrQueueFull, saying which.
func (d *Dispatcher) Reserve(client string, now time.Time) (uint64, error) {
	if d.closed {
		return 0, job.ErrClosed
	}
	total, mine, share := len(d.queue)+d.reserving, d.queuedBy[client], d.share(client)
	switch {
	case mine >= share:
		d.metric(MetricRejected, 0, 1, now)
		return 0, fmt.Errorf("%w: your %d queued jobs are your share of the queue (%d places, clients waiting: %d)", job.ErrQueueFull, mine, d.lim.MaxQueue, d.waitingClients(client))
	case total >= 2*d.lim.MaxQueue:
		d.metric(MetricRejected, 0, 1, now)
		return 0, job.ErrQueueFull
	}
	d.reserving++
	d.queuedBy[client]++
	d.nextSeq++
	return d.nextSeq, nil
}

// waitingClients counts the clients with jobs queued, client included.
func (d *Dispatcher) waitingClients(client string) int {
	n := len(d.queuedBy)
	if d.queuedBy[client] == 0 {
		n++
	}
	return n
}

// share is how many queued jobs client may hold: the queue's places over the clients
// waiting, at least one.
func (d *Dispatcher) share(client string) int {
	return max(1, d.lim.MaxQueue/d.waitingClients(client))
}

// unqueue takes one of client's queued jobs (or reservations) off its count.
func (d *Dispatcher) unqueue(client string) {
	if d.queuedBy[client]--; d.queuedBy[client] <= 0 {
		delete(d.queuedBy, client)
	}
}

// Submitted ends a reservation: with err == nil rec (written to the store) joins the queue
// in sequence order, with the upload img.
func (d *Dispatcher) Submitted(rec job.Record, img []byte, err error, now time.Time) (*Job, error) {
	d.reserving--
	if err != nil {
		d.unqueue(rec.Client)
		return nil, err
	}
	j := &Job{rec: rec, img: img, stage: -1, created: rec.CreatedAt, recVer: 1, savedVer: 1}
	d.jobs[rec.ID] = j
	d.counts[job.StateQueued]++
	i := sort.Search(len(d.queue), func(i int) bool { return d.queue[i].rec.Seq > rec.Seq })
	d.queue = slices.Insert(d.queue, i, j)
	d.metric(MetricSubmitted, 0, 1, now)
	d.admit(now)
	return j, nil
}

func (d *Dispatcher) setState(j *Job, s job.State) {
	d.counts[j.rec.State]--
	d.counts[s]++
	j.rec.State = s
}

// touch marks a change of j that its subscribers see.
func (d *Dispatcher) touch(j *Job) {
	j.version++
	d.emit(Notify{j})
}

// persist asks for j's record to be written (the latest at the time the write starts).
func (d *Dispatcher) persist(j *Job) {
	j.writes++
	j.recVer++
	j.rec.Rev++ // the store keeps the newer of two copies
	d.emit(Persist{Job: j, State: j.rec.State})
}

// Record is what a write of j's record starts with: the record and its version.
func (d *Dispatcher) Record(j *Job) (job.Record, uint64) { return j.rec, j.recVer }

// RecordSaved: the write of j's record version ver ended (err: it never landed, the server
// is closing). An end state is reported once its record has landed.
func (d *Dispatcher) RecordSaved(j *Job, ver uint64, err error) {
	j.writes--
	if err != nil {
		return // the server is closing: the store keeps the last record that landed
	}
	if ver > j.savedVer {
		j.savedVer = ver
		if j.rec.State.Final() && !j.endSaved {
			j.endSaved = true
			d.touch(j)
		}
		d.emit(Saved{j})
	}
}

// agingLimit is how long a queued job may wait before it is admitted ahead of its
// client's cheaper ones (the cheapest-prepare-first order never starves a large upload).
const agingLimit = 10 * time.Second

// admit moves queued jobs into free slots while the prepare pool has room, in the
// scheduler's order (next).
func (d *Dispatcher) admit(now time.Time) {
	for len(d.queue) > 0 && d.running < d.lim.MaxRunning && d.preparing < d.lim.MaxPrepares && !d.closed {
		i := d.next(now)
		j := d.queue[i]
		d.queue = slices.Delete(d.queue, i, i+1)
		d.unqueue(j.rec.Client)
		d.admissions++
		d.served[j.rec.Client] = d.admissions
		d.running++
		d.preparing++
		j.preparing = true
		d.setState(j, job.StateRunning)
		j.started = time.Time{} // a requeued job starts again: its queue time is since it was submitted
		d.jobLog(slog.LevelInfo, j, "job started", now)
		j.started = now
		t := now.UTC()
		j.rec.StartedAt = &t
		d.touch(j)
		d.metric(MetricPreparing, 0, float64(d.preparing), now)
		d.emit(Prepare{Job: j, ID: j.rec.ID, Params: j.rec.Params, Prompt: j.rec.Prompt, Img: j.img,
			Image: j.rec.HasImage(), LastImage: j.rec.LastImage})
	}
}

// next picks the queued job to admit: round robin between clients (the client whose last
// admission is the oldest, one never served first), and within a client the job whose
// prepare costs least (its input's pixels and the video's frame size), unless one has
// waited agingLimit, which goes first by submission. Ties go by submission.
func (d *Dispatcher) next(now time.Time) int {
	best := -1
	better := func(a, b *Job) bool { // within one client
		aged := func(j *Job) bool { return now.Sub(j.created) >= agingLimit }
		switch {
		case aged(a) != aged(b):
			return aged(a)
		case aged(a):
			return a.rec.Seq < b.rec.Seq
		case prepareCost(a) != prepareCost(b):
			return prepareCost(a) < prepareCost(b)
		}
		return a.rec.Seq < b.rec.Seq
	}
	heads := map[string]int{} // each client's pick
	for i, j := range d.queue {
		if h, ok := heads[j.rec.Client]; !ok || better(j, d.queue[h]) {
			heads[j.rec.Client] = i
		}
	}
	for c, i := range heads {
		if best < 0 {
			best = i
			continue
		}
		bc := d.queue[best].rec.Client
		if d.served[c] < d.served[bc] || (d.served[c] == d.served[bc] && d.queue[i].rec.Seq < d.queue[best].rec.Seq) {
			best = i
		}
	}
	return best
}

// prepareCost estimates the work of building j's initial sample: the pixels of its input
// image read and of its video's frame written.
func prepareCost(j *Job) int64 {
	return j.rec.InputPixels + int64(j.rec.Params.Width)*int64(j.rec.Params.Height)
}

// Preparing is how many jobs' initial samples are being built.
func (d *Dispatcher) Preparing() int { return d.preparing }

// Prepared: job j's initial sample is built (it), or failed (err). A job cancelled while
// it was prepared ends cancelled whatever the prepare returned (its context was cancelled).
func (d *Dispatcher) Prepared(j *Job, s *Sample, err error, now time.Time) {
	j.img = nil
	if j.preparing {
		j.preparing = false
		d.preparing--
		d.metric(MetricPreparing, 0, float64(d.preparing), now)
	}
	switch {
	case d.closed:
	case j.cancelReq:
		d.end(j, job.StateCancelled, "", now)
	case err != nil:
		d.end(j, job.StateFailed, err.Error(), now)
	default:
		it := &item{job: j, latent: s.Latent, cond: s.Cond, guidance: s.Guidance, windows: s.Windows, cache: s.Cache,
			cacheReuse: s.CacheReuse, prepared: now, sched: s.Sched}
		j.it = it
		d.readyItem(it)
		d.dispatch(now)
		d.admit(now) // the prepare pool has room again
	}
}

// Sample is a job's state at step 0, which the driver builds (Prepare).
type Sample struct {
	// Latent is [1, T, C, H, W], already multiplied by init_noise_sigma.
	Latent *tensor.Dense
	// Cond is the sample's conditioning (computed once, handed along with the latent).
	Cond model.Conditioning
	// Guidance holds per-frame CFG weights [T], or nil for an unguided job.
	Guidance []float32
	// Windows, when set, steps a video longer than the model's native length as
	// overlapping temporal windows (in latent frames).
	Windows *pipeline.Windows
	// Cache is the sample's step cache (nil without one); CacheReuse is a reusing call's
	// cost as a fraction of a computing one's (the family's cost model), for the cache
	// line's estimate of the time saved.
	Cache      *pipeline.ItemCache
	CacheReuse float64
	// Sched is the scheduler's initial state of the sample (the noise key of a scheduler
	// that draws noise; empty otherwise).
	Sched sched.State
}

// readyItem queues an item for a worker, in submission order.
func (d *Dispatcher) readyItem(it *item) {
	seq := it.job.rec.Seq
	i := sort.Search(len(d.ready), func(i int) bool { return d.ready[i].job.rec.Seq > seq })
	d.ready = slices.Insert(d.ready, i, it)
	j := it.job
	j.stepsDone, j.stage = it.step, -1
	d.touch(j)
}

func (d *Dispatcher) removeReady(it *item) {
	if i := slices.Index(d.ready, it); i >= 0 {
		d.ready = slices.Delete(d.ready, i, i+1)
	}
}

// end finishes a job that did not succeed (cancelled or failed), freeing its slot, and
// persists the outcome.
func (d *Dispatcher) end(j *Job, s job.State, msg string, now time.Time) {
	if j.rec.State.Final() {
		return
	}
	if j.rec.State == job.StateRunning && !j.completing {
		d.running--
	}
	j.completing = false
	j.before = j.rec.State
	if j.it != nil {
		d.removeReady(j.it)
		j.it = nil
	}
	d.setState(j, s)
	j.rec.Error = msg
	t := now.UTC()
	j.rec.FinishedAt = &t
	j.stage = -1
	switch s {
	case job.StateFailed:
		d.metric(MetricFailed, 0, 1, now)
		d.jobLog(slog.LevelWarn, j, "job failed", now, "err", msg)
	case job.StateCancelled:
		d.jobLog(slog.LevelInfo, j, "job cancelled", now)
	}
	d.touch(j)
	d.persist(j)
	d.admit(now)
	d.emit(FreeMemory{})
}

// complete takes a sample that ran its last step: its slot is freed at once and the final
// latent is written before the job is marked succeeded (outputWritten).
func (d *Dispatcher) complete(it *item, now time.Time) {
	j := it.job
	j.it = nil
	j.stepsDone = j.rec.Params.Steps
	j.stage = -1
	j.completing = true
	if it.cache != nil {
		sum := pipeline.Summarize(it.cache.Rule, it.cache.Log[0])
		// The one line the web page's job card and the OpenAI object's metadata show:
		// the denoising time is the sample's, from prepared to its last step (a requeued
		// sample's includes its runs before).
		sum.Summary = pipeline.CacheOutcome{Samples: []pipeline.CacheSummary{sum}, Steps: j.rec.Params.Steps,
			DenoiseMS: float64(now.Sub(it.prepared).Microseconds()) / 1e3, ReuseFraction: it.cacheReuse}.Line()
		j.rec.Cache = &sum
	}
	d.running--
	d.admit(now)
	d.emit(WriteOutput{Job: j, Latent: it.latent})
}

// OutputWritten: the final latent of j (of shape) was written, or could not be (err).
func (d *Dispatcher) OutputWritten(j *Job, shape []int, err error, now time.Time) {
	if j.rec.State.Final() {
		return
	}
	if err != nil {
		// The cause (with its paths) is in the log; the job's error is for clients.
		d.end(j, job.StateFailed, "storing the output failed", now)
		return
	}
	t := now.UTC()
	j.completing = false
	j.before = j.rec.State
	d.setState(j, job.StateSucceeded)
	j.rec.FinishedAt, j.rec.LatentShape = &t, shape
	run := now.Sub(j.started).Seconds() * 1000
	if d.runEWMA == 0 {
		d.runEWMA = run
	}
	d.runEWMA = 0.9*d.runEWMA + 0.1*run
	d.metric(MetricCompleted, 0, 1, now)
	d.jobLog(slog.LevelInfo, j, "job succeeded", now)
	d.persist(j) // reported succeeded once the record has landed
	d.emit(FreeMemory{})
}

// Cancel asks for job id to stop: a queued job ends at once, a running one at its next step
// boundary. It returns the record version the caller must see land before it reports the
// cancel (see Coordinator.Cancel); a finished job, or one whose last step has already come
// back, is ErrFinished (with the job).
func (d *Dispatcher) Cancel(id string, now time.Time) (*Job, uint64, error) {
	if d.closed {
		return nil, 0, job.ErrClosed
	}
	j, ok := d.Lookup(id)
	if !ok {
		return nil, 0, job.NotFound(id)
	}
	switch {
	case j.rec.State.Final() || j.completing:
		state := j.rec.State
		if j.completing {
			state = "finishing"
		}
		return j, 0, fmt.Errorf("%w: %s is %s", job.ErrFinished, id, state)
	case j.rec.State == job.StateQueued:
		if i := slices.Index(d.queue, j); i >= 0 {
			d.queue = slices.Delete(d.queue, i, i+1)
			d.unqueue(j.rec.Client)
		}
		d.end(j, job.StateCancelled, "", now)
	case !j.cancelReq:
		j.cancelReq = true
		j.rec.CancelRequested = true
		d.persist(j)
		d.touch(j)
		if j.preparing {
			d.emit(CancelPrepare{Job: j}) // the prepare stops at once and ends the job
		}
		if it := j.it; it != nil {
			if it.batch == nil {
				d.end(j, job.StateCancelled, "", now)
			} else if j.stepsDone < j.rec.Params.Steps {
				b := it.batch
				for r, x := range b.items {
					if x == it {
						d.emit(CancelRow{Worker: b.w, Batch: b.id, Row: r})
					}
				}
			}
		}
	}
	return j, j.recVer, nil
}

// Lookup finds job id, checking its form first.
func (d *Dispatcher) Lookup(id string) (*Job, bool) {
	if !job.ValidID(id) {
		return nil, false
	}
	j, ok := d.jobs[id]
	return j, ok
}

// Status is what clients see of j at now. An end (succeeded, failed, cancelled) is shown
// only once its record has landed in the store; until then j shows the state it ended
// from, so no client ever sees an end state that a restart could undo.
func (d *Dispatcher) Status(j *Job, now time.Time) job.Status {
	rec := j.rec
	if rec.State.Final() && !j.endSaved {
		rec.State, rec.Error, rec.FinishedAt = j.before, "", nil
	}
	st := job.Status{ID: rec.ID, State: rec.State, Error: rec.Error, Params: rec.Params, CreatedAt: rec.CreatedAt,
		FinishedAt: rec.FinishedAt, Restarts: rec.Restarts, Version: j.version, Cache: rec.Cache,
		Progress:        job.Progress{Step: j.stepsDone, Steps: rec.Params.Steps, Stage: j.stage, Stages: j.stages},
		CancelRequested: j.cancelReq && !rec.State.Final()}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	switch {
	case rec.State == job.StateQueued:
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
		if rec.State == job.StateSucceeded {
			st.Progress.Step = rec.Params.Steps
		}
	}
	return st
}

// RetryAfter estimates how many seconds until the queue has room.
func (d *Dispatcher) RetryAfter() int {
	per := d.runEWMA / 1000 / float64(max(1, d.lim.MaxRunning))
	s := int(per*float64(len(d.queue)-d.lim.MaxQueue+1) + 0.999)
	return min(max(s, 1), 60)
}

// Expire removes the jobs ExpiredJobs picks at now among the finished jobs with no record
// write in flight, and returns their records (the driver then deletes their files and
// records).
func (d *Dispatcher) Expire(now time.Time, keep time.Duration) ([]job.Record, error) {
	if d.closed {
		return nil, job.ErrClosed
	}
	var cands []job.Record
	for _, j := range d.jobs {
		if j.rec.State.Final() && j.writes == 0 {
			cands = append(cands, j.rec)
		}
	}
	dead := job.ExpiredJobs(cands, now, keep)
	slices.SortFunc(dead, func(a, b job.Record) int { return cmpSeq(a.Seq, b.Seq) })
	for _, r := range dead {
		d.forget(d.jobs[r.ID])
	}
	if len(dead) > 0 {
		d.metric(MetricExpired, 0, float64(len(dead)), now)
		d.log(slog.LevelInfo, "expired finished jobs", "deleted", len(dead), "keep", keep)
	}
	return dead, nil
}

// Remove takes job id out if it has ended and its record is written (done), for DELETE.
func (d *Dispatcher) Remove(id string) (rec job.Record, done bool, err error) {
	if d.closed {
		return job.Record{}, false, job.ErrClosed
	}
	j, ok := d.jobs[id]
	if !ok {
		return job.Record{}, false, fmt.Errorf("%w: %q", job.ErrNotFound, id)
	}
	if !j.rec.State.Final() || j.writes != 0 {
		return job.Record{}, false, nil
	}
	d.forget(j)
	return j.rec, true, nil
}

// forget drops j from memory: from then on it is unknown (but for its place in the list).
func (d *Dispatcher) forget(j *Job) {
	delete(d.jobs, j.rec.ID)
	if d.gone == nil {
		d.gone = map[string]uint64{}
	}
	if len(d.goneOrder) >= goneKeep {
		delete(d.gone, d.goneOrder[0])
		d.goneOrder = d.goneOrder[1:]
	}
	d.gone[j.rec.ID] = j.rec.Seq
	d.goneOrder = append(d.goneOrder, j.rec.ID)
	d.counts[j.rec.State]--
	d.touch(j) // event streams wake up, find no job and end
	d.emit(Forget{j})
}

// Close stops all scheduling: nothing is admitted or dispatched any more.
func (d *Dispatcher) Close() { d.closed = true }

// dispatch hands ready items to workers with room, forming batches: an item goes to the
// least busy of the workers that run its next step (one per replica; ties: the lowest
// rank), among those with room.
func (d *Dispatcher) dispatch(now time.Time) {
	if d.closed || len(d.ready) == 0 || len(d.workers) == 0 {
		return
	}
	pipes := d.pipelines()
	plans := map[[2]int][]pipeline.Range{} // by (steps, stages)
	type target struct{ rank, stage, end, stages int }
	where := func(it *item) (target, bool) {
		n := it.job.rec.Params.Steps
		best, found := target{}, false
		for _, pipe := range pipes {
			key := [2]int{n, len(pipe)}
			plan, ok := plans[key]
			if !ok {
				var err error
				if plan, err = stagePlan(n, len(pipe)); err != nil {
					continue
				}
				plans[key] = plan
			}
			st, end := stageOf(plan, it.step)
			if st < 0 {
				continue
			}
			busy := len(d.workers[pipe[st]].outstanding)
			if busy >= d.lim.Depth {
				continue
			}
			if t := (target{pipe[st], st, end, len(plan)}); !found || busy < len(d.workers[best.rank].outstanding) ||
				(busy == len(d.workers[best.rank].outstanding) && t.rank < best.rank) {
				best, found = t, true
			}
		}
		return best, found
	}
	ranks := d.liveRanks()
	for progress := true; progress; {
		progress = false
		for _, r := range ranks {
			w := d.workers[r]
			if len(w.outstanding) >= d.lim.Depth {
				continue
			}
			var b *batch
			var key batchKey
			stages := 0
			rest := d.ready[:0:0]
			for _, it := range d.ready {
				t, ok := where(it)
				switch {
				case !ok || t.rank != r || (b != nil && len(b.items) >= d.lim.MaxBatch):
					rest = append(rest, it)
				case b == nil:
					d.nextBatch++
					b = &batch{id: d.nextBatch, w: w, items: []*item{it}, start: it.step, end: t.end, stage: t.stage}
					key, stages = it.key(it.step, t.end), t.stages
				case key.compatible(it.key(it.step, t.end)):
					b.items = append(b.items, it)
				default:
					rest = append(rest, it)
				}
			}
			if b == nil {
				continue
			}
			d.ready = rest
			d.send(w, b, stages, now)
			progress = true
		}
	}
}

// pipelines returns the live ranks of each replica in stage order, leaving out replicas
// with none (Limits.Replicas; nil: one pipeline of every live rank).
func (d *Dispatcher) pipelines() [][]int {
	if d.lim.Replicas == nil {
		return [][]int{d.liveRanks()}
	}
	var out [][]int
	for _, rep := range d.lim.Replicas {
		var live []int
		for _, r := range rep {
			if d.workers[r] != nil {
				live = append(live, r)
			}
		}
		if len(live) > 0 {
			out = append(out, live)
		}
	}
	return out
}

// liveRanks returns the ranks of the connected workers, ascending.
func (d *Dispatcher) liveRanks() []int {
	ranks := make([]int, 0, len(d.workers))
	for r := range d.workers {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	return ranks
}

func (d *Dispatcher) send(w *Worker, b *batch, stages int, now time.Time) {
	first := b.items[0]
	per := first.latent.Len()
	shape := append([]int{len(b.items)}, first.latent.Shape[1:]...)
	pit := &pipeline.Item{Group: b.id, Step: b.start, Latent: tensor.New(shape...), Guidance: first.guidance, Windows: first.windows}
	states := make([]sched.State, len(b.items))
	caches := make([]*pipeline.ItemCache, len(b.items))
	ones := make([]int, len(b.items))
	for r, it := range b.items {
		states[r] = it.sched
		caches[r], ones[r] = it.cache, 1
		pit.Samples = append(pit.Samples, int64(r))
		copy(pit.Latent.Data[r*per:(r+1)*per], it.latent.Data)
		pit.Cond = append(pit.Cond, it.cond)
		it.batch = b
		it.job.stage = b.stage
		it.job.stages = min(stages, it.job.rec.Params.Steps)
		d.touch(it.job)
	}
	var err error
	if pit.SchedState, err = sched.StackRows(states); err != nil {
		// The items share the scheduler and the step, so their states have the same names.
		d.requeue(b, err.Error(), now)
		return
	}
	if pit.Cache, err = pipeline.StackCaches(caches, ones); err != nil {
		// The items share one cache rule (batchKey), so their caches stack.
		d.requeue(b, err.Error(), now)
		return
	}
	b.last = now
	w.outstanding[b.id] = b
	d.emit(Run{Worker: w, Rows: len(b.items), Item: pit, End: b.end, Steps: first.job.rec.Params.Steps, Spec: first.job.rec.Params.RunSpec(), b: b})
}

// requeue puts the live items of a batch back in the ready list at the latent they were
// sent with (a lost worker's batch restarts from its last hand-off).
func (d *Dispatcher) requeue(b *batch, why string, now time.Time) {
	for r, it := range b.items {
		if it == nil {
			continue
		}
		b.items[r] = nil
		it.batch = nil
		if it.job.cancelReq {
			d.end(it.job, job.StateCancelled, "", now)
			continue
		}
		it.attempts++
		if it.attempts > d.lim.MaxAttempts {
			d.end(it.job, job.StateFailed, fmt.Sprintf("steps [%d,%d) failed %d times: %s", b.start, b.end, it.attempts, why), now)
			continue
		}
		it.job.rec.Restarts++
		d.readyItem(it)
	}
}

// ID is the job's id.
func (j *Job) ID() string { return j.rec.ID }

// SavedVersion is the latest version of the job's record that landed in the store.
func (j *Job) SavedVersion() uint64 { return j.savedVer }

// Known reports whether the dispatcher holds job id.
func (d *Dispatcher) Known(id string) bool {
	_, ok := d.jobs[id]
	return ok
}

// Closed reports whether Close was called.
func (d *Dispatcher) Closed() bool { return d.closed }

// Counts returns the number of jobs in each state and the queue's length.
func (d *Dispatcher) Counts() (map[job.State]int, int) {
	out := make(map[job.State]int, len(d.counts))
	for s, n := range d.counts {
		out[s] = n
	}
	return out, len(d.queue)
}

// Workers is the number of live worker connections.
func (d *Dispatcher) Workers() int { return len(d.workers) }

// Connected reports whether rank has a live connection.
func (d *Dispatcher) Connected(rank int) bool { return d.workers[rank] != nil }

// Page returns the status at now of up to limit jobs in submission order (newest first
// when desc) that come after the job with id after ("" starts at the beginning), and
// whether more follow. An after id of a job deleted or expired since (one of the last
// goneKeep) continues from where that job stood; an id the dispatcher never held (or
// forgot before a restart) is job.ErrNotFound.
func (d *Dispatcher) Page(after string, limit int, desc bool, now time.Time) ([]job.Status, bool, error) {
	var from uint64
	if after != "" {
		j, ok := d.Lookup(after)
		switch {
		case ok:
			from = j.rec.Seq
		case d.gone[after] != 0:
			// A job deleted since the client read it: the list goes on from its place.
			from = d.gone[after]
		default:
			return nil, false, job.NotFound(after)
		}
	}
	all := make([]*Job, 0, len(d.jobs))
	for _, j := range d.jobs {
		if after == "" || (desc && j.rec.Seq < from) || (!desc && j.rec.Seq > from) {
			all = append(all, j)
		}
	}
	slices.SortFunc(all, func(a, b *Job) int {
		if desc {
			return cmpSeq(b.rec.Seq, a.rec.Seq)
		}
		return cmpSeq(a.rec.Seq, b.rec.Seq)
	})
	more := len(all) > limit
	if more {
		all = all[:limit]
	}
	out := make([]job.Status, len(all))
	for i, j := range all {
		out[i] = d.Status(j, now)
	}
	return out, more, nil
}
