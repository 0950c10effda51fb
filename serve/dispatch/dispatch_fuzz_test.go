package dispatch

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// FuzzDispatcher drives the dispatcher with event sequences from the fuzzer, performing
// its actions the way the Coordinator does (prepares, writes and worker replies arrive
// later, in any order), checks its invariants after every event, and then lets every
// pending piece of I/O finish: each job must end (none is silently lost), and every end
// must be reported only once its record has landed.
func FuzzDispatcher(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 2, 4, 4, 5, 5, 6, 7})
	f.Add([]byte{0, 10, 0, 1, 11, 2, 3, 4, 12, 5, 6, 8, 9, 4, 4, 4})
	f.Add([]byte{2, 2, 0, 0, 0, 1, 1, 1, 4, 3, 4, 13, 14, 4, 5, 6, 7})
	f.Add([]byte{3, 2, 0, 2, 1, 2, 2, 0, 0, 0, 1, 1, 1, 4, 3, 1, 4, 5, 4, 6, 7})
	f.Fuzz(func(t *testing.T, script []byte) {
		lim := Limits{MaxBatch: 2, MaxQueue: 4, MaxRunning: 3, Depth: 2, MaxAttempts: 3, StallTimeout: 10 * time.Second}
		if len(script) > 0 && script[0]%2 == 1 {
			// Two data-parallel replicas: ranks 0 and 2 are one's stages, rank 1 the other.
			lim.Replicas = [][]int{{0, 2}, {1}}
		}
		s := newSim(t, lim)
		for i, b := range script {
			if i+1 < len(script) {
				s.event(b, script[i+1])
			} else {
				s.event(b, 0)
			}
			s.check()
		}
		s.drain()
	})
}

// sim is a driver of the dispatcher with I/O that completes when the script says.
type sim struct {
	t        *testing.T
	d        *Dispatcher
	now      time.Time
	ids      int
	ranks    map[int]*Worker
	prepares []*Job
	outputs  []*Job
	persists []*Job
	cancels  map[int64]map[int]bool // batch -> rows the worker was asked to drop
	closed   map[*Worker]bool       // connections whose loss was reported
}

func newSim(t *testing.T, lim Limits) *sim {
	return &sim{t: t, d: New(lim), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		ranks: map[int]*Worker{}, cancels: map[int64]map[int]bool{}, closed: map[*Worker]bool{}}
}

// perform takes the dispatcher's actions as the Coordinator would.
func (s *sim) perform() {
	for _, a := range s.d.Take() {
		switch a := a.(type) {
		case Prepare:
			s.prepares = append(s.prepares, a.Job)
		case WriteOutput:
			s.outputs = append(s.outputs, a.Job)
		case Persist:
			s.persists = append(s.persists, a.Job)
		case CancelRow:
			if s.cancels[a.Batch] == nil {
				s.cancels[a.Batch] = map[int]bool{}
			}
			s.cancels[a.Batch][a.Row] = true
		case CloseWorker:
			// The connection's read loop reports the loss, once.
			if s.closed[a.Worker] {
				continue
			}
			s.closed[a.Worker] = true
			if s.ranks[a.Worker.rank] == a.Worker {
				delete(s.ranks, a.Worker.rank)
			}
			s.d.Lost(a.Worker, errors.New("closed"), s.now)
			s.perform()
		}
	}
}

func pick[T any](xs []T, n byte) (T, []T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, xs, false
	}
	i := int(n) % len(xs)
	x := xs[i]
	return x, slices.Delete(xs, i, i+1), true
}

// batches lists the outstanding batches of the live ranks, in a fixed order.
func (s *sim) batches() []*batch {
	var out []*batch
	for _, r := range s.d.liveRanks() {
		w := s.d.workers[r]
		ids := make([]int64, 0, len(w.outstanding))
		for id := range w.outstanding {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			out = append(out, w.outstanding[id])
		}
	}
	return out
}

