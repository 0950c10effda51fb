// Package httpapi is the HTTP layer of vdpp's inference server: the native job API
// (POST /v1/videos, GET /v1/videos/{id}, its content and event stream, DELETE), health
// and readiness probes, the model's limits, metrics, the admin endpoints, the web page, and
// the bounds every connection lives within (timeouts, connections per client and in all).
// It turns requests into calls on a Backend (the server's core) and errors into statuses;
// it holds no job state of its own. The OpenAI Videos API (package serve/openai) plugs in
// through OpenAI and shares the /v1/videos routes.
//
// Contract: every bad request gets a 4xx JSON body {"error": "...", "code": "..."}; a
// server-side failure is logged with its cause and answered with a generic message (never
// a data-dir path); a handler panic is a 500, not a dropped connection. With a token set,
// every route but the probes and the web page's files needs "Authorization: Bearer
// TOKEN"; the admin routes answer loopback clients only.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/video"
)

// maxParamsBytes bounds the JSON part of an upload.
const maxParamsBytes = 64 << 10

// MaxFieldBytes bounds one text field of a request (a prompt).
const MaxFieldBytes = 64 << 10

// Model is the served model as the HTTP layer sees it.
type Model interface {
	// ParseParams parses a job's JSON parameters over the model's defaults and checks them
	// against lim and the model (job.ErrBadParams, job.ErrTooLarge).
	ParseParams(data []byte, lim job.Limits) (job.Params, error)
	// ResolveParams resolves a job whose knobs given are set in p over the model's
	// defaults, checked as ParseParams checks (the OpenAI API sets the knobs from its
	// fields).
	ResolveParams(p job.Params, given knob.Given, lim job.Limits) (job.Params, error)
	// Unknown says what a knob name of another family's table is ("applies to svd
	// models; ..."), "" for a name no family has.
	Unknown(name string) string
	// Description is the family's description of the model (frame multiple, windows).
	Description() family.Description
	// TextConditioned reports whether jobs give a prompt rather than an image.
	TextConditioned() bool
}

// WorkerInfo describes one worker rank for the admin API.
type WorkerInfo struct {
	Rank int `json:"rank"`
	// Replica and Stage are the rank's place in the workers' mesh (Config.Mesh): its
	// data-parallel replica and its pipeline stage there.
	Replica   int  `json:"replica"`
	Stage     int  `json:"stage"`
	Pid       int  `json:"pid"`
	Connected bool `json:"connected"`
	Restarts  int  `json:"restarts"`
	Gone      bool `json:"gone"` // exited with no restarts left
	// Restarting says the rank's process exited and a new one is being started.
	Restarting bool `json:"restarting,omitempty"`
}

// Backend is the server's core as the HTTP layer (and the OpenAI adapter) asks it.
type Backend interface {
	Model() Model
	// ImageSize reads an upload's header: a PNG or JPEG of a size the server accepts
	// (video.ErrNotImage, job.ErrTooLarge), its width and height; nothing is decoded.
	ImageSize(data []byte) (w, h int, err error)
	// CheckImage checks an upload for job p before it is queued: a shape p's video can
	// use (job.ErrBadParams), a decoding cost the server accepts (job.ErrTooLarge), pixels
	// that decode; it returns the image's pixels.
	CheckImage(data []byte, p job.Params) (int64, error)
	// CheckCost refuses (a *job.CostError) a job the served model cannot run within its
	// cost limits.
	CheckCost(p job.Params) error
	// Limits are the served model's limits (GET /v1/limits).
	Limits() job.ModelLimits
	// StorageOK reports whether a job could be stored now (job.ErrStorage when not).
	StorageOK() error
	// Submit persists and queues a job (job.ErrQueueFull, job.ErrStorage, job.ErrClosed).
	Submit(p job.Params, in job.Input) (job.Status, error)
	Status(id string) (job.Status, error)
	// Cancel asks a job to stop; nil means it will not succeed.
	Cancel(id string) (job.Status, error)
	// Delete deletes a job (cancelling it first) and its files.
	Delete(ctx context.Context, id string) error
	// Page lists jobs in submission order (newest first when desc) after the id after.
	Page(after string, limit int, desc bool) ([]job.Status, bool, error)
	// Subscribe returns a channel that receives a token whenever job id changes.
	Subscribe(id string) (<-chan struct{}, func(), error)
	// RetryAfter estimates how many seconds until the queue has room.
	RetryAfter() int
	// Ready reports how many worker ranks have joined of how many.
	Ready() (joined, want int)
	// Latent returns a succeeded job's final latent (little-endian float32) and shape.
	Latent(id string) ([]byte, []int, error)
	// Output returns the path of a succeeded job's rendered file name ("output.mp4",
	// "output.gif", "thumbnail.png", "spritesheet.jpg"), rendering it first when missing.
	Output(ctx context.Context, id, name string) (string, error)
	// JobFile and WriteJobFile read and write a small file kept with a job (the OpenAI
	// adapter's metadata).
	JobFile(id, name string) ([]byte, error)
	WriteJobFile(id, name string, data []byte) error
	Workers() []WorkerInfo
	// Kill ends a worker rank abruptly (the pool restarts it).
	Kill(rank int) error
}

