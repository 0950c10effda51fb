package job

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
)

// ErrNotFound is returned for a job id the server does not know.
var ErrNotFound = errors.New("serve: no such job")

// ErrNoWorker is returned for a worker rank the server does not have (404, as an unknown
// job).
var ErrNoWorker = errors.New("serve: no such worker rank")

// idPattern is what a job id looks like; anything else never reaches the file system.
var idPattern = regexp.MustCompile(`^[0-9a-f]{16,64}$`)

// State is a job's lifecycle state.
type State string

// Job states. Queued and running jobs resume after a restart; the others are final.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// Final reports whether s is a terminal state.
func (s State) Final() bool { return s == StateSucceeded || s == StateFailed || s == StateCancelled }

// Record is the persisted part of a job.
type Record struct {
	ID     string `json:"id"`
	Seq    uint64 `json:"seq"`
	State  State  `json:"state"`
	Params Params `json:"params"`
	// Prompt is a text-to-video job's input (its prompt and negative prompt); an
	// image-conditioned job's input is its uploaded image (input.img). A job of a model
	// that takes both (Wan image-to-video) has a Prompt and Image set, and LastImage when
	// it uploaded a last image too (last.img).
	Prompt      *family.Prompt `json:"prompt,omitempty"`
	Image       bool           `json:"image,omitempty"`
	LastImage   bool           `json:"last_image,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
	StartedAt   *time.Time     `json:"started_at,omitempty"`
	FinishedAt  *time.Time     `json:"finished_at,omitempty"`
	Error       string         `json:"error,omitempty"`
	LatentShape []int          `json:"latent_shape,omitempty"`
	// Restarts counts how often the job's work was resumed after a worker loss or a
	// server restart.
	Restarts int `json:"restarts,omitempty"`
	// CancelRequested: DELETE was answered 202 while the job was running; a restart ends
	// it cancelled instead of running it again.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Rev counts the record's writes: of two copies of a record (the store's index and the
	// job's folder), the one with the higher Rev is the newer.
	Rev uint64 `json:"rev,omitempty"`
	// Cache is a cached job's step cache (params cache): which denoiser calls computed.
	Cache *pipeline.CacheSummary `json:"cache,omitempty"`
	// Client is who submitted the job (httpapi.ClientOf: an API key's digest, else an address):
	// the queue's share and round robin are per client.
	Client string `json:"client,omitempty"`
	// InputPixels is the uploaded image's width x height (0 for a prompt): the prepare's
	// cost, which the scheduler orders prepares by.
	InputPixels int64 `json:"input_pixels,omitempty"`
}

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
	// ErrConflict: the request does not fit what the server is doing (HTTP 409): a worker
	// killed while it restarts.
	ErrConflict = errors.New("serve: conflict")
)

// ErrStorage marks a failure to write the data dir (HTTP 503 storage_unavailable, or 507
// insufficient_storage when the disk is full). Clients only ever see a generic message;
// the cause, with its paths, goes to the server's log.
var ErrStorage = errors.New("serve: storage unavailable")

// ValidID reports whether id has the form of a job id: lowercase hex, 16 to 64 characters
// (the ids of this server have 24; the range accepts older data dirs). Anything else is
// answered as an unknown job without being looked up, stored or echoed. ValidID is pure.
func ValidID(id string) bool {
	return len(id) >= 16 && len(id) <= 64 && idPattern.MatchString(id)
}

// NotFound is the error for an unknown job id; the id is quoted only when it is valid, so
// an answer never echoes what a client made up.
func NotFound(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: not a job id", ErrNotFound)
	}
	return fmt.Errorf("%w: %q", ErrNotFound, id)
}

// Progress says where a job is: Step of Steps done, on stage Stage of Stages (-1 when not
// on a worker).
type Progress struct {
	Step   int `json:"step"`
	Steps  int `json:"steps"`
	Stage  int `json:"stage"`
	Stages int `json:"stages"`
}

// Timings are a job's durations in milliseconds: waiting in the queue, running (admission
// to the final latent) and in total; a value is 0 until known.
type Timings struct {
	QueuedMS float64 `json:"queued_ms"`
	RunMS    float64 `json:"run_ms"`
	TotalMS  float64 `json:"total_ms"`
}

// Status is what GET /v1/videos/{id} returns.
type Status struct {
	ID         string     `json:"id"`
	State      State      `json:"state"`
	Progress   Progress   `json:"progress"`
	Timings    Timings    `json:"timings"`
	Error      string     `json:"error,omitempty"`
	Params     Params     `json:"params"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Restarts   int        `json:"restarts,omitempty"`
	// CancelRequested says a cancel was accepted for the running job: it ends cancelled at
	// its worker's next chance (a step boundary, or between the model calls of a step).
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Version increases with every change (SSE events carry it).
	Version uint64 `json:"version"`
	// Cache is a cached job's step cache once it finished: which denoiser calls computed.
	Cache *pipeline.CacheSummary `json:"cache,omitempty"`
}

// DefaultKeepJobs is `vdpp serve --keep-jobs`'s default: a finished job is kept for a
// week. Clients download a video minutes after it is done; a week also covers a client
// that was away over a weekend, and bounds the data dir to about a week of output (an SVD
// job's input, latent, GIF and MP4 are a few MB) and the server's memory to a week of
// records.
const DefaultKeepJobs = 7 * 24 * time.Hour

// ExpiredJobs returns the records of recs that are expired at now when finished jobs are
// kept for keep: succeeded, failed or cancelled, with FinishedAt more than keep before now
// (a finished record without FinishedAt counts from CreatedAt). A queued or running job
// never expires, nor does any job when keep <= 0 (keep forever). ExpiredJobs is pure.
func ExpiredJobs(recs []Record, now time.Time, keep time.Duration) []Record {
	if keep <= 0 {
		return nil
	}
	var out []Record
	for _, r := range recs {
		if !r.State.Final() {
			continue
		}
		end := r.CreatedAt
		if r.FinishedAt != nil {
			end = *r.FinishedAt
		}
		if now.Sub(end) > keep {
			out = append(out, r)
		}
	}
	return out
}

// Input is what a submitted job starts from: an uploaded image (PNG or JPEG bytes) for an
// image-conditioned model, or a prompt for a text-to-video model.
type Input struct {
	Image []byte
	// LastImage is the last frame's image of a first-last-frame model.
	LastImage []byte
	Prompt    *family.Prompt
	// Client is who submits the job (httpapi.ClientOf); Pixels the images' width x height.
	Client string
	Pixels int64
}

// HasImage reports whether the job has an uploaded image (input.img): every job without a
// prompt, and a prompt job that gave one.
func (r Record) HasImage() bool { return r.Prompt == nil || r.Image }
