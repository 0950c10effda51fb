package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // uploads may be JPEG
	_ "image/png"  // or PNG
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/video"
)

// maxParamsBytes bounds the JSON part of an upload.
const maxParamsBytes = 64 << 10

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	// Code is a stable machine-readable reason.
	Code string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code string, err error) {
	writeJSON(w, status, apiError{Error: err.Error(), Code: code})
}

// errorStatus maps an error to its HTTP status and code.
func errorStatus(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "body_too_large"
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, ErrQueueFull):
		return http.StatusTooManyRequests, "queue_full"
	case errors.Is(err, ErrCostLimit):
		return http.StatusRequestEntityTooLarge, "over_cost_limit"
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "over_limit"
	case errors.Is(err, ErrBadParams):
		return http.StatusBadRequest, "bad_params"
	case errors.Is(err, video.ErrNotImage):
		return http.StatusUnsupportedMediaType, "not_image"
	case errors.Is(err, ErrFinished), errors.Is(err, ErrNotReady):
		return http.StatusConflict, "conflict"
	case errors.Is(err, ErrClosed):
		return http.StatusServiceUnavailable, "shutting_down"
	case errors.Is(err, ErrStorage) && isDiskFull(err):
		return http.StatusInsufficientStorage, "insufficient_storage"
	case errors.Is(err, ErrStorage):
		return http.StatusServiceUnavailable, "storage_unavailable"
	case errors.Is(err, video.ErrNoFFmpeg):
		return http.StatusNotImplemented, "no_ffmpeg"
	}
	return http.StatusInternalServerError, "internal"
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	st, code := errorStatus(err)
	if st >= 500 {
		s.log.Error("request failed", "err", err)
	}
	if st == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(s.coord.RetryAfter()))
	}
	if st >= 500 {
		if st == http.StatusServiceUnavailable || st == http.StatusInsufficientStorage {
			w.Header().Set("Retry-After", "5")
		}
		err = errors.New(publicMessage(code)) // the cause, with its paths, is logged above
	}
	writeError(w, st, code, err)
}

// failRead answers a failed read of job id's files. A job that expired after the handler
// looked it up has left memory before its files go (Coordinator.Expire), so the failure
// is answered as for an unknown id (404), not as a server error.
func (s *Server) failRead(w http.ResponseWriter, id string, err error) {
	if _, serr := s.coord.Status(id); errors.Is(serr, ErrNotFound) {
		err = serr
	}
	s.fail(w, err)
}

// Handler returns the server's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.registerOpenAI(mux) // the /v1/videos routes of both APIs (openai.go) and the web page
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close") // a health probe never holds a connection open
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("GET /v1/limits", s.handleLimits)
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /v1/admin/workers", s.admin(s.handleWorkers))
	mux.HandleFunc("POST /v1/admin/workers/{rank}/kill", s.admin(s.handleKill))
	return s.recoverer(s.auth(jsonRouteErrors(mux)))
}

