package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/model/family"
)

// The OpenAI Videos API (https://platform.openai.com/docs/api-reference/videos) beside the
// native job API, on the same paths. Requests are told apart by what they carry:
//   - a job id "video_HEX" is the OpenAI name of the native job HEX (GET, DELETE, content,
//     events); a bare HEX id is the native API;
//   - POST /v1/videos with a JSON body, or a multipart body with any OpenAI field (model,
//     prompt, input_reference, seconds, size, ...), is an OpenAI create; a multipart body
//     of only image and params parts is a native submit;
//   - GET /v1/videos (the list), POST /v1/videos/{id}/cancel and GET /v1/models exist only
//     in the OpenAI API.
// Both APIs see every job.

// openAIIDPrefix turns a native job id into the OpenAI video id.
const openAIIDPrefix = "video_"

// openAIMetaFile is the per-job file holding what the OpenAI API returns but the native
// record does not keep (the prompt).
const openAIMetaFile = "openai.json"

// OpenAIVideo is the OpenAI video object (the SDK's Video type).
type OpenAIVideo struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	Model              string          `json:"model"`
	Status             string          `json:"status"`
	Progress           int             `json:"progress"`
	CreatedAt          int64           `json:"created_at"`
	CompletedAt        *int64          `json:"completed_at"`
	ExpiresAt          *int64          `json:"expires_at"`
	Seconds            string          `json:"seconds"`
	Size               string          `json:"size"`
	Prompt             *string         `json:"prompt"`
	Error              *OpenAIJobError `json:"error"`
	RemixedFromVideoID *string         `json:"remixed_from_video_id"`
}

// OpenAIJobError is a failed video's error.
type OpenAIJobError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// openAIError is the body of every OpenAI-route error: {"error": {...}}.
type openAIError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *openAIError) Error() string { return e.Message }

// oaErr builds an OpenAI error; param "" is null.
func oaErr(status int, code, param, format string, args ...any) *openAIError {
	e := &openAIError{Status: status, Message: fmt.Sprintf(format, args...), Type: openAIErrorType(status)}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// openAIErrorType is OpenAI's error type for an HTTP status.
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// writeOpenAIError answers an OpenAI-route error (a 429 with Retry-After).
func (s *Server) writeOpenAIError(w http.ResponseWriter, e *openAIError) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(s.coord.RetryAfter()))
	}
	writeJSON(w, e.Status, map[string]*openAIError{"error": e})
}

// oaFail answers err (a serve error) in OpenAI's shape. Parameter errors (bad values and
// values over the server's limits) are 400s naming param, as OpenAI answers them.
func (s *Server) oaFail(w http.ResponseWriter, err error, param string) {
	var oe *openAIError
	if errors.As(err, &oe) {
		s.writeOpenAIError(w, oe)
		return
	}
	st, code := errorStatus(err)
	if errors.Is(err, ErrTooLarge) && !isMaxBytes(err) {
		st = http.StatusBadRequest
	}
	if st >= 500 || st == http.StatusTooManyRequests || st == http.StatusConflict || st == http.StatusNotFound {
		param = ""
	}
	msg := strings.TrimPrefix(err.Error(), "serve: ")
	if st >= 500 {
		// As the native API: the cause (which may name data-dir files) goes to the log only.
		s.log.Error("request failed", "err", err)
		msg = publicMessage(code)
		if st == http.StatusServiceUnavailable || st == http.StatusInsufficientStorage {
			w.Header().Set("Retry-After", "5")
		}
	}
	s.writeOpenAIError(w, oaErr(st, code, param, "%s", msg))
}

func isMaxBytes(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// openAIRoute reports whether r is on an OpenAI-only route or names an OpenAI id, so that
// a refusal before routing (a missing token) is answered in OpenAI's shape.
func openAIRoute(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case p == "/v1/videos" && r.Method == http.MethodGet, strings.HasPrefix(p, "/v1/models"):
		return true
	case p == "/v1/videos" && r.Method == http.MethodPost:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return mt == "application/json"
	}
	return strings.HasPrefix(p, "/v1/videos/"+openAIIDPrefix)
}

// unauthorized answers a request without the right bearer token.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="vdpp"`)
	if openAIRoute(r) {
		s.writeOpenAIError(w, oaErr(http.StatusUnauthorized, "invalid_api_key", "", "missing or wrong bearer token"))
		return
	}
	writeError(w, http.StatusUnauthorized, "unauthorized", errors.New("missing or wrong bearer token"))
}