// OpenAI is the OpenAI Videos API served beside the native one on the same paths (package
// serve/openai).
type OpenAI interface {
	// Register adds the routes only the OpenAI API has.
	Register(mux *http.ServeMux)
	// Owns reports whether a job id in a path is the OpenAI API's ("video_...").
	Owns(id string) bool
	// IsCreate reports whether a multipart POST /v1/videos body, or the start of one, is an
	// OpenAI create.
	IsCreate(body []byte, boundary string) bool
	// Create answers an OpenAI create (body already read, within the body limit).
	Create(w http.ResponseWriter, r *http.Request, mediaType string, body []byte)
	// Retrieve, Content and Delete answer GET, GET .../content and DELETE of an id it owns.
	Retrieve(w http.ResponseWriter, r *http.Request)
	Content(w http.ResponseWriter, r *http.Request)
	Delete(w http.ResponseWriter, r *http.Request)
	// NativeID maps an id it owns to the native job id.
	NativeID(id string) string
	// Route reports whether r is answered in the OpenAI shape when refused before routing.
	Route(r *http.Request) bool
	// Fail answers err in the OpenAI shape.
	Fail(w http.ResponseWriter, err error, param string)
}

// Config is the HTTP layer of one server.
type Config struct {
	Backend Backend
	// OpenAI, when set, serves the OpenAI Videos API beside the native one.
	OpenAI OpenAI
	// Token, when set, is the bearer token every API call must present.
	Token  string
	Limits job.Limits
	// Metrics serves GET /metrics.
	Metrics http.Handler
	// Done is closed when the server closes: event streams end.
	Done <-chan struct{}
	Log  *slog.Logger
}

// API serves the HTTP routes of Config.
type API struct {
	cfg Config
	log *slog.Logger
}

// New returns the HTTP layer of cfg.
func New(cfg Config) *API {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &API{cfg: cfg, log: cfg.Log}
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	// Code is a stable machine-readable reason.
	Code string `json:"code"`
}

// WriteJSON writes v as indented JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code string, err error) {
	WriteJSON(w, status, apiError{Error: err.Error(), Code: code})
}

