package serve

import "time"

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
	// Version increases with every change (SSE events carry it).
	Version uint64 `json:"version"`
}
