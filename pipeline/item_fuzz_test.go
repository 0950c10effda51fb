package pipeline_test

import (
	"bytes"
	"reflect"
	"slices"
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

// Everything that crosses a hand-off is carried exactly: integers float32 cannot hold (a
// cache interval of 2^24+1, a sample id of 2^40, a threshold's every bit) come back as they
// left, so a stage never refuses (or silently changes) what the one before it ran.
func TestHandOffIsExact(t *testing.T) {
	rule := pipeline.Cache{Mode: pipeline.CacheDeep, Interval: 1<<24 + 1, Branch: 1<<24 + 3, Threshold: 0.1 + 1e-17, Drop: true}
	it := &pipeline.Item{Group: 7, Samples: []int64{1<<40 + 1, 1<<24 + 1}, Latent: tensor.New(2, 3, 1, 1, 1),
		Windows: &pipeline.Windows{Size: 3, Overlap: 1, Blend: "linear"}, Cache: pipeline.NewItemCache(rule, 2)}
	it.Cache.Log[1] = []pipeline.CacheRecord{{Step: 1<<20 - 1, Expert: 1, Branch: pipeline.BranchUncond, Window: 1<<20 - 1, Computed: true, Value: 0.25}}
	b, err := comm.AppendMessage(nil, it.ToMessage(), 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := comm.NewFrameReader(bytes.NewReader(b), 4096, 1<<20).ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	back, err := pipeline.ItemFromMessage(m)
	if err != nil {
		t.Fatalf("a hand-off of a rule with interval 2^24+1: %v", err)
	}
	if !slices.Equal(back.Samples, it.Samples) || !pipeline.SameCache(back.Cache.Rule, rule) ||
		!reflect.DeepEqual(back.Cache.Log, it.Cache.Log) || !reflect.DeepEqual(back.Windows, it.Windows) {
		t.Fatalf("round trip changed the item:\n got %+v %+v %+v\nwant %+v %+v %+v", back.Samples, back.Cache.Rule, back.Cache.Log, it.Samples, rule, it.Cache.Log)
	}
	static := pipeline.Cache{Mode: pipeline.CacheStatic, Steps: []int{0, 5, 1<<20 - 1}}
	it.Cache = pipeline.NewItemCache(static, 2)
	back, err = pipeline.ItemFromMessage(it.ToMessage())
	if err != nil || !pipeline.SameCache(back.Cache.Rule, static) {
		t.Fatalf("static steps: %+v, %v", back, err)
	}
}