// recoverer turns a handler panic into a 500 JSON error instead of a dropped connection.
func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", v)
				writeError(w, http.StatusInternalServerError, "internal", fmt.Errorf("internal error"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// auth requires "Authorization: Bearer TOKEN" on everything but /healthz, /readyz and the
// web page's files when a token is configured.
func (s *Server) auth(h http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !publicPath(r.URL.Path) && !tokenMatches(r.Header.Get("Authorization"), s.cfg.Token) {
			s.unauthorized(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admin restricts a handler to loopback clients (on top of the token, when one is set).
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			writeError(w, http.StatusForbidden, "forbidden", errors.New("admin endpoints answer loopback clients only"))
			return
		}
		h(w, r)
	}
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	if err := s.coord.StorageOK(); err != nil { // do not read an upload that cannot be kept
		s.fail(w, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxBodyBytes)
	p, img, pr, err := s.readUpload(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	var st Status
	if pr != nil {
		st, err = s.coord.SubmitPrompt(p, *pr)
	} else {
		st, err = s.coord.Submit(p, img)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Location", "/v1/videos/"+st.ID)
	writeJSON(w, http.StatusAccepted, st)
}

// readUpload parses the multipart body: an "image" part (PNG or JPEG) for an
// image-conditioned model, or a "prompt" part (and an optional "negative_prompt" part,
// text) for a text-to-video model, and an optional "params" part (JSON).
func (s *Server) readUpload(r *http.Request) (Params, []byte, *family.Prompt, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return Params{}, nil, nil, fmt.Errorf("%w: want a multipart/form-data body with an image (or prompt) part and a params part", ErrBadParams)
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return Params{}, nil, nil, fmt.Errorf("%w: %v", ErrBadParams, err)
	}
	var img, params []byte
	var prompt, negative *string
	seenParams := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Params{}, nil, nil, wrapRead(err)
		}
		switch part.FormName() {
		case "prompt", "negative_prompt":
			dst := &prompt
			if part.FormName() == "negative_prompt" {
				dst = &negative
			}
			if *dst != nil {
				return Params{}, nil, nil, fmt.Errorf("%w: two %s parts", ErrBadParams, part.FormName())
			}
			b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if err != nil {
				return Params{}, nil, nil, wrapRead(err)
			}
			if len(b) > maxFieldBytes {
				return Params{}, nil, nil, fmt.Errorf("%w: %s part over %d bytes", ErrTooLarge, part.FormName(), maxFieldBytes)
			}
			v := string(b)
			*dst = &v
		case "image":
			if img != nil {
				return Params{}, nil, nil, fmt.Errorf("%w: two image parts", ErrBadParams)
			}
			if img, err = io.ReadAll(part); err != nil {
				return Params{}, nil, nil, wrapRead(err)
			}
		case "params":
			if seenParams {
				return Params{}, nil, nil, fmt.Errorf("%w: two params parts", ErrBadParams)
			}
			seenParams = true
			if params, err = io.ReadAll(io.LimitReader(part, maxParamsBytes+1)); err != nil {
				return Params{}, nil, nil, wrapRead(err)
			}
			if len(params) > maxParamsBytes {
				return Params{}, nil, nil, fmt.Errorf("%w: params part over %d bytes", ErrTooLarge, maxParamsBytes)
			}
		default:
			return Params{}, nil, nil, fmt.Errorf("%w: unknown form part %q (want image or prompt, negative_prompt, and params)", ErrBadParams, part.FormName())
		}
	}
	var pr *family.Prompt
	if s.gen.TextConditioned() {
		switch {
		case img != nil:
			return Params{}, nil, nil, fmt.Errorf("%w: an image part: the model is text-to-video (give a prompt part)", ErrBadParams)
		case prompt == nil:
			return Params{}, nil, nil, fmt.Errorf("%w: no prompt part: the model is text-to-video", ErrBadParams)
		}
		pr = &family.Prompt{Text: *prompt}
		if negative != nil {
			pr.Negative = *negative
		}
	} else {
		switch {
		case prompt != nil || negative != nil:
			return Params{}, nil, nil, fmt.Errorf("%w: a prompt part: the model is image-conditioned (give an image part)", ErrBadParams)
		case img == nil:
			return Params{}, nil, nil, fmt.Errorf("%w: no image part", ErrBadParams)
		}
		if err := CheckImage(img, s.cfg.Limits.MaxImagePixels); err != nil {
			return Params{}, nil, nil, err
		}
	}
	p, err := s.gen.ParseParams(params, s.cfg.Limits)
	if err != nil {
		return Params{}, nil, nil, err
	}
	if err := s.checkCost(p); err != nil {
		return Params{}, nil, nil, err
	}
	return p, img, pr, nil
}

func wrapRead(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return fmt.Errorf("%w: reading the upload: %v", ErrBadParams, err)
}

// CheckImage verifies that data is a decodable PNG or JPEG of at most maxPixels pixels
// (checked from the header before decoding, so a decompression bomb costs nothing; the
// pixels are decoded within the process's decode memory budget).
func CheckImage(data []byte, maxPixels int) error {
	_, release, err := decodeImage(context.Background(), data, maxPixels)
	if err == nil {
		release()
	}
	return err
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.coord.Status(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	st, err := s.coord.Cancel(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, st)
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	joined, want := s.coord.Ready()
	storage := "ok"
	if err := s.coord.StorageOK(); err != nil {
		s.log.Error("storage unavailable", "err", err)
		storage = "unavailable"
	}
	ready := joined == want && storage == "ok"
	body := map[string]any{"ready": ready, "workers": joined, "nproc": want, "storage": storage}
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) handleWorkers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.pool.Workers())
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	rank, err := strconv.Atoi(r.PathValue("rank"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_rank", fmt.Errorf("rank %q is not an integer", r.PathValue("rank")))
		return
	}
	if err := s.pool.Kill(rank); err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]int{"killed": rank})
}