// publicPath reports whether p is served without the token: probes and the web page's own
// files (the page asks for the token and sends it on its API calls).
func publicPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/" || strings.HasPrefix(p, "/web/")
}

// registerOpenAI adds the OpenAI Videos API, the routes shared with the native API
// (dispatched by id or body shape) and the web page to mux.
func (s *Server) registerOpenAI(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/videos", s.routeSubmit)
	mux.HandleFunc("GET /v1/videos", s.oaList)
	mux.HandleFunc("GET /v1/videos/{id}", s.byID(s.handleStatus, s.oaRetrieve))
	mux.HandleFunc("GET /v1/videos/{id}/content", s.byID(s.handleContent, s.oaContent))
	mux.HandleFunc("GET /v1/videos/{id}/events", s.byID(s.handleEvents, s.oaEvents))
	mux.HandleFunc("DELETE /v1/videos/{id}", s.byID(s.handleCancel, s.oaDelete))
	mux.HandleFunc("POST /v1/videos/{id}/cancel", s.oaCancel)
	mux.HandleFunc("GET /v1/models", s.oaModels)
	mux.HandleFunc("GET /v1/models/{model...}", s.oaModel)
	s.registerWeb(mux)
}

// byID sends a request whose {id} is an OpenAI id ("video_...") to oa, others to native.
func (s *Server) byID(native, oa http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.PathValue("id"), openAIIDPrefix) {
			oa(w, r)
			return
		}
		native(w, r)
	}
}

// nativeID maps an OpenAI id (or a bare native one) to the native job id.
func nativeID(id string) string { return strings.TrimPrefix(id, openAIIDPrefix) }

// openAIFields are the multipart part names that make a POST /v1/videos an OpenAI create.
var openAIFields = map[string]bool{
	"model": true, "prompt": true, "input_reference": true, "input_reference[image_url]": true,
	"input_reference[file_id]": true, "seconds": true, "size": true, "num_inference_steps": true,
	"guidance_scale": true, "negative_prompt": true, "seed": true, "num_frames": true, "fps": true,
	"motion_bucket_id": true, "noise_aug_strength": true, "min_guidance": true, "max_guidance": true,
	"decode_chunk_size": true, "width": true, "height": true, "n": true,
	"window": true, "overlap": true, "blend": true,
}

// routeSubmit dispatches POST /v1/videos by body shape: JSON is an OpenAI create; a
// multipart body is read (within --max-body-bytes) and is the native submit when it has a
// native-only part (image, params: a native text-to-video job has prompt parts too), else
// an OpenAI create when any part has an OpenAI field name, else the native submit.
func (s *Server) routeSubmit(w http.ResponseWriter, r *http.Request) {
	mt, mparams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/json" {
		s.oaCreate(w, r, mt, nil)
		return
	}
	if mt != "multipart/form-data" || mparams["boundary"] == "" {
		s.handleSubmit(w, r)
		return
	}
	if err := s.coord.StorageOK(); err != nil { // do not read an upload that cannot be kept
		s.fail(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxBodyBytes))
	if err != nil {
		s.fail(w, wrapRead(err))
		return
	}
	if multipartHasOpenAIField(body, mparams["boundary"]) {
		s.oaCreate(w, r, mt, body)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.handleSubmit(w, r)
}

// multipartHasOpenAIField reports whether a multipart body is an OpenAI create: no part is
// native-only (image, params) and some part is named like an OpenAI create field (a
// malformed body reports false: the native parser names the fault).
func multipartHasOpenAIField(body []byte, boundary string) bool {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	openAI := false
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return openAI
		}
		if err != nil {
			return false
		}
		switch name := p.FormName(); {
		case name == "image" || name == "params":
			return false
		case openAIFields[name]:
			openAI = true
		}
	}
}

// servedModels are the names a request's model may give; the first is the one reported.
func (s *Server) servedModels() []string {
	if len(s.cfg.ServedModelNames) > 0 {
		return s.cfg.ServedModelNames
	}
	return []string{s.cfg.Spec.Name}
}