// IsDiskFull reports whether err is a full disk or quota (HTTP 507).
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsMaxBytes reports whether err is a body over its limit (http.MaxBytesReader).
func IsMaxBytes(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// ErrorStatus maps an error to its HTTP status and code.
func ErrorStatus(err error) (int, string) {
	switch {
	case IsMaxBytes(err):
		return http.StatusRequestEntityTooLarge, "body_too_large"
	case errors.Is(err, job.ErrNotFound), errors.Is(err, job.ErrNoWorker):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, ErrNoRoute):
		return http.StatusNotFound, "no_route"
	case errors.Is(err, ErrMethod):
		return http.StatusMethodNotAllowed, "method_not_allowed"
	case errors.Is(err, job.ErrQueueFull):
		return http.StatusTooManyRequests, "queue_full"
	case errors.Is(err, job.ErrCostLimit):
		return http.StatusRequestEntityTooLarge, "over_cost_limit"
	case errors.Is(err, job.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "over_limit"
	case errors.Is(err, job.ErrBadParams):
		return http.StatusBadRequest, "bad_params"
	case errors.Is(err, video.ErrNotImage):
		return http.StatusUnsupportedMediaType, "not_image"
	case errors.Is(err, job.ErrFinished), errors.Is(err, job.ErrNotReady), errors.Is(err, job.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, job.ErrClosed):
		return http.StatusServiceUnavailable, "shutting_down"
	case errors.Is(err, job.ErrStorage) && IsDiskFull(err):
		return http.StatusInsufficientStorage, "insufficient_storage"
	case errors.Is(err, job.ErrStorage):
		return http.StatusServiceUnavailable, "storage_unavailable"
	case errors.Is(err, video.ErrNoFFmpeg):
		return http.StatusNotImplemented, "no_ffmpeg"
	}
	return http.StatusInternalServerError, "internal"
}

// PublicMessage is what a client is told about a server-side error of code: never the
// underlying error, which may name files of the data dir (it goes to the log).
func PublicMessage(code string) string {
	switch code {
	case "storage_unavailable":
		return "the server cannot store jobs right now; try again later"
	case "insufficient_storage":
		return "the server is out of storage; try again later"
	case "shutting_down":
		return "the server is shutting down"
	case "no_ffmpeg":
		return "this server cannot encode that format"
	}
	return "internal error"
}

// ReadError wraps a failed read of a request body: a body over its limit stays itself
// (413), anything else is a bad request.
func ReadError(err error) error {
	if IsMaxBytes(err) {
		return err
	}
	return fmt.Errorf("%w: reading the upload: %v", job.ErrBadParams, err)
}

func (a *API) fail(w http.ResponseWriter, err error) {
	st, code := ErrorStatus(err)
	if st >= 500 {
		a.log.Error("request failed", "err", err)
	}
	if st == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(a.cfg.Backend.RetryAfter()))
	}
	if st >= 500 {
		if st == http.StatusServiceUnavailable || st == http.StatusInsufficientStorage {
			w.Header().Set("Retry-After", "5")
		}
		err = errors.New(PublicMessage(code)) // the cause, with its paths, is logged above
	}
	writeError(w, st, code, err)
}

// ReadFailed resolves a failed read of job id's files: a job that expired or was deleted
// after the handler looked it up has left memory before its files go, so the failure is
// answered as for an unknown id (404), not as a server error.
func ReadFailed(b Backend, id string, err error) error {
	if _, serr := b.Status(id); errors.Is(serr, job.ErrNotFound) {
		return serr
	}
	return err
}

// Handler returns the server's HTTP API.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	oa := a.cfg.OpenAI
	mux.HandleFunc("POST /v1/videos", a.routeSubmit)
	mux.HandleFunc("GET /v1/videos/{id}", a.byID(a.handleStatus, func(o OpenAI) http.HandlerFunc { return o.Retrieve }))
	mux.HandleFunc("GET /v1/videos/{id}/content", a.byID(a.handleContent, func(o OpenAI) http.HandlerFunc { return o.Content }))
	mux.HandleFunc("GET /v1/videos/{id}/events", a.handleEvents) // one stream for both ids
	mux.HandleFunc("DELETE /v1/videos/{id}", a.byID(a.handleCancel, func(o OpenAI) http.HandlerFunc { return o.Delete }))
	if oa != nil {
		oa.Register(mux)
	}
	a.registerWeb(mux)
	health := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close") // a health probe never holds a connection open
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
	mux.HandleFunc("GET /healthz", health)
	mux.HandleFunc("GET /health", health) // the spelling other servers (vLLM, SGLang) answer

	mux.HandleFunc("GET /readyz", a.handleReady)
	mux.HandleFunc("GET /v1/limits", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, a.cfg.Backend.Limits())
	})
	if a.cfg.Metrics != nil {
		mux.Handle("GET /metrics", a.cfg.Metrics)
	}
	mux.HandleFunc("GET /v1/admin/workers", a.admin(a.handleWorkers))
	mux.HandleFunc("POST /v1/admin/workers/{rank}/kill", a.admin(a.handleKill))
	return a.recoverer(a.auth(jsonRouteErrors(mux, oa)))
}

// byID sends a request whose {id} the OpenAI adapter owns to it, others to native.
func (a *API) byID(native http.HandlerFunc, oa func(OpenAI) http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if o := a.cfg.OpenAI; o != nil && o.Owns(r.PathValue("id")) {
			oa(o)(w, r)
			return
		}
		native(w, r)
	}
}

