// Package openai is the OpenAI Videos API (https://platform.openai.com/docs/api-reference/videos)
// of vdpp's inference server, served beside the native job API on the same paths (package
// serve/httpapi routes to it). It maps OpenAI requests onto the server's jobs and answers
// in OpenAI's shapes; it keeps no job state of its own.
//
// Contract: an id "video_HEX" names native job HEX; a JSON or OpenAI-field multipart POST
// /v1/videos is an OpenAI create (Params maps its fields); GET /v1/videos (the list), POST
// /v1/videos/{id}/cancel and GET /v1/models exist only here. Every error is OpenAI's
// {"error": {"message", "type", "param", "code"}} naming the parameter at fault; a
// server-side failure is logged and answered with a generic message.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
)

// Requests are told apart from native ones by what they carry: a job id "video_HEX" is
// the OpenAI name of the native job HEX (GET, DELETE, content, events); a bare HEX id is the
// native API's. POST /v1/videos with a JSON body, or a multipart body with an OpenAI field
// (model, prompt, input_reference, seconds, size, ...) and no native-only part (image,
// params), is an OpenAI create. Both APIs see every job.

// IDPrefix turns a native job id into the OpenAI video id.
const IDPrefix = "video_"

// openAIMetaFile is the per-job file holding what the OpenAI API returns but the native
// record does not keep (the prompt).
const openAIMetaFile = "openai.json"

// Video is the OpenAI video object (the SDK's Video type).
type Video struct {
	ID                 string    `json:"id"`
	Object             string    `json:"object"`
	Model              string    `json:"model"`
	Status             string    `json:"status"`
	Progress           int       `json:"progress"`
	CreatedAt          int64     `json:"created_at"`
	CompletedAt        *int64    `json:"completed_at"`
	ExpiresAt          *int64    `json:"expires_at"`
	Seconds            string    `json:"seconds"`
	Size               string    `json:"size"`
	Prompt             *string   `json:"prompt"`
	Error              *JobError `json:"error"`
	RemixedFromVideoID *string   `json:"remixed_from_video_id"`
	// Metadata holds what vdpp says about the video beyond OpenAI's fields: "cache", a
	// cached job's one line about its step cache (calls computed, time saved, quality).
	Metadata map[string]string `json:"metadata,omitempty"`
}

// JobError is a failed video's error.
type JobError struct {
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

// Config is the OpenAI API of one server.
type Config struct {
	Backend httpapi.Backend
	// Names are the names the served model answers to (a create's "model", GET
	// /v1/models); the first is the one reported. At least one.
	Names []string
	// Limits bound what a request may ask for (the server's flags).
	Limits job.Limits
	// KeepJobs is how long a finished job is kept (its expires_at); 0 is forever.
	KeepJobs time.Duration
	Log      *slog.Logger
}

// API serves the OpenAI Videos API (httpapi.OpenAI).
type API struct {
	b   httpapi.Backend
	cfg Config
	log *slog.Logger
	// created is the "created" time of the served model.
	created time.Time
}

var _ httpapi.OpenAI = (*API)(nil)

// New returns the OpenAI API of cfg.
func New(cfg Config) *API {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &API{b: cfg.Backend, cfg: cfg, log: cfg.Log, created: time.Now()}
}

// writeError answers an OpenAI-route error (a 429 with Retry-After).
func (a *API) writeError(w http.ResponseWriter, e *openAIError) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(a.b.RetryAfter()))
	}
	httpapi.WriteJSON(w, e.Status, map[string]*openAIError{"error": e})
}

// Fail answers err (a server error, or an *openAIError) in OpenAI's shape. Parameter
// errors (bad values and values over the server's limits) are 400s naming param, as
// OpenAI answers them.
func (a *API) Fail(w http.ResponseWriter, err error, param string) {
	var oe *openAIError
	if errors.As(err, &oe) {
		a.writeError(w, oe)
		return
	}
	if errors.Is(err, httpapi.ErrUnauthorized) {
		a.writeError(w, oaErr(http.StatusUnauthorized, "invalid_api_key", "", "%s", err))
		return
	}
	st, code := httpapi.ErrorStatus(err)
	if errors.Is(err, job.ErrTooLarge) && !httpapi.IsMaxBytes(err) && !errors.Is(err, job.ErrCostLimit) {
		st = http.StatusBadRequest
	}
	if st >= 500 || st == http.StatusTooManyRequests || st == http.StatusConflict || st == http.StatusNotFound {
		param = ""
	}
	msg := strings.TrimPrefix(err.Error(), "serve: ")
	if st >= 500 {
		// As the native API: the cause (which may name data-dir files) goes to the log only.
		a.log.Error("request failed", "err", err)
		msg = httpapi.PublicMessage(code)
		if st == http.StatusServiceUnavailable || st == http.StatusInsufficientStorage {
			w.Header().Set("Retry-After", "5")
		}
	}
	a.writeError(w, oaErr(st, code, param, "%s", msg))
}

