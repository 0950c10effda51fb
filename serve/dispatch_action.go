package serve

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// action is what the dispatcher asks its driver (the Coordinator) to do after an event.
// Actions are performed in order, under the coordinator's lock, before the next event; the
// ones that take time (prepare, writes) start a goroutine whose outcome comes back as an
// event. String is a short form for the dispatcher's tests.
type action interface{ String() string }

// actPrepare: build job j's initial sample from its inputs (off the lock), then feed
// dispatcher.prepared.
type actPrepare struct {
	j      *job
	id     string
	params Params
	prompt *family.Prompt
	img    []byte // the upload (nil after a restart: read it from the store)
}

// actRun: send batch b to worker w: run item from its step to end of a steps-step schedule.
type actRun struct {
	w          *rankConn
	b          *batch
	item       *pipeline.Item
	end, steps int
}

// actCancelRow: ask worker w to drop row of batch at its next step boundary.
type actCancelRow struct {
	w     *rankConn
	batch int64
	row   int
}

// actClose: close worker w's connection (lost, replaced or stalled); its read loop then
// reports dispatcher.lost.
type actClose struct{ w *rankConn }

// actKill: end the process of a rank whose connection was lost (the pool restarts it).
type actKill struct{ rank, pid int }

// actPersist: write j's latest record (serialised per job), then feed
// dispatcher.recordSaved.
type actPersist struct {
	j     *job
	state State // the job's state when the write was asked for (for the tests' traces)
}

// actWriteOutput: write j's final latent, then feed dispatcher.outputWritten.
type actWriteOutput struct {
	j      *job
	latent *tensor.Dense
}

// actNotify: j changed; wake its subscribers.
type actNotify struct{ j *job }

// actSaved: a new version of j's record landed; wake the callers waiting for it.
type actSaved struct{ j *job }

// actForget: j left the dispatcher (expired or deleted); drop what the driver keeps for it.
type actForget struct{ j *job }

// actFreeMemory: a job ended; return its memory to the operating system soon.
type actFreeMemory struct{}

// actLog: a line for the server's log.
type actLog struct {
	level slog.Level
	msg   string
	args  []any
}

// metricKind names the counters and histograms the dispatcher reports.
type metricKind int

const (
	metricRejected metricKind = iota
	metricSubmitted
	metricFailed
	metricCompleted
	metricStepLatency
	metricWorkerLost
	metricExpired
)

// actMetric: observe v (or count once) in metric kind; stage labels step latencies, at
// dates completions.
type actMetric struct {
	kind  metricKind
	stage int
	v     float64
	at    time.Time
}

func (a actPrepare) String() string { return "prepare " + a.j.rec.ID }
func (a actRun) String() string {
	s := fmt.Sprintf("run r%d b%d [%d,%d)", a.w.rank, a.b.id, a.b.start, a.end)
	for _, it := range a.b.items {
		s += " " + it.job.rec.ID
	}
	return s
}
func (a actCancelRow) String() string {
	return fmt.Sprintf("cancel r%d b%d row%d", a.w.rank, a.batch, a.row)
}
func (a actClose) String() string       { return fmt.Sprintf("close r%d", a.w.rank) }
func (a actKill) String() string        { return fmt.Sprintf("kill r%d pid%d", a.rank, a.pid) }
func (a actPersist) String() string     { return fmt.Sprintf("persist %s %s", a.j.rec.ID, a.state) }
func (a actWriteOutput) String() string { return "output " + a.j.rec.ID }
func (a actNotify) String() string      { return "notify " + a.j.rec.ID }
func (a actSaved) String() string       { return "saved " + a.j.rec.ID }
func (a actForget) String() string      { return "forget " + a.j.rec.ID }
func (actFreeMemory) String() string    { return "free" }
func (a actLog) String() string         { return "log " + a.msg }
func (a actMetric) String() string      { return fmt.Sprintf("metric %d", a.kind) }
