package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
)

// maxFieldBytes bounds one text field of an OpenAI create (the prompt included).
const maxFieldBytes = httpapi.MaxFieldBytes

// openAIRequest is an OpenAI create request, from a JSON or a multipart body.
type openAIRequest struct {
	Model, Prompt string
	// Image is input_reference: a file part, or the bytes of an image_url data: URL.
	Image []byte
	// Fields are the generation fields (seconds, size, num_inference_steps, ...) as text,
	// numbers as written.
	Fields map[string]string
}

// openAIParamFields are the generation fields Params maps; anything else in a
// create request is refused.
var openAIParamFields = map[string]bool{
	"seconds": true, "size": true, "num_inference_steps": true, "guidance_scale": true,
	"negative_prompt": true, "seed": true, "num_frames": true, "fps": true,
	"motion_bucket_id": true, "noise_aug_strength": true, "min_guidance": true, "max_guidance": true,
	"decode_chunk_size": true, "width": true, "height": true, "n": true,
	"window": true, "overlap": true, "blend": true,
	"cache": true, "cache_threshold": true, "cache_interval": true, "cache_branch": true, "cache_steps": true,
	"scheduler": true, "flow_shift": true, "lora": true, "lora_2": true,
}

func badField(param, format string, args ...any) *openAIError {
	return oaErr(http.StatusBadRequest, "invalid_value", param, format, args...)
}

// parseOpenAIJSON reads a JSON create body: {"model", "prompt", "input_reference":
// {"image_url": "data:..."}, "seconds", "size", ...}. Numbers may be JSON numbers or
// strings (the SDK's seconds is a string); null is as absent.
func parseOpenAIJSON(body []byte) (openAIRequest, error) {
	req := openAIRequest{Fields: map[string]string{}}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		return req, oaErr(http.StatusBadRequest, "invalid_json", "", "the body is not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, oaErr(http.StatusBadRequest, "invalid_json", "", "trailing data after the JSON object")
	}
	for k, raw := range m {
		if string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		if k == "input_reference" {
			img, err := jsonInputReference(raw)
			if err != nil {
				return req, err
			}
			req.Image = img
			continue
		}
		v, err := jsonScalar(k, raw)
		if err != nil {
			return req, err
		}
		if err := req.set(k, v); err != nil {
			return req, err
		}
	}
	return req, nil
}

// jsonScalar is a JSON string's text or a JSON number as written.
func jsonScalar(k string, raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) == nil {
		return n.String(), nil
	}
	return "", badField(k, "%s must be a string or a number", k)
}

// jsonInputReference decodes {"image_url": "data:..."} (or the data URL as a string).
func jsonInputReference(raw json.RawMessage) ([]byte, error) {
	var ref struct {
		ImageURL string `json:"image_url"`
		FileID   string `json:"file_id"`
	}
	var url string
	if json.Unmarshal(raw, &url) != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			return nil, badField("input_reference", "input_reference must be a file or {\"image_url\": \"data:...\"}: %v", err)
		}
		if ref.FileID != "" {
			return nil, badField("input_reference", "input_reference.file_id is not supported (this server has no files API): send the image itself")
		}
		url = ref.ImageURL
	}
	return decodeDataURL(url)
}

// decodeDataURL decodes "data:[type][;base64],DATA". The server fetches nothing, so any
// other URL is refused.
func decodeDataURL(url string) ([]byte, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return nil, badField("input_reference", "input_reference.image_url must be a data: URL (the server fetches nothing)")
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, badField("input_reference", "input_reference.image_url: a data: URL without a comma")
	}
	if !strings.HasSuffix(meta, ";base64") {
		return nil, badField("input_reference", "input_reference.image_url: only base64 data: URLs are accepted")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(data); err != nil {
			return nil, badField("input_reference", "input_reference.image_url: bad base64: %v", err)
		}
	}
	return b, nil
}

// set records field k = v: the model and the prompt, or a generation field.
func (req *openAIRequest) set(k, v string) error {
	if len(v) > maxFieldBytes {
		return badField(k, "%s is over %d bytes", k, maxFieldBytes)
	}
	switch {
	case k == "model":
		req.Model = v
	case k == "prompt":
		req.Prompt = v
	case openAIParamFields[k]:
		req.Fields[k] = v
	default:
		return oaErr(http.StatusBadRequest, "unknown_parameter", k, "unknown parameter %q", k)
	}
	return nil
}

