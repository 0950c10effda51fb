package serve

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// chunkDecoder emits fixed chunks: each is [k, 3, 1, 1] with frame i's values all i.
type chunkDecoder struct {
	chunks []struct{ first, k int }
	err    error
}

func (d chunkDecoder) DecodeChunks(_ context.Context, _ *tensor.Dense, _ family.Params, emit func(int, *tensor.Dense) error) error {
	for _, c := range d.chunks {
		f := tensor.New(c.k, 3, 1, 1)
		for i := range f.Data {
			f.Data[i] = float32(c.first + i/3)
		}
		if err := emit(c.first, f); err != nil {
			return err
		}
	}
	return d.err
}

func TestDecodeByChunks(t *testing.T) {
	type chunk = struct{ first, k int }
	boom := errors.New("boom")
	for _, c := range []struct {
		name   string
		d      chunkDecoder
		frames int
		err    string
	}{
		{"one chunk", chunkDecoder{chunks: []chunk{{0, 5}}}, 5, ""},
		{"groups in order", chunkDecoder{chunks: []chunk{{0, 1}, {1, 4}, {5, 4}}}, 9, ""},
		{"a gap", chunkDecoder{chunks: []chunk{{0, 2}, {3, 2}}}, 0, "at frame 3"},
		{"nothing", chunkDecoder{}, 0, "no frames"},
		{"decoder error", chunkDecoder{chunks: []chunk{{0, 2}}, err: boom}, 0, "boom"},
	} {
		got, err := decodeByChunks(context.Background(), c.d, nil, family.Params{NumFrames: 4})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(got.Shape, []int{c.frames, 3, 1, 1}) {
			t.Fatalf("%s: shape %v", c.name, got.Shape)
		}
		for i, v := range got.Data {
			if v != float32(i/3) {
				t.Fatalf("%s: value %d = %v, want %d", c.name, i, v, i/3)
			}
		}
	}
}
