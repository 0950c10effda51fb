package openai

import (
	"fmt"
	"net/http"

	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
)

// Content is GET /v1/videos/{id}/content?variant=video|thumbnail|spritesheet: the MP4,
// a PNG of the first frame, or a JPEG grid of every frame (row-major, ceil(sqrt(T))
// columns, each frame scaled to at most 256 pixels on its longer side).
func (a *API) Content(w http.ResponseWriter, r *http.Request) {
	id := a.NativeID(r.PathValue("id"))
	if k, ok := httpapi.OtherQuery(r, "variant"); ok {
		a.writeError(w, oaErr(http.StatusBadRequest, "unknown_parameter", k, "unknown query parameter %q (variant=video|thumbnail|spritesheet; format is the native API's, on a bare id)", k))
		return
	}
	var name, ctype string
	switch v := r.URL.Query().Get("variant"); v {
	case "", "video":
		name, ctype = "output.mp4", "video/mp4"
	case "thumbnail":
		name, ctype = "thumbnail.png", "image/png"
	case "spritesheet":
		name, ctype = "spritesheet.jpg", "image/jpeg"
	default:
		a.writeError(w, oaErr(http.StatusBadRequest, "invalid_value", "variant", "variant %q must be video, thumbnail or spritesheet", v))
		return
	}
	st, err := a.b.Status(id)
	if err != nil {
		a.Fail(w, err, "")
		return
	}
	if st.State != job.StateSucceeded {
		a.Fail(w, fmt.Errorf("%w: video %s%s is %s", job.ErrNotReady, IDPrefix, id, st.State), "")
		return
	}
	httpapi.ServeOutput(w, r, a.b, id, name, ctype, st.CreatedAt, func(w http.ResponseWriter, err error) { a.Fail(w, err, "") })
}
