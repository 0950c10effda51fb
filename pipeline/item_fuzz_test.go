package pipeline_test

import (
	"bytes"
	"testing"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// FuzzItemFromMessage: any hand-off bytes decode to an item or an error, never a panic; an
// item that decodes encodes back to a message that decodes to the same tensors.
func FuzzItemFromMessage(f *testing.F) {
	seed := &pipeline.Item{Group: 2, Samples: []int64{0, 1}, Step: 3, Latent: tensor.New(2, 1, 1, 1, 2),
		Guidance: []float32{1.5}, Cond: []model.Conditioning{{"v": tensor.New(2)}, {"v": tensor.New(2)}},
		SchedState: sched.State{Latent: map[string][]float32{"x0": {1, 2, 3, 4}}, Shared: map[string][]float32{"n": {1}}}}
	b, err := comm.AppendMessage(nil, seed.ToMessage(), 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	seed = &pipeline.Item{Group: 1, Samples: []int64{0}, Latent: tensor.New(1, 5, 1, 1, 1),
		Windows: &pipeline.Windows{Size: 3, Overlap: 1, Blend: "cosine", Guidance: []float32{1, 2, 3}}}
	if b, err = comm.AppendMessage(nil, seed.ToMessage(), 0); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := comm.NewFrameReader(bytes.NewReader(data), 4096, 1<<20).ReadMessage()
		if err != nil {
			return
		}
		it, err := pipeline.ItemFromMessage(m)
		if err != nil {
			return
		}
		back, err := pipeline.ItemFromMessage(it.ToMessage())
		if err != nil {
			t.Fatalf("re-decoding a decoded item: %v", err)
		}
		if !tensor.BitEqual(back.Latent, it.Latent) || len(back.Samples) != len(it.Samples) ||
			len(back.SchedState.Latent) != len(it.SchedState.Latent) || len(back.SchedState.Shared) != len(it.SchedState.Shared) ||
			(back.Windows == nil) != (it.Windows == nil) {
			t.Fatalf("round trip changed the item: %+v vs %+v", back, it)
		}
	})
}
