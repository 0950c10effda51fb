package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// sseKeepAlive is how often an idle event stream gets a comment line.
const sseKeepAlive = 15 * time.Second

// handleEvents streams a job's status (either id form) as server-sent events: an "progress" event with the
// Status JSON whenever it changes (state, step, stage), and a final "done" event once the
// job has ended, after which the stream closes.
func (a *API) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if o := a.cfg.OpenAI; o != nil && o.Owns(id) {
		id = o.NativeID(id)
	}
	notify, stop, err := a.cfg.Backend.Subscribe(id)
	if err != nil {
		a.fail(w, err)
		return
	}
	defer stop()
	// A stream outlives the server's read and write timeouts: lift them, and bound each
	// write instead (a client that stops reading is dropped after sseWriteTimeout).
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	write := func(format string, args ...any) error {
		rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	w.WriteHeader(http.StatusOK)
	keep := time.NewTicker(sseKeepAlive)
	defer keep.Stop()
	var last uint64
	first := true
	for {
		st, err := a.cfg.Backend.Status(id)
		if err != nil {
			return
		}
		if first || st.Version != last {
			first, last = false, st.Version
			ev := "progress"
			if st.State.Final() {
				ev = "done"
			}
			b, _ := json.Marshal(st)
			if err := write("event: %s\nid: %d\ndata: %s\n\n", ev, st.Version, b); err != nil {
				return
			}
			if st.State.Final() {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-a.cfg.Done:
			return
		case <-notify:
		case <-keep.C:
			if err := write(": keep-alive\n\n"); err != nil {
				return
			}
		}
	}
}
