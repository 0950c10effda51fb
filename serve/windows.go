package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/model/family"
)

// WindowedModel is implemented by Generators that describe their model's long-video
// windowing (a family's Description: native length, temporal factor of the VAE, default
// window); the server resolves and checks a job's window, overlap and blend against it.
type WindowedModel interface {
	Description() family.Description
}

// description is gen's Description: its own, or the native frame count of its defaults.
func description(gen Generator) family.Description {
	if wm, ok := gen.(WindowedModel); ok {
		return wm.Description()
	}
	d := DefaultParams()
	if pm, ok := gen.(ParamsModel); ok {
		d = pm.DefaultParams()
	}
	return family.Description{Defaults: family.Params(d)}
}

// resolveWindows fills p's window, overlap and blend (the JSON data gave them or not; an
// overlap it leaves out is the model's) and checks them against gen's model; a video of one
// window keeps them zero, as a job that never asked.
func resolveWindows(gen Generator, p Params, data []byte) (Params, error) {
	if !hasField(data, "overlap") {
		p.Overlap = -1
	}
	r, err := description(gen).ResolveWindows(family.Params(p), "")
	if err != nil {
		return Params{}, fmt.Errorf("%w: %s", ErrBadParams, strings.TrimPrefix(err.Error(), family.ErrParams.Error()+": "))
	}
	if r.NumFrames <= r.Window {
		r.Window, r.Overlap, r.Blend = 0, 0, ""
	}
	return Params(r), nil
}

// hasField reports whether the JSON object data sets key (data has already been parsed).
func hasField(data []byte, key string) bool {
	if len(bytes.TrimSpace(data)) == 0 {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}