// recoverer turns a handler panic into a 500 JSON error instead of a dropped connection.
func (a *API) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("handler panic", "path", r.URL.Path, "panic", v)
				writeError(w, http.StatusInternalServerError, "internal", fmt.Errorf("internal error"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// auth requires "Authorization: Bearer TOKEN" on everything but /healthz (/health), /readyz and the
// web page's files when a token is configured.
func (a *API) auth(h http.Handler) http.Handler {
	if a.cfg.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !publicPath(r.URL.Path) && !tokenMatches(r.Header.Get("Authorization"), a.cfg.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vdpp"`)
			if o := a.cfg.OpenAI; o != nil && o.Route(r) {
				o.Fail(w, ErrUnauthorized, "")
				return
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", ErrUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ErrUnauthorized is a request without the right bearer token (401).
var ErrUnauthorized = errors.New("missing or wrong bearer token")

// publicPath reports whether p is served without the token: probes and the web page's own
// files (the page asks for the token and sends it on its API calls).
func publicPath(p string) bool {
	return p == "/healthz" || p == "/health" || p == "/readyz" || p == "/" || strings.HasPrefix(p, "/web/")
}

// admin restricts a handler to loopback clients (on top of the token, when one is set).
func (a *API) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			writeError(w, http.StatusForbidden, "forbidden", errors.New("admin endpoints answer loopback clients only"))
			return
		}
		h(w, r)
	}
}

// routeSubmit dispatches POST /v1/videos by body shape: JSON is an OpenAI create; a
// multipart body is read (within --max-body-bytes) and is the native submit when it has a
// native-only part (image, params: a native text-to-video job has prompt parts too), else
// an OpenAI create when any part has an OpenAI field name, else the native submit.
func (a *API) routeSubmit(w http.ResponseWriter, r *http.Request) {
	mt, mparams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	oa := a.cfg.OpenAI
	if oa != nil && mt == "application/json" {
		oa.Create(w, r, mt, nil)
		return
	}
	if oa == nil || mt != "multipart/form-data" || mparams["boundary"] == "" {
		a.handleSubmit(w, r)
		return
	}
	// A refusal before the body is read is answered in the shape of the API whose fields
	// its first parts carry.
	failAs := func(start []byte, err error) {
		if oa.IsCreate(start, mparams["boundary"]) {
			oa.Fail(w, err, "")
			return
		}
		a.fail(w, err)
	}
	if err := a.cfg.Backend.StorageOK(); err != nil { // do not read an upload that cannot be kept
		start, _ := io.ReadAll(io.LimitReader(r.Body, 8<<10))
		failAs(start, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.Limits.MaxBodyBytes))
	if err != nil {
		failAs(body, ReadError(err))
		return
	}
	if oa.IsCreate(body, mparams["boundary"]) {
		oa.Create(w, r, mt, body)
		return
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	a.handleSubmit(w, r)
}

func (a *API) handleSubmit(w http.ResponseWriter, r *http.Request) {
	if err := a.cfg.Backend.StorageOK(); err != nil { // do not read an upload that cannot be kept
		a.fail(w, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, a.cfg.Limits.MaxBodyBytes)
	p, in, err := a.readUpload(r)
	if err != nil {
		a.fail(w, err)
		return
	}
	st, err := a.cfg.Backend.Submit(p, in)
	if err != nil {
		a.fail(w, err)
		return
	}
	w.Header().Set("Location", "/v1/videos/"+st.ID)
	WriteJSON(w, http.StatusAccepted, st)
}

// readUpload parses the multipart body: an "image" part (PNG or JPEG) for an
// image-conditioned model, or a "prompt" part (and an optional "negative_prompt" part,
// text) for a text-to-video model, and an optional "params" part (JSON).
func (a *API) readUpload(r *http.Request) (job.Params, job.Input, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return job.Params{}, job.Input{}, fmt.Errorf("%w: want a multipart/form-data body with an image (or prompt) part and a params part", job.ErrBadParams)
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return job.Params{}, job.Input{}, fmt.Errorf("%w: %v", job.ErrBadParams, err)
	}
	m := a.cfg.Backend.Model()
	inputs := m.Description().Inputs()
	parts := map[string][]byte{} // the inputs' parts, by name
	var params []byte
	seenParams := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return job.Params{}, job.Input{}, ReadError(err)
		}
		name := part.FormName()
		in, isInput := inputs.Lookup(name)
		switch {
		case isInput:
			if parts[name] != nil {
				return job.Params{}, job.Input{}, fmt.Errorf("%w: two %s parts", job.ErrBadParams, name)
			}
			var b []byte
			if in.Kind == knob.TextInput {
				b, err = io.ReadAll(io.LimitReader(part, MaxFieldBytes+1))
				if err == nil && len(b) > MaxFieldBytes {
					return job.Params{}, job.Input{}, fmt.Errorf("%w: %s part over %d bytes", job.ErrTooLarge, name, MaxFieldBytes)
				}
			} else {
				b, err = io.ReadAll(part)
			}
			if err != nil {
				return job.Params{}, job.Input{}, ReadError(err)
			}
			parts[name] = append([]byte{}, b...) // an empty part is given, not absent
		case name == "params":
			if seenParams {
				return job.Params{}, job.Input{}, fmt.Errorf("%w: two params parts", job.ErrBadParams)
			}
			seenParams = true
			if params, err = io.ReadAll(io.LimitReader(part, maxParamsBytes+1)); err != nil {
				return job.Params{}, job.Input{}, ReadError(err)
			}
			if len(params) > maxParamsBytes {
				return job.Params{}, job.Input{}, fmt.Errorf("%w: params part over %d bytes", job.ErrTooLarge, maxParamsBytes)
			}
		default:
			return job.Params{}, job.Input{}, fmt.Errorf("%w: unknown form part %q (want %s and params)", job.ErrBadParams, name, strings.Join(inputs.Names(), ", "))
		}
	}
	text := func(name string) *string {
		if b, ok := parts[name]; ok {
			v := string(b)
			return &v
		}
		return nil
	}
	prompt, negative := text("prompt"), text("negative_prompt")
	var in job.Input
	if err := a.readImages(m.Description(), parts, &in); err != nil {
		return job.Params{}, job.Input{}, err
	}
	if m.TextConditioned() {
		switch {
		case prompt == nil:
			return job.Params{}, job.Input{}, fmt.Errorf("%w: no prompt part: the model is text-to-video", job.ErrBadParams)
		case strings.TrimSpace(*prompt) == "":
			return job.Params{}, job.Input{}, fmt.Errorf("%w: the prompt part is empty: the model makes a video from a prompt", job.ErrBadParams)
		}
		in.Prompt = &family.Prompt{Text: *prompt}
		if negative != nil {
			in.Prompt.Negative = *negative
		}
	} else if prompt != nil || negative != nil {
		return job.Params{}, job.Input{}, fmt.Errorf("%w: a prompt part: the model is image-conditioned (give an image part)", job.ErrBadParams)
	}
	p, err := m.ParseParams(params, a.cfg.Limits)
	if err != nil {
		return job.Params{}, job.Input{}, err
	}
	// The images' shapes against the job's video, then their pixels (the prepare's cost).
	for i, data := range [][]byte{in.Image, in.LastImage} {
		if data == nil {
			continue
		}
		px, err := a.cfg.Backend.CheckImage(data, p)
		if err != nil {
			if i == 1 {
				return job.Params{}, job.Input{}, fmt.Errorf("last_image part: %w", err)
			}
			return job.Params{}, job.Input{}, err
		}
		in.Pixels += px
	}
	in.Client = ClientOf(r)
	if err := a.cfg.Backend.CheckCost(p); err != nil {
		return job.Params{}, job.Input{}, err
	}
	return p, in, nil
}

// readImages checks a job's image parts (parts, by name) against what the model takes (d's
// Inputs of kind image: a part the model needs is required, one it takes none of refused)
// and puts them in in.
func (a *API) readImages(d family.Description, parts map[string][]byte, in *job.Input) error {
	kind := "image-conditioned"
	if d.TextDim > 0 {
		kind = "text-to-video"
		if d.ImageNeed() != family.NeedNone {
			kind = "image-to-video with a prompt"
		}
	}
	dst := map[string]*[]byte{"image": &in.Image, "last_image": &in.LastImage}
	for _, c := range d.Inputs().OfKind(knob.ImageInput) {
		data := parts[c.Name]
		switch {
		case data != nil && c.Need == knob.None && c.Name == "image" && d.TextDim > 0:
			return fmt.Errorf("%w: an image part: the model is text-to-video (give a prompt part)", job.ErrBadParams)
		case data != nil && c.Need == knob.None:
			return fmt.Errorf("%w: a %s part: the model takes none", job.ErrBadParams, c.Name)
		case data == nil && c.Need == knob.Required:
			return fmt.Errorf("%w: no %s part: the model is %s", job.ErrBadParams, c.Name, kind)
		case data == nil:
			continue
		}
		if _, _, err := a.cfg.Backend.ImageSize(data); err != nil {
			if c.Name == "image" {
				return err
			}
			return fmt.Errorf("%s part: %w", c.Name, err)
		}
		p, ok := dst[c.Name]
		if !ok {
			return fmt.Errorf("%w: a %s part: this server does not carry it to the model", job.ErrBadParams, c.Name)
		}
		*p = data
	}
	if in.LastImage != nil && in.Image == nil {
		return fmt.Errorf("%w: a last_image part without an image part", job.ErrBadParams)
	}
	return nil
}

func (a *API) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := a.cfg.Backend.Status(r.PathValue("id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, st)
}

func (a *API) handleCancel(w http.ResponseWriter, r *http.Request) {
	st, err := a.cfg.Backend.Cancel(r.PathValue("id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, st)
}

func (a *API) handleReady(w http.ResponseWriter, _ *http.Request) {
	joined, want := a.cfg.Backend.Ready()
	storage := "ok"
	if err := a.cfg.Backend.StorageOK(); err != nil {
		a.log.Error("storage unavailable", "err", err)
		storage = "unavailable"
	}
	ready := joined == want && storage == "ok"
	body := map[string]any{"ready": ready, "workers": joined, "nproc": want, "storage": storage}
	if !ready {
		WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	WriteJSON(w, http.StatusOK, body)
}

func (a *API) handleWorkers(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, a.cfg.Backend.Workers())
}

func (a *API) handleKill(w http.ResponseWriter, r *http.Request) {
	rank, err := strconv.Atoi(r.PathValue("rank"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_rank", fmt.Errorf("rank %q is not an integer", r.PathValue("rank")))
		return
	}
	if err := a.cfg.Backend.Kill(rank); err != nil {
		a.fail(w, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, map[string]int{"killed": rank})
}

// handleContent serves a finished job's video: MP4 (default), GIF (?format=gif) or the
// raw final latent (?format=latent: little-endian float32, shape in X-Latent-Shape).
func (a *API) handleContent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := a.cfg.Backend.Status(id)
	if err != nil {
		a.fail(w, err)
		return
	}
	if st.State != job.StateSucceeded {
		a.fail(w, fmt.Errorf("%w: job %s is %s", job.ErrNotReady, id, st.State))
		return
	}
	if k, ok := OtherQuery(r, "format"); ok {
		writeError(w, http.StatusBadRequest, "bad_query", fmt.Errorf("unknown query parameter %q (the native API takes format=mp4|gif|latent; variant is the OpenAI API's, on a video_ id)", k))
		return
	}
	format := r.URL.Query().Get("format")
	switch format {
	case "", "mp4":
		ServeOutput(w, r, a.cfg.Backend, id, "output.mp4", "video/mp4", time.Time{}, a.fail)
	case "gif":
		ServeOutput(w, r, a.cfg.Backend, id, "output.gif", "image/gif", time.Time{}, a.fail)
	case "latent":
		b, shape, err := a.cfg.Backend.Latent(id)
		if err != nil {
			a.fail(w, ReadFailed(a.cfg.Backend, id, err))
			return
		}
		parts := make([]string, len(shape))
		for i, d := range shape {
			parts[i] = strconv.Itoa(d)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Latent-Shape", strings.Join(parts, ","))
		w.Write(b)
	default:
		writeError(w, http.StatusBadRequest, "bad_format", fmt.Errorf("unknown format %q (want mp4, gif or latent)", format))
	}
}

// OtherQuery returns a query parameter of r other than those allowed, if there is one (so a
// parameter of the other API is refused, not ignored).
func OtherQuery(r *http.Request, allowed ...string) (string, bool) {
	for k := range r.URL.Query() {
		if !slices.Contains(allowed, k) {
			return k, true
		}
	}
	return "", false
}

// ServeOutput serves job id's rendered file name (Backend.Output renders it first when
// missing; the render outlives the request that started it, as others may wait on it).
// fail answers errors in the caller's API shape; a job that left while its file was read
// is a 404.
func ServeOutput(w http.ResponseWriter, r *http.Request, b Backend, id, name, ctype string, modTime time.Time, fail func(http.ResponseWriter, error)) {
	path, err := b.Output(r.Context(), id, name)
	if err != nil {
		fail(w, ReadFailed(b, id, err))
		return
	}
	// The response's write deadline counts from here, not from before the render.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(httpWriteTimeout))
	f, err := os.Open(path)
	if err != nil {
		fail(w, ReadFailed(b, id, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, name, modTime, f)
}
