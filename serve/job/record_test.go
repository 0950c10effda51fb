package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/model/family"
)

var recordTime = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testRecord(state State) Record {
	r := Record{ID: strings.Repeat("ab", 12), Seq: 7, State: state, CreatedAt: recordTime, Rev: 2,
		Params: Params{NumFrames: 2, Steps: 3, Height: 8, Width: 8, FPS: 7}}
	if state == StateSucceeded {
		r.FinishedAt, r.LatentShape = &recordTime, []int{1, 2, 4, 1, 1}
	}
	return r
}

func TestDecodeRecord(t *testing.T) {
	good, _ := json.Marshal(testRecord(StateSucceeded))
	for _, c := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"a record", string(good), true},
		{"a field of a newer server", strings.Replace(string(good), `"id"`, `"future": 1, "id"`, 1), true},
		{"truncated", string(good[:len(good)/2]), false},
		{"unknown state", strings.Replace(string(good), `"succeeded"`, `"exploded"`, 1), false},
		{"bad id", strings.Replace(string(good), strings.Repeat("ab", 12), "../../etc", 1), false},
		{"no sequence number", strings.Replace(string(good), `"seq":7`, `"seq":0`, 1), false},
		{"trailing data", string(good) + "{}", false},
		{"not an object", `[1]`, false},
		{"empty", ``, false},
	} {
		r, err := DecodeRecord([]byte(c.in))
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadRecord)) {
			t.Errorf("%s: %+v, %v", c.name, r, err)
		}
	}
}

func TestCheckRecord(t *testing.T) {
	full := Files{Input: true, LatentBytes: 4 * 2 * 4}
	tooMany := func(p Params) error {
		if p.Steps > 2 {
			return fmt.Errorf("%w: steps %d exceeds --max-steps 2", ErrTooLarge, p.Steps)
		}
		return nil
	}
	text := testRecord(StateQueued)
	text.Prompt = &family.Prompt{Text: "a fox"}
	for _, c := range []struct {
		name  string
		r     Record
		f     Files
		admit func(Params) error
		state State
		msg   string
	}{
		{"succeeded with its latent", testRecord(StateSucceeded), full, nil, StateSucceeded, ""},
		{"succeeded, latent missing", testRecord(StateSucceeded), Files{Input: true, LatentBytes: -1}, nil, StateFailed, "output is missing"},
		{"succeeded, latent short", testRecord(StateSucceeded), Files{Input: true, LatentBytes: 8}, nil, StateFailed, "output is missing"},
		{"failed stays failed", testRecord(StateFailed), Files{LatentBytes: -1}, tooMany, StateFailed, ""},
		{"queued within the limits", testRecord(StateQueued), full, nil, StateQueued, ""},
		{"queued over the limits", testRecord(StateQueued), full, tooMany, StateFailed, "no longer admits"},
		{"running, upload missing", testRecord(StateRunning), Files{LatentBytes: -1}, nil, StateFailed, "upload is missing"},
		{"a text job has no upload", text, Files{LatentBytes: -1}, nil, StateQueued, ""},
	} {
		got, err := CheckRecord(c.r, c.f, c.admit)
		if got.State != c.state || (c.msg == "") != (err == nil) || (c.msg != "" && !strings.Contains(got.Error, c.msg)) {
			t.Errorf("%s: %s %q, %v; want %s with %q", c.name, got.State, got.Error, err, c.state, c.msg)
			continue
		}
		if c.msg == "" && !reflect.DeepEqual(got, c.r) {
			t.Errorf("%s: a sound record changed: %+v", c.name, got)
		}
		if c.msg != "" && (got.FinishedAt == nil || got.LatentShape != nil) {
			t.Errorf("%s: an ended record without FinishedAt, or with a latent: %+v", c.name, got)
		}
	}
}

// FuzzDecodeRecord: any bytes are a record that encodes back to one, or ErrBadRecord;
// never a panic.
func FuzzDecodeRecord(f *testing.F) {
	good, _ := json.Marshal(testRecord(StateSucceeded))
	f.Add(good)
	f.Add([]byte(`{"id":"abababababababababababab","seq":1,"state":"queued","params":{"steps":1e99}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeRecord(again); err != nil {
			t.Fatalf("a decoded record does not decode again: %v", err)
		}
		CheckRecord(r, Files{LatentBytes: -1}, func(Params) error { return nil })
	})
}