// Route reports whether r is on an OpenAI-only route or names an OpenAI id, so that a
// refusal before routing (a missing token) is answered in OpenAI's shape.
func (a *API) Route(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case p == "/v1/videos" && r.Method == http.MethodGet, strings.HasPrefix(p, "/v1/models"), strings.HasSuffix(p, "/remix"), strings.HasSuffix(p, "/cancel"):
		return true
	case p == "/v1/videos" && r.Method == http.MethodPost:
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return mt == "application/json"
	}
	return strings.HasPrefix(p, "/v1/videos/"+IDPrefix)
}

// Register adds the routes only the OpenAI API has.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/videos", a.list)
	mux.HandleFunc("POST /v1/videos/{id}/cancel", a.cancel)
	mux.HandleFunc("POST /v1/videos/{id}/remix", a.remix)
	mux.HandleFunc("GET /v1/models", a.models)
	mux.HandleFunc("GET /v1/models/{model...}", a.model)
}

// Owns reports whether id is an OpenAI video id.
func (a *API) Owns(id string) bool { return strings.HasPrefix(id, IDPrefix) }

// NativeID maps an OpenAI id (or a bare native one) to the native job id.
func (a *API) NativeID(id string) string { return strings.TrimPrefix(id, IDPrefix) }

// requestFields are the multipart part names of an OpenAI create besides its generation
// fields (CreateFields of the served model's knobs): the model, and the OpenAI fields of
// the inputs (knob.AllInputs) but the negative prompt (a generation field), an image's
// with its [image_url] and [file_id] spellings.
var requestFields = func() []string {
	out := []string{"model"}
	for _, in := range knob.AllInputs {
		switch {
		case in.OpenAI == "" || in.OpenAI == fieldNegative:
		case in.Kind == knob.ImageInput:
			out = append(out, in.OpenAI, in.OpenAI+"[image_url]", in.OpenAI+"[file_id]")
		default:
			out = append(out, in.OpenAI)
		}
	}
	return out
}()

// isCreateField reports whether a multipart part name is an OpenAI create's, for the
// served model.
func (a *API) isCreateField(name string) bool {
	return slices.Contains(requestFields, name) || slices.Contains(CreateFields(a.b.Model().Description().Knobs), name)
}

// IsCreate reports whether a multipart body, or the start of one (a refusal before it was
// all read), is an OpenAI create: no part is native-only (image, params) and some part is
// named like an OpenAI create field. A body that breaks off or is malformed counts the
// parts before the fault; one with no part reports false (the native parser names it).
func (a *API) IsCreate(body []byte, boundary string) bool {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	openAI := false
	for {
		p, err := mr.NextPart()
		if err != nil {
			return openAI
		}
		switch name := p.FormName(); {
		case name == "params" || nativeOnly(name):
			return false
		case a.isCreateField(name):
			openAI = true
		}
	}
}

// nativeOnly reports whether a part name is an input only the native create spells so
// (image, last_image: the OpenAI create's image is input_reference).
func nativeOnly(name string) bool {
	in, ok := knob.AllInputs.Lookup(name)
	return ok && in.OpenAI != name
}