func (s *Server) oaCreate(w http.ResponseWriter, r *http.Request, mediaType string, body []byte) {
	var req openAIRequest
	var err error
	if err := s.coord.StorageOK(); err != nil { // do not read an upload that cannot be kept
		s.oaFail(w, err, "")
		return
	}
	if body == nil {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxBodyBytes))
		if err != nil {
			s.oaFail(w, wrapRead(err), "")
			return
		}
	}
	if mediaType == "application/json" {
		req, err = parseOpenAIJSON(body)
	} else {
		_, mparams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		req, err = parseOpenAIMultipart(body, mparams["boundary"])
	}
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	if req.Model != "" && !contains(s.servedModels(), req.Model) {
		s.writeOpenAIError(w, oaErr(http.StatusNotFound, "model_not_found", "model",
			"the model %q does not exist: this server serves %s", req.Model, strings.Join(s.servedModels(), ", ")))
		return
	}
	text := s.gen.TextConditioned()
	switch {
	case text && req.Image != nil:
		s.writeOpenAIError(w, oaErr(http.StatusBadRequest, "invalid_value", "input_reference",
			"input_reference: the served model makes a video from the prompt alone (text-to-video) and takes no image"))
		return
	case text && strings.TrimSpace(req.Prompt) == "":
		s.writeOpenAIError(w, oaErr(http.StatusBadRequest, "missing_required_parameter", "prompt",
			"prompt is required: the served model makes a video from a prompt"))
		return
	case !text && req.Image == nil:
		s.writeOpenAIError(w, oaErr(http.StatusBadRequest, "missing_required_parameter", "input_reference",
			"input_reference is required: the served model makes a video from an image (a file part, or {\"image_url\": \"data:image/png;base64,...\"})"))
		return
	}
	if !text {
		if err := CheckImage(req.Image, s.cfg.Limits.MaxImagePixels); err != nil {
			s.oaFail(w, err, "input_reference")
			return
		}
	}
	p, err := OpenAIParams(s.gen, req.Fields, s.cfg.Limits)
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	var ce *CostError
	if err := s.checkCost(p); errors.As(err, &ce) {
		s.writeOpenAIError(w, oaErr(http.StatusRequestEntityTooLarge, "over_cost_limit", openAICostParam(ce.Param, req.Fields),
			"%s", strings.TrimPrefix(err.Error(), "serve: ")))
		return
	}
	var st Status
	if text {
		st, err = s.coord.SubmitPrompt(p, family.Prompt{Text: req.Prompt, Negative: req.Fields["negative_prompt"]})
	} else {
		st, err = s.coord.Submit(p, req.Image)
	}
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	meta, _ := json.Marshal(openAIMeta{Prompt: req.Prompt})
	if err := s.store.WriteFile(st.ID, openAIMetaFile, meta); err != nil {
		s.log.Warn("store the prompt", "id", st.ID, "err", err)
	}
	if _, err := s.coord.Status(st.ID); errors.Is(err, ErrNotFound) {
		// Deleted by another client (who found it in the list) while the prompt was
		// written: WriteFile may have made the folder again.
		s.store.RemoveFiles(st.ID)
	}
	w.Header().Set("Location", "/v1/videos/"+openAIIDPrefix+st.ID)
	writeJSON(w, http.StatusOK, s.openAIVideo(st))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// openAIMeta is the content of openAIMetaFile.
type openAIMeta struct {
	Prompt string `json:"prompt"`
}

// openAIVideo maps a native status to the OpenAI video object.
func (s *Server) openAIVideo(st Status) OpenAIVideo {
	v := OpenAIVideo{ID: openAIIDPrefix + st.ID, Object: "video", Model: s.servedModels()[0],
		CreatedAt: st.CreatedAt.Unix(), Seconds: secondsOf(st.Params), Size: fmt.Sprintf("%dx%d", st.Params.Width, st.Params.Height)}
	switch st.State {
	case StateQueued:
		v.Status = "queued"
	case StateRunning:
		v.Status = "in_progress"
		if st.Progress.Steps > 0 {
			v.Progress = min(99, 100*st.Progress.Step/st.Progress.Steps)
		}
	case StateSucceeded:
		v.Status, v.Progress = "completed", 100
	case StateFailed:
		v.Status = "failed"
		v.Error = &OpenAIJobError{Code: "generation_failed", Message: st.Error}
	case StateCancelled:
		v.Status = "failed"
		v.Error = &OpenAIJobError{Code: "cancelled", Message: "the job was cancelled"}
	}
	if st.FinishedAt != nil {
		t := st.FinishedAt.Unix()
		v.CompletedAt = &t
		if s.cfg.KeepJobs > 0 {
			e := st.FinishedAt.Add(s.cfg.KeepJobs).Unix()
			v.ExpiresAt = &e
		}
	}
	if b, err := s.store.ReadFile(st.ID, openAIMetaFile); err == nil {
		var m openAIMeta
		if json.Unmarshal(b, &m) == nil {
			v.Prompt = &m.Prompt
		}
	}
	return v
}

