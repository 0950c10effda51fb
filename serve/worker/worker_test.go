package worker

import (
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

func TestDropRows(t *testing.T) {
	item := func(samples ...int64) *pipeline.Item {
		it := &pipeline.Item{Group: 7, Step: 3, Latent: tensor.New(len(samples), 1, 2, 1, 1)}
		for i, s := range samples {
			it.Samples = append(it.Samples, s)
			it.Latent.Data[2*i], it.Latent.Data[2*i+1] = float32(s), float32(10*s)
		}
		return it
	}
	tests := []struct {
		name        string
		in          *pipeline.Item
		drop        map[int]bool
		wantSamples []int64
		wantLatent  []float32
		wantDropped []int
	}{
		{"none", item(0, 1, 2), map[int]bool{5: true}, []int64{0, 1, 2}, []float32{0, 0, 1, 10, 2, 20}, nil},
		{"middle", item(0, 1, 2), map[int]bool{1: true}, []int64{0, 2}, []float32{0, 0, 2, 20}, []int{1}},
		{"by original index", item(0, 2), map[int]bool{2: true}, []int64{0}, []float32{0, 0}, []int{2}},
		{"all", item(0, 1), map[int]bool{0: true, 1: true}, nil, []float32{}, []int{0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, dropped := DropRows(tc.in, tc.drop)
			if !reflect.DeepEqual(out.Samples, tc.wantSamples) || !reflect.DeepEqual(out.Latent.Data, tc.wantLatent) ||
				!reflect.DeepEqual(dropped, tc.wantDropped) {
				t.Fatalf("DropRows = samples %v latent %v dropped %v; want %v %v %v",
					out.Samples, out.Latent.Data, dropped, tc.wantSamples, tc.wantLatent, tc.wantDropped)
			}
			if out.Group != 7 || out.Step != 3 {
				t.Fatalf("DropRows lost the batch's group or step: %d %d", out.Group, out.Step)
			}
		})
	}
}
