package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// sseKeepAlive is how often an idle event stream gets a comment line.
const sseKeepAlive = 15 * time.Second

// handleEvents streams a job's status as server-sent events: an "progress" event with the
// Status JSON whenever it changes (state, step, stage), and a final "done" event once the
// job has ended, after which the stream closes.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	notify, stop, err := s.coord.Subscribe(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer stop()
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", fmt.Errorf("streaming unsupported"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	keep := time.NewTicker(sseKeepAlive)
	defer keep.Stop()
	var last uint64
	first := true
	for {
		st, err := s.coord.Status(id)
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
			if _, err := fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", ev, st.Version, b); err != nil {
				return
			}
			fl.Flush()
			if st.State.Final() {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-notify:
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