// parseOpenAIMultipart reads a multipart create body (the SDK's encoding): text fields,
// input_reference as a file part, or input_reference[image_url] as a data: URL.
func parseOpenAIMultipart(body []byte, boundary string) (openAIRequest, error) {
	req := openAIRequest{Fields: map[string]string{}}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return req, oaErr(http.StatusBadRequest, "invalid_multipart", "", "reading the multipart body: %v", err)
		}
		name := part.FormName()
		if seen[name] {
			return req, badField(name, "%s is given twice", name)
		}
		seen[name] = true
		b, err := io.ReadAll(part)
		if err != nil {
			return req, oaErr(http.StatusBadRequest, "invalid_multipart", "", "reading the multipart body: %v", err)
		}
		switch name {
		case "input_reference":
			if part.FileName() == "" {
				// A text field: the data URL itself.
				if req.Image, err = decodeDataURL(string(b)); err != nil {
					return req, err
				}
				continue
			}
			req.Image = b
		case "input_reference[image_url]":
			if req.Image, err = decodeDataURL(string(b)); err != nil {
				return req, err
			}
		case "input_reference[file_id]":
			return req, badField("input_reference", "input_reference.file_id is not supported (this server has no files API): send the image itself")
		default:
			if err := req.set(name, string(b)); err != nil {
				return req, err
			}
		}
		if seen["input_reference"] && (seen["input_reference[image_url]"] || seen["input_reference[file_id]"]) {
			return req, badField("input_reference", "input_reference is given twice")
		}
	}
	return req, nil
}

// decimalPattern is a number as JSON writes one (ParseFloat alone also takes "1_0", hex and
// "Inf").
var decimalPattern = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// sizePattern is OpenAI's size: "WIDTHxHEIGHT".
var sizePattern = regexp.MustCompile(`^([0-9]{1,5})x([0-9]{1,5})$`)

// openAIIntFields map an OpenAI (or SGLang / vLLM-Omni) integer field to the native one.
var openAIIntFields = []struct{ from, to string }{
	{"num_inference_steps", "steps"}, {"seed", "seed"}, {"motion_bucket_id", "motion_bucket_id"},
	{"decode_chunk_size", "decode_chunk_size"}, {"window", "window"}, {"overlap", "overlap"},
	{"cache_interval", "cache_interval"}, {"cache_branch", "cache_branch"},
}

// openAIFloatFields map float fields to native ones (guidance_scale is special-cased).
var openAIFloatFields = []struct{ from, to string }{
	{"min_guidance", "min_guidance"}, {"max_guidance", "max_guidance"}, {"noise_aug_strength", "noise_aug_strength"},
	{"cache_threshold", "cache_threshold"}, {"flow_shift", "flow_shift"},
}