func (s *sim) event(op, arg byte) {
	d := s.d
	switch op % 15 {
	case 0: // submit
		client := fmt.Sprint("c", arg%3) // three clients share the queue
		if seq, err := d.Reserve(client, s.now); err == nil {
			s.ids++
			rec := job.Record{ID: fmt.Sprintf("%016x", s.ids), Seq: seq, State: job.StateQueued, CreatedAt: s.now, Client: client,
				InputPixels: int64(arg) * 1000, Params: job.Params{Steps: 1 + int(arg)%5, NumFrames: 1, Height: 8, Width: 8}}
			d.Submitted(rec, nil, nil, s.now)
		}
	case 1: // a prepare finishes
		var j *Job
		var ok bool
		if j, s.prepares, ok = pick(s.prepares, arg); ok {
			if arg%7 == 0 {
				d.Prepared(j, nil, errors.New("bad image"), s.now)
			} else {
				d.Prepared(j, &Sample{Latent: tensor.New(1, 1, 2, 1, 1)}, nil, s.now)
			}
		}
	case 2: // a rank (re)connects
		r := int(arg) % 3
		if w, ok := d.Join(r, r, s.now); ok {
			s.ranks[r] = w
		}
	case 3: // a rank is lost
		if w := s.ranks[int(arg)%3]; w != nil {
			delete(s.ranks, w.rank)
			s.closed[w] = true
			d.Lost(w, errors.New("EOF"), s.now)
		}
	case 4, 5: // a batch comes back (rows dropped as asked, sometimes one missing)
		if b, _, ok := pick(s.batches(), arg); ok {
			s.reply(b, arg)
		}
	case 6: // progress
		if b, _, ok := pick(s.batches(), arg); ok {
			d.Message(b.w, Msg{Op: OpProgress, Batch: b.id, Step: b.start, Compute: 1e-3, HasCompute: true}, s.now)
		}
	case 7: // an output write ends
		var j *Job
		var ok bool
		if j, s.outputs, ok = pick(s.outputs, arg); ok {
			var err error
			if arg%5 == 0 {
				err = errors.New("disk full")
			}
			d.OutputWritten(j, []int{1, 1, 2, 1, 1}, err, s.now)
		}
	case 8: // a record write lands
		var j *Job
		var ok bool
		if j, s.persists, ok = pick(s.persists, arg); ok {
			d.RecordSaved(j, j.recVer, nil)
		}
	case 9: // cancel
		if s.ids > 0 {
			d.Cancel(fmt.Sprintf("%016x", 1+int(arg)%s.ids), s.now)
		}
	case 10: // time passes, the watchdog ticks
		s.now = s.now.Add(time.Duration(arg) * time.Second)
		d.CheckStalls(s.now)
	case 11: // a retention sweep
		d.Expire(s.now, time.Duration(arg)*time.Second)
	case 12: // DELETE's removal
		if s.ids > 0 {
			d.Remove(fmt.Sprintf("%016x", 1+int(arg)%s.ids))
		}
	case 13: // a worker fails a batch
		if b, _, ok := pick(s.batches(), arg); ok {
			d.Message(b.w, Msg{Op: OpFailed, Batch: b.id, Text: "boom"}, s.now)
		}
	case 14: // a worker's protocol error: a batch it does not hold
		if w := s.ranks[int(arg)%3]; w != nil {
			if err := d.Message(w, Msg{Op: OpResult, Batch: 1 << 40}, s.now); err == nil {
				s.t.Fatal("a result for an unknown batch was accepted")
			}
		}
	}
	s.perform()
}

// reply is a worker's answer to b: dropped rows first (as asked), then the result.
func (s *sim) reply(b *batch, arg byte) {
	var rows []int
	for r, it := range b.items {
		if it == nil {
			continue
		}
		if s.cancels[b.id][r] {
			s.d.Message(b.w, Msg{Op: OpDropped, Batch: b.id, Rows: []int{r}}, s.now)
			s.perform()
			continue
		}
		if arg%11 == 3 && len(rows) > 0 {
			continue // a row missing from the result
		}
		rows = append(rows, r)
	}
	delete(s.cancels, b.id)
	if b.w.outstanding[b.id] == nil {
		return
	}
	if len(rows) == 0 {
		s.d.Message(b.w, Msg{Op: OpEmpty, Batch: b.id}, s.now)
		return
	}
	s.d.Message(b.w, Msg{Op: OpResult, Batch: b.id, Item: resultItem(b, rows)}, s.now)
}

