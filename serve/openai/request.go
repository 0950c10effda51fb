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
	"slices"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
)

// maxFieldBytes bounds one text field of an OpenAI create (the prompt included).
const maxFieldBytes = httpapi.MaxFieldBytes

// openAIRequest is an OpenAI create request, from a JSON or a multipart body.
type openAIRequest struct {
	Model, Prompt string
	// ModelGiven says the request named a model ("" included, which no model is).
	ModelGiven bool
	// Image is input_reference: a file part, or the bytes of an image_url data: URL.
	Image []byte
	// Fields are the generation fields (seconds, size, num_inference_steps, ...) as text,
	// numbers as written.
	Fields map[string]string
}

func badField(param, format string, args ...any) *openAIError {
	return oaErr(http.StatusBadRequest, "invalid_value", param, format, args...)
}

// parseOpenAIJSON reads a JSON create body: {"model", "prompt", "input_reference":
// {"image_url": "data:..."}, "seconds", "size", ...}. Numbers may be JSON numbers or
// strings (the SDK's seconds is a string); null is as absent.
func parseOpenAIJSON(body []byte) (openAIRequest, error) {
	req := openAIRequest{Fields: map[string]string{}}
	members, err := knob.Object(body)
	if err != nil {
		return req, oaErr(http.StatusBadRequest, "invalid_json", "", "%v", err)
	}
	for _, mem := range members {
		k, raw := mem.Key, mem.Value
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

// jsonScalar is a JSON string's text, a JSON number as written, or true or false.
func jsonScalar(k string, raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return strconv.FormatBool(b), nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) == nil {
		return n.String(), nil
	}
	return "", badField(k, "%s must be a string, a number, or true or false", k)
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

// set records field k = v: the model and the prompt, or a generation field (Params says
// which the served model takes).
func (req *openAIRequest) set(k, v string) error {
	if len(v) > maxFieldBytes {
		return badField(k, "%s is over %d bytes", k, maxFieldBytes)
	}
	switch k {
	case "model":
		if req.ModelGiven {
			return badField(k, "%s is given twice", k)
		}
		req.Model, req.ModelGiven = v, true
	case "prompt":
		req.Prompt = v
	default:
		if _, dup := req.Fields[k]; dup {
			return badField(k, "%s is given twice", k)
		}
		req.Fields[k] = v
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

// sizePattern is OpenAI's size: "WIDTHxHEIGHT", exactly (no spaces, no signs).
var sizePattern = regexp.MustCompile(`^([1-9][0-9]{0,4})x([1-9][0-9]{0,4})$`)

// Fields beside the knobs that an OpenAI create takes: its own spellings of the video's size
// and length, the number of videos, and a text-to-video model's negative prompt.
const (
	fieldSize    = "size"
	fieldSeconds = "seconds"
	fieldN       = "n"
	fieldLoRA    = "lora"
	fieldLoRA2   = "lora_2"
)

// fieldNegative is the negative prompt's OpenAI field (knob.AllInputs' negative_prompt).
var fieldNegative = func() string {
	in, _ := knob.AllInputs.Lookup("negative_prompt")
	return in.OpenAI
}()

// CreateFields lists every generation field an OpenAI create takes for a model of knob
// table t: size, seconds, n, negative_prompt, lora, lora_2, and each knob's OpenAI names (its OpenAI
// field, else its JSON name; knob.Knob.OpenAINames).
func CreateFields(t knob.Table) []string {
	out := []string{fieldSize, fieldSeconds, fieldN, fieldNegative, fieldLoRA, fieldLoRA2}
	for _, k := range t {
		out = append(out, k.OpenAINames()...)
	}
	return out
}

// Params maps the generation fields of an OpenAI create request to a job's Params for m:
// each field a knob of the model's table by its OpenAI name (knob.Knob.OpenAINames:
// num_inference_steps sets steps; an image-to-video model's guidance_scale its last frame's
// guidance, max_guidance), read exactly as the knob's kind (knob.Table.SetText), and the
// OpenAI spellings of the video:
//
//	size "WxH"  -> width W, height H (default: the model's size)
//	seconds     -> num_frames = round(seconds * fps), at least 1 (a causal VAE's nearest
//	               1 + k·T frames), when num_frames is not given
//	n           -> must be 1
//	negative_prompt -> a text-to-video model's negative prompt (Create reads it)
//
// The knobs given are resolved over the model's defaults as the native API resolves them
// (httpapi.Model.ResolveParams). A field the model does not take, one given twice (directly
// or through another spelling of the same knob), a value of the wrong kind or out of range,
// or a job the model or the server's limits refuse is an *openAIError (400) whose param is
// the field at fault.
func Params(m httpapi.Model, fields map[string]string, lim job.Limits) (job.Params, error) {
	desc := m.Description()
	t := desc.Knobs
	var p family.Params
	given := knob.Given{}
	// from is the field that set each knob, named by its errors.
	from := map[string]string{}
	setKnob := func(field, name, text string) error {
		if prev, dup := from[name]; dup {
			return badField(field, "%s and %s both set %s: give one", prev, field, name)
		}
		from[name] = field
		if err := t.SetText(&p, given, name, text); err != nil {
			return knobErr(field, err)
		}
		return nil
	}
	if v, ok := fields[fieldSize]; ok {
		sm := sizePattern.FindStringSubmatch(v)
		if sm == nil {
			return job.Params{}, badField(fieldSize, "size %q must be WIDTHxHEIGHT, e.g. %dx%d (this model's default size)", v, desc.Defaults.Width, desc.Defaults.Height)
		}
		if err := setKnob(fieldSize, "width", sm[1]); err != nil {
			return job.Params{}, err
		}
		if err := setKnob(fieldSize, "height", sm[2]); err != nil {
			return job.Params{}, err
		}
	}
	if v, ok := fields[fieldN]; ok && v != "1" {
		return job.Params{}, badField(fieldN, "n %q: this server makes one video per request", v)
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, field := range names {
		switch field {
		case fieldSize, fieldSeconds, fieldN, fieldNegative:
			continue
		case fieldLoRA, fieldLoRA2:
			// The LoRAs: files of the server's folder (not knobs: the server checks them).
			specs := &p.LoRA
			if field == fieldLoRA2 {
				specs = &p.LoRA2
			}
			if err := (lora.Flag{Specs: specs}).Set(strings.TrimSpace(fields[field])); err != nil {
				return job.Params{}, badField(field, "%s %q: want NAME[:STRENGTH] separated by commas", field, fields[field])
			}
			continue
		}
		k, ok := t.ByOpenAI(field)
		if !ok {
			if what := m.Unknown(field); what != "" {
				return job.Params{}, badField(field, "%s %s", field, what)
			}
			return job.Params{}, oaErr(http.StatusBadRequest, "unknown_parameter", field, "unknown parameter %q", field)
		}
		if err := setKnob(field, k.Name, fields[field]); err != nil {
			return job.Params{}, err
		}
	}
	if v, ok := fields[fieldSeconds]; ok {
		if given["num_frames"] {
			return job.Params{}, badField(fieldSeconds, "seconds and %s both set the video's length: give one", from["num_frames"])
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || !decimalPattern.MatchString(v) || !(sec > 0 && sec <= 3600) {
			return job.Params{}, badField(fieldSeconds, "seconds %q must be a number in (0, 3600]", v)
		}
		fps := desc.Defaults.FPS
		if given["fps"] {
			fps = p.FPS
		}
		frames := max(1, int(math.Round(sec*float64(fps))))
		if f := desc.FrameMultiple; f > 1 {
			// A causal VAE takes 1 + f·k frames (Wan's 4): the nearest such count.
			frames = 1 + int(math.Round(float64(frames-1)/float64(f)))*f
		}
		if err := setKnob(fieldSeconds, "num_frames", strconv.Itoa(frames)); err != nil {
			return job.Params{}, badField(fieldSeconds, "seconds %v is %d frames at %d fps, which this model cannot make: %s", sec, frames, fps, err.(*openAIError).Message)
		}
	}
	r, err := m.ResolveParams(job.Params(p), given, lim)
	if err != nil {
		field := ""
		if ke, ok := knob.AsError(err); ok && ke.Knob != "" {
			field = from[ke.Knob]
			if field == "" {
				if k, ok := t.Lookup(ke.Knob); ok {
					field = k.OpenAIName()
				}
			}
		}
		oe := knobErr(field, err)
		if field == fieldSize {
			oe.Message += fmt.Sprintf(" (this model's default size is %dx%d)", desc.Defaults.Width, desc.Defaults.Height)
		}
		return job.Params{}, oe
	}
	return r, nil
}

// decimalPattern is a number as JSON writes one (ParseFloat alone also takes "1_0", hex and
// "Inf").
var decimalPattern = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// knobErr is a refused knob as an OpenAI 400 on field: the message in the OpenAI API's
// spelling, code over_limit for a server limit.
func knobErr(field string, err error) *openAIError {
	code := "invalid_value"
	if errors.Is(err, job.ErrTooLarge) {
		code = "over_limit"
	}
	msg := strings.TrimPrefix(err.Error(), "serve: ")
	if ke, ok := knob.AsError(err); ok {
		msg = ke.In(knob.OpenAI)
		if errors.Is(err, job.ErrTooLarge) {
			msg = "over the server's limit: " + msg
		}
	}
	if field == fieldSize {
		msg = "size: " + msg
	}
	return oaErr(http.StatusBadRequest, code, field, "%s", msg)
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