// Params maps the generation fields of an OpenAI create request to a job's Params
// for m (over its defaults, checked against lim and by the model, as its ParseParams):
//
//	size "WxH"            -> width W, height H (default: the model's native size)
//	width, height         -> width, height (over size's; SGLang's and vLLM-Omni's fields)
//	n                     -> must be 1
//	fps                   -> fps (default: the model's)
//	num_frames            -> num_frames
//	seconds               -> num_frames = round(seconds * fps), at least 1, unless
//	                         num_frames is given (default: the model's frame count)
//	num_inference_steps   -> steps
//	guidance_scale        -> max_guidance, and min_guidance lowered to it when above;
//	                         guidance_scale for a text-to-video model
//	seed                  -> seed
//	negative_prompt       -> a text-to-video model's negative prompt (default ""); unused
//	                         by image-conditioned models
//	motion_bucket_id, noise_aug_strength, min_guidance, max_guidance, decode_chunk_size,
//	window, overlap, blend -> the native field of the same name (window, overlap and
//	                         blend cut a video longer than the model's native length)
//	cache, cache_threshold, cache_interval, cache_branch
//	                      -> the native step cache fields (docs/caching.md)
//	cache_steps "0-2,5"   -> cache_steps, a static schedule's steps
//	scheduler, flow_shift -> the sampler (one the model offers) and a flow model's shift
//	lora, lora_2 "a.safetensors:0.8,b.safetensors"
//	                      -> the LoRAs (files of the server's --lora-dir, strength 1 unless
//	                         given), lora_2 a two-expert model's second expert's
//
// The fields are checked one after another (size, fps, frames, then the rest), so an
// error names the field that the model or the server's limits refuse: an *openAIError
// with that param (400).
func Params(m httpapi.Model, fields map[string]string, lim job.Limits) (job.Params, error) {
	native := map[string]any{}
	// Each field is checked against the limit that concerns it only (a model default over
	// another limit is reported at the end, naming the field that would change it).
	only := map[string]job.Limits{
		"size": {MaxResolution: lim.MaxResolution}, "width": {MaxResolution: lim.MaxResolution},
		"height": {MaxResolution: lim.MaxResolution}, "fps": {MaxFrames: lim.MaxFrames},
		"num_frames": {MaxFrames: lim.MaxFrames}, "seconds": {MaxFrames: lim.MaxFrames},
		"num_inference_steps": {MaxSteps: lim.MaxSteps},
	}
	checkWith := func(param string, l job.Limits) (job.Params, error) {
		data, _ := json.Marshal(native)
		p, err := m.ParseParams(data, l)
		if err != nil {
			msg := strings.TrimPrefix(err.Error(), "serve: ")
			code := "invalid_value"
			if errors.Is(err, job.ErrTooLarge) {
				code = "over_limit"
			}
			if param != "" {
				msg = param + ": " + msg
			}
			return job.Params{}, oaErr(http.StatusBadRequest, code, param, "%s", msg)
		}
		return p, nil
	}
	check := func(param string) (job.Params, error) { return checkWith(param, only[param]) }
	def, err := check("defaults")
	if err != nil {
		return job.Params{}, err
	}
	integer := func(k string) (int64, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(fields[k]), 10, 64)
		if err != nil {
			return 0, badField(k, "%s %q must be an integer", k, fields[k])
		}
		return n, nil
	}
	number := func(k string) (float64, error) {
		v := strings.TrimSpace(fields[k])
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !decimalPattern.MatchString(v) || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, badField(k, "%s %q must be a number", k, fields[k])
		}
		return f, nil
	}
	if v, ok := fields["size"]; ok {
		m := sizePattern.FindStringSubmatch(strings.TrimSpace(v))
		if m == nil {
			return job.Params{}, badField("size", "size %q must be WIDTHxHEIGHT, e.g. %dx%d (this model's native size)", v, def.Width, def.Height)
		}
		w, _ := strconv.Atoi(m[1])
		h, _ := strconv.Atoi(m[2])
		native["width"], native["height"] = w, h
		if _, err := check("size"); err != nil {
			err.(*openAIError).Message += fmt.Sprintf(" (this model's native size is %dx%d)", def.Width, def.Height)
			return job.Params{}, err
		}
	}
	for _, k := range []string{"width", "height"} {
		if _, ok := fields[k]; !ok {
			continue
		}
		n, err := integer(k)
		if err != nil {
			return job.Params{}, err
		}
		native[k] = n
		if _, err := check(k); err != nil {
			err.(*openAIError).Message += fmt.Sprintf(" (this model's native size is %dx%d)", def.Width, def.Height)
			return job.Params{}, err
		}
	}
	if _, ok := fields["n"]; ok {
		if n, err := integer("n"); err != nil || n != 1 {
			return job.Params{}, badField("n", "n %q: this server makes one video per request", fields["n"])
		}
	}
	fps := def.FPS
	if _, ok := fields["fps"]; ok {
		n, err := integer("fps")
		if err != nil {
			return job.Params{}, err
		}
		native["fps"], fps = n, int(n)
		if _, err := check("fps"); err != nil {
			return job.Params{}, err
		}
	}
	if _, ok := fields["num_frames"]; ok {
		n, err := integer("num_frames")
		if err != nil {
			return job.Params{}, err
		}
		native["num_frames"] = n
		if _, err := check("num_frames"); err != nil {
			return job.Params{}, err
		}
	} else if _, ok := fields["seconds"]; ok {
		sec, err := number("seconds")
		if err != nil {
			return job.Params{}, err
		}
		if sec <= 0 || sec > 3600 {
			return job.Params{}, badField("seconds", "seconds %v must be in (0, 3600]", sec)
		}
		frames := max(1, int(math.Round(sec*float64(fps))))
		if t := m.Description().FrameMultiple; t > 1 {
			// A causal VAE takes 1 + t·k frames (Wan's 4): the nearest such count.
			frames = 1 + int(math.Round(float64(frames-1)/float64(t)))*t
		}
		native["num_frames"] = frames
		if _, err := check("seconds"); err != nil {
			err.(*openAIError).Message = fmt.Sprintf("seconds %v is %d frames at %d fps, which this server cannot make: %s",
				sec, frames, fps, err.(*openAIError).Message)
			return job.Params{}, err
		}
	}
	for _, f := range openAIIntFields {
		if _, ok := fields[f.from]; !ok {
			continue
		}
		n, err := integer(f.from)
		if err != nil {
			return job.Params{}, err
		}
		native[f.to] = n
		if _, err := check(f.from); err != nil {
			return job.Params{}, err
		}
	}
	for _, f := range openAIFloatFields {
		if _, ok := fields[f.from]; !ok {
			continue
		}
		x, err := number(f.from)
		if err != nil {
			return job.Params{}, err
		}
		native[f.to] = x
		if _, err := check(f.from); err != nil {
			return job.Params{}, err
		}
	}
	if b, ok := fields["blend"]; ok {
		native["blend"] = strings.TrimSpace(b)
		if _, err := check("blend"); err != nil {
			return job.Params{}, err
		}
	}
	for _, k := range []string{"lora", "lora_2"} {
		v, ok := fields[k]
		if !ok {
			continue
		}
		var specs []lora.Spec
		if err := (lora.Flag{Specs: &specs}).Set(strings.TrimSpace(v)); err != nil {
			return job.Params{}, badField(k, "%s %q: want NAME[:STRENGTH] separated by commas", k, v)
		}
		native[k] = specs
		if _, err := check(k); err != nil {
			return job.Params{}, err
		}
	}
	if sc, ok := fields["scheduler"]; ok {
		native["scheduler"] = strings.TrimSpace(sc)
		if _, err := check("scheduler"); err != nil {
			return job.Params{}, err
		}
	}
	if c, ok := fields["cache"]; ok {
		native["cache"] = strings.TrimSpace(c)
	}
	if c, ok := fields["cache_steps"]; ok {
		steps, err := pipeline.ParseSteps(c)
		if err != nil {
			return job.Params{}, badField("cache_steps", "cache_steps %q: want steps and ranges, \"0-2,5\"", c)
		}
		native["cache_steps"] = steps
	}
	if _, ok := native["cache"]; ok {
		if _, err := check("cache"); err != nil {
			return job.Params{}, err
		}
	}
	if _, ok := fields["guidance_scale"]; ok {
		g, err := number("guidance_scale")
		if err != nil {
			return job.Params{}, err
		}
		if m.TextConditioned() {
			native["guidance_scale"] = g // a text-to-video model's CFG scale (Wan)
		} else {
			native["max_guidance"] = g
			if _, given := fields["min_guidance"]; !given {
				native["min_guidance"] = math.Min(def.MinGuidance, g)
			}
		}
		if _, err := check("guidance_scale"); err != nil {
			return job.Params{}, err
		}
	}
	p, err := checkWith("", lim)
	if err != nil {
		// A model default over a server limit: name the field that sets it.
		for _, param := range []string{"size", "seconds", "num_inference_steps"} {
			if _, perr := check(param); perr != nil {
				perr.(*openAIError).Message += " (the model's default: give " + param + ")"
				return job.Params{}, perr
			}
		}
	}
	return p, err
}

// costParam is the OpenAI field that sets the native parameter a CostError names:
// size, num_inference_steps, and num_frames or seconds, whichever the request gave.
func costParam(native string, fields map[string]string) string {
	switch native {
	case "steps":
		return "num_inference_steps"
	case "num_frames":
		if _, ok := fields["num_frames"]; !ok {
			if _, ok := fields["seconds"]; ok {
				return "seconds"
			}
		}
	case "size":
		if _, ok := fields["size"]; !ok {
			for _, k := range []string{"width", "height"} {
				if _, ok := fields[k]; ok {
					return k
				}
			}
		}
	}
	return native
}