// handleContent serves a finished job's video: MP4 (default), GIF (?format=gif) or the
// raw final latent (?format=latent: little-endian float32, shape in X-Latent-Shape).
func (s *Server) handleContent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := s.coord.Status(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	if st.State != StateSucceeded {
		s.fail(w, fmt.Errorf("%w: job %s is %s", ErrNotReady, id, st.State))
		return
	}
	format := r.URL.Query().Get("format")
	switch format {
	case "", "mp4":
		s.serveRendered(w, r, id, st, "output.mp4", "video/mp4")
	case "gif":
		s.serveRendered(w, r, id, st, "output.gif", "image/gif")
	case "latent":
		shape, err := s.coord.latentShape(id)
		if err != nil {
			s.fail(w, err)
			return
		}
		if h := s.hooks.contentRead; h != nil {
			h(id)
		}
		b, err := s.store.ReadFile(id, finalFile)
		if err != nil {
			s.failRead(w, id, err)
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

func (s *Server) serveRendered(w http.ResponseWriter, r *http.Request, id string, st Status, name, ctype string) {
	dir, err := s.store.JobDir(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	path := filepath.Join(dir, name)
	s.serveAsset(w, r, id, path, ctype, time.Time{}, s.failRead, func(ctx context.Context) error {
		return s.render(ctx, id, st, path)
	})
}

// serveAsset serves a job's file at path, rendering it first when it is missing.
// Concurrent first downloads share one render; one that finds its file still missing
// afterwards (the render wrote another) renders again. The render outlives the request
// that started it (others may be waiting on it); Close still cancels it. failRead reports
// errors in the caller's API shape.
func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, id, path, ctype string, modTime time.Time,
	failRead func(http.ResponseWriter, string, error), render func(context.Context) error) {
	if h := s.hooks.contentRead; h != nil {
		h(id)
	}
	for try := 0; try < 2; try++ {
		if _, err := os.Stat(path); err == nil {
			break
		}
		shared := context.WithoutCancel(r.Context())
		if err := s.flights.do(r.Context(), id, func() error { return render(shared) }); err != nil {
			failRead(w, id, err)
			return
		}
		// The response's write deadline counts from here, not from before the render.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(httpWriteTimeout))
	}
	f, err := os.Open(path)
	if err != nil {
		failRead(w, id, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, filepath.Base(path), modTime, f)
}

// render decodes a finished job's final latent and writes path (output.mp4 or output.gif);
// the other format is written from the same frames when it is missing, so a model whose
// decode is expensive (the SVD VAE) decodes each job once.
func (s *Server) render(ctx context.Context, id string, st Status, path string) error {
	return s.withDecodedFrames(ctx, id, st, func(list []image.Image) error {
		if err := s.writeRendered(path, list, st.Params.FPS); err != nil {
			return err
		}
		other := filepath.Join(filepath.Dir(path), "output.gif")
		if strings.HasSuffix(path, ".gif") {
			other = filepath.Join(filepath.Dir(path), "output.mp4")
		}
		if _, err := os.Stat(other); err != nil {
			if err := s.writeRendered(other, list, st.Params.FPS); err != nil {
				s.log.Warn("render second format", "id", id, "path", other, "err", err)
			}
		}
		return nil
	})
}

// withDecodedFrames decodes a finished job's final latent into frames and hands them to
// use, all counted as one render (Close waits for it; closing the server cancels the decode).
func (s *Server) withDecodedFrames(rctx context.Context, id string, st Status, use func([]image.Image) error) error {
	defer memRelease.soon() // the decoded frames are garbage once used
	if err := s.beginRender(); err != nil {
		return err
	}
	defer s.renders.Done()
	ctx, cancel := context.WithCancel(rctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	shape, err := s.coord.latentShape(id)
	if err != nil {
		return err
	}
	b, err := s.store.ReadFile(id, finalFile)
	if err != nil {
		return err
	}
	lat, err := DecodeLatent(b, shape)
	if err != nil {
		return err
	}
	frames, err := s.gen.Decode(ctx, lat, st.Params)
	if err != nil {
		if s.ctx.Err() != nil {
			return fmt.Errorf("%w: decode of job %s: %v", ErrClosed, id, err)
		}
		return err
	}
	imgs, err := video.FramesFromTensor(frames)
	if err != nil {
		return err
	}
	list := make([]image.Image, len(imgs))
	for i, m := range imgs {
		list[i] = m
	}
	return use(list)
}

// writeRendered writes frames as a GIF (path ends in .gif) or an MP4.
func (s *Server) writeRendered(path string, list []image.Image, fps int) error {
	if strings.HasSuffix(path, ".gif") {
		var buf bytes.Buffer
		if err := video.WriteGIF(&buf, list, float64(fps)); err != nil {
			return err
		}
		return writeSynced(path, buf.Bytes())
	}
	return s.mp4(path, list, float64(fps))
}
