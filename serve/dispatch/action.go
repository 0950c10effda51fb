package dispatch

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// Action is what the dispatcher asks its driver to do after an event. Actions are
// performed in order, under the driver's lock, before the next event; the ones that take
// time (prepare, writes) start a goroutine whose outcome comes back as an event. String is
// a short form for the dispatcher's tests.
type Action interface{ String() string }

// Prepare: build Job's initial sample from its inputs (off the lock), then feed
// Dispatcher.Prepared.
type Prepare struct {
	Job    *Job
	ID     string
	Params job.Params
	Prompt *family.Prompt
	Img    []byte // the upload (nil after a restart: read it from the store)
	// Image and LastImage say the job has an uploaded image and last image in the store.
	Image, LastImage bool
}

// CancelPrepare: stop building job Job's initial sample (it was cancelled); Prepared
// follows with the prepare's error.
type CancelPrepare struct{ Job *Job }

// Run: send a batch of Rows samples to Worker: run Item from its step to End of a
// Steps-step schedule.
type Run struct {
	Worker     *Worker
	Rows       int
	Item       *pipeline.Item
	End, Steps int
	// Spec is the jobs' run spec (Params.RunSpec), which the worker builds its step runner
	// from with Steps.
	Spec string
	b    *batch
}

// CancelRow: ask Worker to drop Row of Batch at its next step boundary.
type CancelRow struct {
	Worker *Worker
	Batch  int64
	Row    int
}

// CloseWorker: close Worker's connection (lost, replaced or stalled); its read loop then
// reports Dispatcher.Lost.
type CloseWorker struct{ Worker *Worker }

// Kill: end the process of a rank whose connection was lost (the pool restarts it).
type Kill struct{ Rank, Pid int }

// Persist: write Job's latest record (serialised per job), then feed
// Dispatcher.RecordSaved.
type Persist struct {
	Job   *Job
	State job.State // the job's state when the write was asked for (for the tests' traces)
}

// WriteOutput: write Job's final latent, then feed Dispatcher.OutputWritten.
type WriteOutput struct {
	Job    *Job
	Latent *tensor.Dense
}

// Notify: Job changed; wake its subscribers.
type Notify struct{ Job *Job }

// Saved: a new version of Job's record landed; wake the callers waiting for it.
type Saved struct{ Job *Job }

// Forget: Job left the dispatcher (expired or deleted); drop what the driver keeps for it.
type Forget struct{ Job *Job }

// FreeMemory: a job ended; return its memory to the operating system soon.
type FreeMemory struct{}

// Log: a line for the server's log.
type Log struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// MetricKind names the counters and histograms the dispatcher reports.
type MetricKind int

// The metrics of Metric actions.
const (
	MetricRejected MetricKind = iota
	MetricSubmitted
	MetricFailed
	MetricCompleted
	MetricStepLatency
	MetricWorkerLost
	MetricExpired
	// MetricPreparing sets the gauge of prepares in flight to V.
	MetricPreparing
)

// Metric: observe V (or count once) in metric Kind; Stage labels step latencies, At dates
// completions.
type Metric struct {
	Kind  MetricKind
	Stage int
	V     float64
	At    time.Time
}

func (a Prepare) String() string       { return "prepare " + a.Job.rec.ID }
func (a CancelPrepare) String() string { return "cancel-prepare " + a.Job.rec.ID }
func (a Run) String() string {
	s := fmt.Sprintf("run r%d b%d [%d,%d)", a.Worker.rank, a.b.id, a.b.start, a.End)
	for _, it := range a.b.items {
		s += " " + it.job.rec.ID
	}
	return s
}
func (a CancelRow) String() string {
	return fmt.Sprintf("cancel r%d b%d row%d", a.Worker.rank, a.Batch, a.Row)
}
func (a CloseWorker) String() string { return fmt.Sprintf("close r%d", a.Worker.rank) }
func (a Kill) String() string        { return fmt.Sprintf("kill r%d pid%d", a.Rank, a.Pid) }
func (a Persist) String() string     { return fmt.Sprintf("persist %s %s", a.Job.rec.ID, a.State) }
func (a WriteOutput) String() string { return "output " + a.Job.rec.ID }
func (a Notify) String() string      { return "notify " + a.Job.rec.ID }
func (a Saved) String() string       { return "saved " + a.Job.rec.ID }
func (a Forget) String() string      { return "forget " + a.Job.rec.ID }
func (FreeMemory) String() string    { return "free" }
func (a Log) String() string         { return "log " + a.Msg }
func (a Metric) String() string      { return fmt.Sprintf("metric %d", a.Kind) }