// Create answers an OpenAI create: a JSON body (read here when body is nil) or a multipart
// one (already read).
func (a *API) Create(w http.ResponseWriter, r *http.Request, mediaType string, body []byte) {
	var req openAIRequest
	var err error
	if err := a.b.StorageOK(); err != nil { // do not read an upload that cannot be kept
		a.Fail(w, err, "")
		return
	}
	if body == nil {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.Limits.MaxBodyBytes))
		if err != nil {
			a.Fail(w, httpapi.ReadError(err), "")
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
		a.Fail(w, err, "")
		return
	}
	if req.ModelGiven && !slices.Contains(a.cfg.Names, req.Model) {
		a.writeError(w, oaErr(http.StatusNotFound, "model_not_found", "model",
			"the model %q does not exist: this server serves %s", req.Model, strings.Join(a.cfg.Names, ", ")))
		return
	}
	m := a.b.Model()
	text := m.TextConditioned()
	d := m.Description()
	takesImage := !text || d.ImageNeed() != family.NeedNone
	switch {
	case !takesImage && req.Image != nil:
		a.writeError(w, oaErr(http.StatusBadRequest, "invalid_value", "input_reference",
			"input_reference: the served model makes a video from the prompt alone (text-to-video) and takes no image"))
		return
	case text && strings.TrimSpace(req.Prompt) == "":
		a.writeError(w, oaErr(http.StatusBadRequest, "missing_required_parameter", "prompt",
			"prompt is required: the served model makes a video from a prompt"))
		return
	case req.Image == nil && (!text || d.ImageNeed() == family.NeedRequired):
		a.writeError(w, oaErr(http.StatusBadRequest, "missing_required_parameter", "input_reference",
			"input_reference is required: the served model makes a video from an image (a file part, or {\"image_url\": \"data:image/png;base64,...\"})"))
		return
	case d.LastImage == family.NeedRequired:
		a.writeError(w, oaErr(http.StatusBadRequest, "invalid_value", "input_reference",
			"the served model is first-last-frame and needs a last image besides input_reference, which the OpenAI create cannot carry: send vdpp's native multipart create instead (POST /v1/videos with image, last_image and prompt parts)"))
		return
	}
	if req.Image != nil {
		if _, _, err := a.b.ImageSize(req.Image); err != nil {
			a.Fail(w, err, "input_reference")
			return
		}
	}
	p, err := Params(m, req.Fields, a.cfg.Limits)
	if err != nil {
		a.Fail(w, err, "")
		return
	}
	var pixels int64
	if req.Image != nil {
		if pixels, err = a.b.CheckImage(req.Image, p); err != nil {
			a.Fail(w, err, "input_reference")
			return
		}
	}
	var ce *job.CostError
	if err := a.b.CheckCost(p); errors.As(err, &ce) {
		a.writeError(w, oaErr(http.StatusRequestEntityTooLarge, "over_cost_limit", costParam(ce.Param, req.Fields),
			"%s", strings.TrimPrefix(err.Error(), "serve: ")))
		return
	} else if err != nil {
		a.Fail(w, err, "")
		return
	}
	in := job.Input{Image: req.Image, Pixels: pixels, Client: httpapi.ClientOf(r)}
	if text {
		in.Prompt = &family.Prompt{Text: req.Prompt, Negative: req.Fields["negative_prompt"]}
	}
	st, err := a.b.Submit(p, in)
	if err != nil {
		a.Fail(w, err, "")
		return
	}
	meta, _ := json.Marshal(openAIMeta{Prompt: req.Prompt})
	if err := a.b.WriteJobFile(st.ID, openAIMetaFile, meta); err != nil {
		a.log.Warn("store the prompt", "id", st.ID, "err", err)
	}
	w.Header().Set("Location", "/v1/videos/"+IDPrefix+st.ID)
	httpapi.WriteJSON(w, http.StatusOK, a.video(st))
}

// openAIMeta is the content of openAIMetaFile.
type openAIMeta struct {
	Prompt string `json:"prompt"`
}

// video maps a native status to the OpenAI video object.
func (a *API) video(st job.Status) Video {
	v := Video{ID: IDPrefix + st.ID, Object: "video", Model: a.cfg.Names[0],
		CreatedAt: st.CreatedAt.Unix(), Seconds: secondsOf(st.Params), Size: fmt.Sprintf("%dx%d", st.Params.Width, st.Params.Height)}
	switch st.State {
	case job.StateQueued:
		v.Status = "queued"
	case job.StateRunning:
		v.Status = "in_progress"
		if st.Progress.Steps > 0 {
			v.Progress = min(99, 100*st.Progress.Step/st.Progress.Steps)
		}
	case job.StateSucceeded:
		v.Status, v.Progress = "completed", 100
	case job.StateFailed:
		v.Status = "failed"
		v.Error = &JobError{Code: "generation_failed", Message: st.Error}
	case job.StateCancelled:
		v.Status = "failed"
		v.Error = &JobError{Code: "cancelled", Message: "the job was cancelled"}
	}
	if st.Cache != nil && st.Cache.Summary != "" {
		v.Metadata = map[string]string{"cache": st.Cache.Summary}
	}
	if st.FinishedAt != nil {
		t := st.FinishedAt.Unix()
		v.CompletedAt = &t
		if a.cfg.KeepJobs > 0 {
			e := st.FinishedAt.Add(a.cfg.KeepJobs).Unix()
			v.ExpiresAt = &e
		}
	}
	if b, err := a.b.JobFile(st.ID, openAIMetaFile); err == nil {
		var m openAIMeta
		if json.Unmarshal(b, &m) == nil {
			v.Prompt = &m.Prompt
		}
	}
	return v
}