// check verifies the dispatcher's invariants.
func (s *sim) check() {
	t, d := s.t, s.d
	t.Helper()
	counts := map[job.State]int{}
	running := 0
	for _, j := range d.jobs {
		counts[j.rec.State]++
		if j.rec.State == job.StateRunning && !j.completing {
			running++
		}
		if j.writes < 0 || j.savedVer > j.recVer {
			t.Fatalf("job %s: writes %d, saved version %d of %d", j.rec.ID, j.writes, j.savedVer, j.recVer)
		}
	}
	for st, n := range d.counts {
		if counts[st] != n {
			t.Fatalf("counts[%s] = %d, jobs in that state %d", st, n, counts[st])
		}
	}
	if running != d.running || d.running > d.lim.MaxRunning {
		t.Fatalf("running = %d, running jobs %d, max %d", d.running, running, d.lim.MaxRunning)
	}
	byClient := map[string]int{}
	for i, j := range d.queue {
		if j.rec.State != job.StateQueued || (i > 0 && d.queue[i-1].rec.Seq >= j.rec.Seq) {
			t.Fatalf("queue[%d]: job %s %s out of order or not queued", i, j.rec.ID, j.rec.State)
		}
		byClient[j.rec.Client]++
	}
	if len(d.queue) > 2*d.lim.MaxQueue {
		t.Fatalf("%d jobs queued, more than twice MaxQueue %d", len(d.queue), d.lim.MaxQueue)
	}
	if d.reserving == 0 && !maps.Equal(byClient, d.queuedBy) {
		t.Fatalf("queued by client %v, counted %v", byClient, d.queuedBy)
	}
	preparing := 0
	for _, j := range d.jobs {
		if j.preparing {
			preparing++
		}
	}
	if preparing != d.preparing || d.preparing > d.lim.MaxPrepares {
		t.Fatalf("preparing = %d, jobs preparing %d, max %d", d.preparing, preparing, d.lim.MaxPrepares)
	}
	where := map[*item]string{}
	for i, it := range d.ready {
		if it.batch != nil || it.job.it != it || it.job.rec.State != job.StateRunning || (i > 0 && d.ready[i-1].job.rec.Seq >= it.job.rec.Seq) {
			t.Fatalf("ready[%d]: job %s is not a waiting running sample in order", i, it.job.rec.ID)
		}
		where[it] = "ready"
	}
	for r, w := range d.workers {
		if len(w.outstanding) > d.lim.Depth {
			t.Fatalf("rank %d holds %d batches, depth %d", r, len(w.outstanding), d.lim.Depth)
		}
		for _, b := range w.outstanding {
			for _, it := range b.items {
				if it == nil {
					continue
				}
				if it.batch != b || it.job.it != it || where[it] != "" {
					t.Fatalf("job %s's sample is in batch %d and %q", it.job.rec.ID, b.id, where[it])
				}
				where[it] = "batch"
			}
		}
	}
	for _, j := range d.jobs {
		st := d.Status(j, s.now)
		if st.State.Final() && j.savedVer < j.recVer && !j.endSaved {
			t.Fatalf("job %s reported %s before its record landed", j.rec.ID, st.State)
		}
	}
}

// drain connects every rank and completes all pending I/O and work; every job must end.
func (s *sim) drain() {
	for r := range 3 {
		if s.ranks[r] == nil {
			if w, ok := s.d.Join(r, r, s.now); ok {
				s.ranks[r] = w
			}
			s.perform()
		}
	}
	for i := 0; i < 10000; i++ {
		switch {
		case len(s.prepares) > 0:
			s.event(1, 1)
		case len(s.outputs) > 0:
			s.event(7, 1)
		case len(s.batches()) > 0:
			s.event(4, 1)
		case len(s.persists) > 0:
			s.event(8, 0)
		default:
			for _, j := range s.d.jobs {
				if !j.rec.State.Final() || !s.d.Status(j, s.now).State.Final() {
					s.t.Fatalf("job %s never ended: %s (shown %s)", j.rec.ID, j.rec.State, s.d.Status(j, s.now).State)
				}
			}
			return
		}
		s.check()
	}
	s.t.Fatal("the dispatcher did not settle")
}