// secondsOf is a job's duration, frames over fps, as OpenAI writes it ("4", "2.5").
func secondsOf(p Params) string {
	if p.FPS < 1 {
		return "0"
	}
	sec := math.Round(float64(p.NumFrames)/float64(p.FPS)*100) / 100
	return strconv.FormatFloat(sec, 'f', -1, 64)
}

func (s *Server) oaRetrieve(w http.ResponseWriter, r *http.Request) {
	st, err := s.coord.Status(nativeID(r.PathValue("id")))
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, s.openAIVideo(st))
}

// oaCancel is POST /v1/videos/{id}/cancel (either id form): the native cancel, answered
// with the video object. A job that already ended is a 409.
func (s *Server) oaCancel(w http.ResponseWriter, r *http.Request) {
	st, err := s.coord.Cancel(nativeID(r.PathValue("id")))
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, s.openAIVideo(st))
}

// oaEvents is the native event stream of an OpenAI id.
func (s *Server) oaEvents(w http.ResponseWriter, r *http.Request) {
	r.SetPathValue("id", nativeID(r.PathValue("id")))
	s.handleEvents(w, r)
}

// deleteWait bounds how long DELETE waits for a running job's cancellation to land.
const deleteWait = 30 * time.Second

// oaDelete deletes a job and its files (a queued or running one is cancelled first) and
// answers {"id", "object": "video.deleted", "deleted": true}.
func (s *Server) oaDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.coord.Delete(r.Context(), nativeID(id), deleteWait); err != nil {
		s.oaFail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "video.deleted", "deleted": true})
}

// List pagination bounds (OpenAI's).
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

// oaList is GET /v1/videos: the jobs, newest first unless order=asc, after the cursor
// id, at most limit of them, as the SDK's cursor page ({data, first_id, last_id,
// has_more}).
func (s *Server) oaList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			s.writeOpenAIError(w, oaErr(http.StatusBadRequest, "invalid_value", "limit", "limit %q must be an integer in [1, %d]", v, maxListLimit))
			return
		}
		limit = n
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		s.writeOpenAIError(w, oaErr(http.StatusBadRequest, "invalid_value", "order", "order %q must be asc or desc", order))
		return
	}
	page, more, err := s.coord.Page(nativeID(q.Get("after")), limit, order == "desc")
	if err != nil {
		s.oaFail(w, err, "after")
		return
	}
	out := struct {
		Object  string        `json:"object"`
		Data    []OpenAIVideo `json:"data"`
		FirstID *string       `json:"first_id"`
		LastID  *string       `json:"last_id"`
		HasMore bool          `json:"has_more"`
	}{Object: "list", Data: make([]OpenAIVideo, 0, len(page)), HasMore: more}
	for _, st := range page {
		out.Data = append(out.Data, s.openAIVideo(st))
	}
	if n := len(out.Data); n > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// processStart is the "created" time of the served model.
var processStart = time.Now()

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Limits is vdpp's extension: what a job for this model may ask (see ModelLimits).
	Limits ModelLimits `json:"vdpp_limits"`
}

func (s *Server) modelObject(name string) openAIModel {
	return openAIModel{ID: name, Object: "model", Created: processStart.Unix(), OwnedBy: "vdpp", Limits: s.modelLimits()}
}

// oaModels is GET /v1/models: the served model under each of its names.
func (s *Server) oaModels(w http.ResponseWriter, _ *http.Request) {
	data := []openAIModel{}
	for _, n := range s.servedModels() {
		data = append(data, s.modelObject(n))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) oaModel(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	if !contains(s.servedModels(), name) {
		s.writeOpenAIError(w, oaErr(http.StatusNotFound, "model_not_found", "model", "the model %q does not exist", name))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject(name))
}
