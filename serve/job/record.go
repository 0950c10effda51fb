package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrBadRecord marks a stored record that cannot be served: unreadable, or not a record
// this server could have written (an unknown state, an id of another form).
var ErrBadRecord = errors.New("serve: unreadable job record")

// maxRecordBytes bounds a stored record (a prompt of a few KB is the largest part).
const maxRecordBytes = 1 << 20

// DecodeRecord reads a stored record: one JSON object with a valid id and a known state
// (anything else wraps ErrBadRecord). Fields a newer server added are ignored. DecodeRecord
// is pure and never panics.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) > maxRecordBytes {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrBadRecord, len(b))
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, fmt.Errorf("%w: trailing data after the record", ErrBadRecord)
	}
	switch {
	case !ValidID(r.ID):
		return Record{}, fmt.Errorf("%w: id %.40q", ErrBadRecord, r.ID)
	case !r.State.Known():
		return Record{}, fmt.Errorf("%w: job %s: unknown state %.20q", ErrBadRecord, r.ID, r.State)
	case r.Seq == 0:
		return Record{}, fmt.Errorf("%w: job %s: no sequence number", ErrBadRecord, r.ID)
	}
	return r, nil
}

// Known reports whether s is one of the job states.
func (s State) Known() bool {
	switch s {
	case StateQueued, StateRunning, StateSucceeded, StateFailed, StateCancelled:
		return true
	}
	return false
}

// Files is what a job's folder holds, as CheckRecord needs it.
type Files struct {
	// Input says the uploaded image is there; LastInput the uploaded last image.
	Input, LastInput bool
	// LatentBytes is the size of the final latent, -1 when it is missing.
	LatentBytes int64
}

// CheckRecord says why a loaded record (DecodeRecord's) cannot be served as it is, given
// its folder's files and a check of its parameters against the server's limits and model
// (admit; nil admits all), and returns the record to serve instead: a succeeded job whose
// latent is missing or of the wrong size ends failed; an unfinished job the server would
// not admit now, or an image job whose upload is missing, ends failed rather than run.
// A record with nothing wrong comes back as it is, with a nil error. CheckRecord is pure.
func CheckRecord(r Record, f Files, admit func(Params) error) (Record, error) {
	fail := func(format string, args ...any) (Record, error) {
		msg := fmt.Sprintf(format, args...)
		out := r
		out.State, out.Error, out.LatentShape, out.CancelRequested = StateFailed, msg, nil, false
		if out.FinishedAt == nil {
			t := out.CreatedAt
			out.FinishedAt = &t
		}
		return out, fmt.Errorf("job %s: %s", r.ID, msg)
	}
	switch {
	case r.State == StateSucceeded:
		n := int64(4)
		for _, d := range r.LatentShape {
			if d < 1 || n > math.MaxInt64/int64(d) {
				n = -2
				break
			}
			n *= int64(d)
		}
		if len(r.LatentShape) == 0 || n < 0 || f.LatentBytes != n {
			return fail("its output is missing from the data dir (latent of %d bytes for shape %v)", f.LatentBytes, r.LatentShape)
		}
	case r.State.Final():
	case r.HasImage() && !f.Input:
		return fail("its upload is missing from the data dir")
	case r.LastImage && !f.LastInput:
		return fail("its last image's upload is missing from the data dir")
	case admit != nil:
		if err := admit(r.Params); err != nil {
			return fail("this server no longer admits its parameters: %v", err)
		}
	}
	return r, nil
}
