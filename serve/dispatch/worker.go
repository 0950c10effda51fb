package dispatch

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/job"
)

// ErrProtocol marks a worker message that breaks the protocol: the driver closes the
// connection (then Lost).
var ErrProtocol = errors.New("serve: worker protocol error")

// Op is the kind of a worker's message about one of its batches. The values are the wire
// protocol's (package serve/wire), so a message reads the same in both.
type Op int

// The ops of worker messages.
const (
	OpProgress Op = 4 // a step of the batch finished
	OpDropped  Op = 5 // rows were dropped after a cancel
	OpResult   Op = 6 // the batch is back, at its end step
	OpEmpty    Op = 7 // every row was dropped
	OpFailed   Op = 8 // the model failed on the batch
)

// Msg is a decoded message of a worker about one of its batches.
type Msg struct {
	Op    Op
	Batch int64
	Step  int
	// Compute is the step's compute time in seconds (progress; HasCompute says it was sent).
	Compute    float64
	HasCompute bool
	Rows       []int          // dropped
	Text       string         // failed
	Item       *pipeline.Item // result
	ItemErr    error          // a result that did not decode
}

// Join registers a new connection of rank (process pid) and returns it; a connection the
// rank had is dropped (its batches re-planned). Once closed it refuses (nil, false).
func (d *Dispatcher) Join(rank, pid int, now time.Time) (*Worker, bool) {
	if d.closed {
		return nil, false
	}
	w := &Worker{rank: rank, pid: pid, outstanding: map[int64]*batch{}}
	old := d.workers[rank]
	d.workers[rank] = w
	d.log(slog.LevelInfo, "worker joined", "rank", rank, "pid", pid, "live", len(d.workers))
	if old != nil {
		d.drop(old, "replaced by a new connection", now)
	}
	d.dispatch(now)
	return w, true
}

// Lost: w's connection failed with err. If it was its rank's live connection, the rank's
// process is ended (the pool restarts it); its batches are re-planned either way.
func (d *Dispatcher) Lost(w *Worker, err error, now time.Time) {
	if d.workers[w.rank] == w {
		delete(d.workers, w.rank)
		if !d.closed {
			d.log(slog.LevelWarn, "worker lost", "rank", w.rank, "pid", w.pid, "err", err, "live", len(d.workers))
			d.metric(MetricWorkerLost, 0, 1, now)
			d.emit(Kill{Rank: w.rank, Pid: w.pid})
		}
	}
	d.drop(w, fmt.Sprintf("rank %d lost: %v", w.rank, err), now)
}

// drop closes w and re-queues everything it held, then re-plans.
func (d *Dispatcher) drop(w *Worker, why string, now time.Time) {
	d.emit(CloseWorker{w})
	for _, b := range w.batches() {
		delete(w.outstanding, b.id)
		d.requeue(b, why, now)
	}
	d.dispatch(now)
}

// Message handles a worker's message about one of its batches. An error is a protocol
// violation: the driver closes the connection (then lost).
func (d *Dispatcher) Message(w *Worker, m Msg, now time.Time) error {
	b := w.outstanding[m.Batch]
	if b == nil {
		return fmt.Errorf("%w: op %d for unknown batch %d", ErrProtocol, m.Op, m.Batch)
	}
	b.last = now
	switch m.Op {
	case OpProgress:
		if m.HasCompute {
			d.metric(MetricStepLatency, b.stage, m.Compute, now)
			work, _ := batchStallInfo(b)
			d.rate.observe(m.Compute, work)
		}
		for _, it := range b.items {
			if it != nil {
				it.job.stepsDone = m.Step + 1
				d.touch(it.job)
			}
		}
	case OpDropped:
		for _, r := range m.Rows {
			if r >= 0 && r < len(b.items) && b.items[r] != nil {
				it := b.items[r]
				b.items[r] = nil
				it.batch = nil
				d.end(it.job, job.StateCancelled, "", now)
			}
		}
		d.dispatch(now)
	case OpEmpty:
		delete(w.outstanding, b.id)
		d.requeue(b, "worker returned no rows", now)
		d.dispatch(now)
	case OpFailed:
		delete(w.outstanding, b.id)
		for r, it := range b.items {
			if it != nil {
				b.items[r] = nil
				it.batch = nil
				d.end(it.job, job.StateFailed, fmt.Sprintf("rank %d: %s", w.rank, m.Text), now)
			}
		}
		d.dispatch(now)
	case OpResult:
		delete(w.outstanding, b.id)
		return d.result(b, m.Item, m.ItemErr, now)
	default:
		return fmt.Errorf("%w: unexpected op %d from rank %d", ErrProtocol, m.Op, w.rank)
	}
	return nil
}

// result takes batch b's rows back at its end step: each goes on to its next stage, or
// completes, or ends cancelled; a row missing from the result runs the stage again.
func (d *Dispatcher) result(b *batch, pit *pipeline.Item, err error, now time.Time) error {
	if err == nil && pit.Step != b.end {
		err = fmt.Errorf("%w: batch %d came back at step %d, want %d", ErrProtocol, b.id, pit.Step, b.end)
	}
	if err != nil {
		d.requeue(b, err.Error(), now)
		return err
	}
	per := pit.Latent.Len() / max(1, len(pit.Samples))
	for i, s := range pit.Samples {
		r := int(s)
		if r < 0 || r >= len(b.items) || b.items[r] == nil {
			continue
		}
		it := b.items[r]
		b.items[r] = nil
		it.batch = nil
		it.latent = it.latent.Clone()
		copy(it.latent.Data, pit.Latent.Data[i*per:(i+1)*per])
		it.sched = pit.SchedState.Rows(len(pit.Samples), i, i+1)
		if pit.Cache != nil {
			it.cache = pit.Cache.Rows(i, i+1)
		}
		it.step = b.end
		it.attempts = 0
		switch {
		case it.job.cancelReq:
			d.end(it.job, job.StateCancelled, "", now)
		case it.step >= it.job.rec.Params.Steps:
			d.complete(it, now)
		default:
			d.readyItem(it)
		}
	}
	d.requeue(b, "row missing from the result", now)
	d.dispatch(now)
	return nil
}

// CheckStalls is the stall watchdog's tick: a worker holding a batch that has not reported
// a step within its limit (stallLimit) is closed, so the loss path re-plans its work and
// the pool restarts it.
func (d *Dispatcher) CheckStalls(now time.Time) {
	if d.lim.StallTimeout <= 0 {
		return
	}
	for _, r := range d.liveRanks() {
		w := d.workers[r]
		for _, b := range w.batches() {
			work, reruns := batchStallInfo(b)
			perUnit := d.rate.perUnit
			if perUnit == 0 {
				perUnit = d.lim.StepRatePrior // no step measured yet: the model's prediction
			}
			limit := stallLimit(d.lim.StallTimeout, perUnit, work, reruns)
			if now.Sub(b.last) > limit {
				d.log(slog.LevelWarn, "worker stalled", "rank", w.rank, "batch", b.id, "silent", now.Sub(b.last), "limit", limit)
				for _, it := range b.items {
					if it != nil {
						it.stalls++
					}
				}
				d.emit(CloseWorker{w})
				break
			}
		}
	}
}

// batches are the batches w holds, in the order they were sent.
func (w *Worker) batches() []*batch {
	out := make([]*batch, 0, len(w.outstanding))
	for _, b := range w.outstanding {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *batch) int { return cmpSeq(uint64(a.id), uint64(b.id)) })
	return out
}