// secondsOf is a job's duration, frames over fps, as OpenAI writes it ("4", "2.5").
func secondsOf(p job.Params) string {
	if p.FPS < 1 {
		return "0"
	}
	sec := math.Round(float64(p.NumFrames)/float64(p.FPS)*100) / 100
	return strconv.FormatFloat(sec, 'f', -1, 64)
}

// Retrieve is GET /v1/videos/{id}.
func (a *API) Retrieve(w http.ResponseWriter, r *http.Request) {
	st, err := a.b.Status(a.NativeID(r.PathValue("id")))
	if err != nil {
		a.Fail(w, err, "")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, a.video(st))
}

// remix is POST /v1/videos/{id}/remix (OpenAI's edit of a finished video with a new prompt),
// which this server does not do: a 400 in OpenAI's shape saying so, as for every
// /v1/videos route.
func (a *API) remix(w http.ResponseWriter, r *http.Request) {
	a.writeError(w, oaErr(http.StatusBadRequest, "unsupported", "", "remix is not supported by this server: create a new video with the prompt instead"))
}

// cancel is POST /v1/videos/{id}/cancel (either id form): the native cancel, answered
// with the video object. A job that already ended is a 409.
func (a *API) cancel(w http.ResponseWriter, r *http.Request) {
	st, err := a.b.Cancel(a.NativeID(r.PathValue("id")))
	if err != nil {
		a.Fail(w, err, "")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, a.video(st))
}

// Delete deletes a job and its files (a queued or running one is cancelled first) and
// answers {"id", "object": "video.deleted", "deleted": true}.
func (a *API) Delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := a.b.Delete(r.Context(), a.NativeID(id)); err != nil {
		a.Fail(w, err, "")
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "video.deleted", "deleted": true})
}

// List pagination bounds (OpenAI's).
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

// list is GET /v1/videos: the jobs, newest first unless order=asc, after the cursor id, at
// most limit of them, as the SDK's cursor page ({data, first_id, last_id, has_more}).
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			a.writeError(w, oaErr(http.StatusBadRequest, "invalid_value", "limit", "limit %q must be an integer in [1, %d]", v, maxListLimit))
			return
		}
		limit = n
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		a.writeError(w, oaErr(http.StatusBadRequest, "invalid_value", "order", "order %q must be asc or desc", order))
		return
	}
	page, more, err := a.b.Page(a.NativeID(q.Get("after")), limit, order == "desc")
	if err != nil {
		a.Fail(w, err, "after")
		return
	}
	out := struct {
		Object  string  `json:"object"`
		Data    []Video `json:"data"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
		HasMore bool    `json:"has_more"`
	}{Object: "list", Data: make([]Video, 0, len(page)), HasMore: more}
	for _, st := range page {
		out.Data = append(out.Data, a.video(st))
	}
	if n := len(out.Data); n > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// Model is the OpenAI model object, with vdpp's limits.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Limits is vdpp's extension: what a job for this model may ask (see job.ModelLimits).
	Limits job.ModelLimits `json:"vdpp_limits"`
}

func (a *API) modelObject(name string) Model {
	return Model{ID: name, Object: "model", Created: a.created.Unix(), OwnedBy: "vdpp", Limits: a.b.Limits()}
}

// models is GET /v1/models: the served model under each of its names.
func (a *API) models(w http.ResponseWriter, _ *http.Request) {
	data := []Model{}
	for _, n := range a.cfg.Names {
		data = append(data, a.modelObject(n))
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (a *API) model(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	if !slices.Contains(a.cfg.Names, name) {
		a.writeError(w, oaErr(http.StatusNotFound, "model_not_found", "model", "the model %q does not exist", name))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, a.modelObject(name))
}
