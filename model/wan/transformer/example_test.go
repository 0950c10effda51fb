package transformer_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/tensor/quant"
)

// ExampleExpectedTensors lists the tensors of a small Wan transformer without allocating
// any weights.
func ExampleExpectedTensors() {
	cfg, err := transformer.ParseConfig("transformer/config.json", []byte(`{
		"num_attention_heads": 2, "attention_head_dim": 20, "num_layers": 2, "in_channels": 4,
		"out_channels": 4, "text_dim": 32, "freq_dim": 32, "ffn_dim": 64}`))
	if err != nil {
		panic(err)
	}
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg)
	fmt.Println(len(exp), "tensors")
	fmt.Println(exp["patch_embedding.weight"], exp["blocks.1.scale_shift_table"], exp["proj_out.weight"])
	// Output:
	// wan transformer 2 layers, 2 heads x 20, patch [1 2 2], in 4, out 4, text 32, ffn 64
	// 69 tensors
	// [40 4 1 2 2] [1 6 40] [16 40]
}

// HeadRanges splits attention heads over a context-parallel group: 6 heads over 4 members.
func ExampleHeadRanges() {
	r, err := transformer.HeadRanges(6, 4)
	fmt.Println(r, err)
	_, err = transformer.HeadRanges(2, 3)
	fmt.Println(err)
	// Output:
	// [[0 2] [2 4] [4 5] [5 6]] <nil>
	// wan/transformer: context-parallel shards do not fit: 2 attention heads cannot be split over 3 members (each needs one)
}

// ExampleHold shows the types --weights-dtype q4_k holds a Wan transformer's tensors in:
// the blocks' matrices in q4_K (rows of 256) or its fallback q5_0 (rows of 64), the
// embeddings and the output head as stored, norms and biases in float32.
func ExampleHold() {
	hold := transformer.Hold(nn.HoldAs(quant.Q4_K))
	for _, t := range []struct {
		name  string
		shape []int
	}{
		{"blocks.0.attn1.to_q.weight", []int{256, 256}},
		{"blocks.0.ffn.net.2.weight", []int{256, 64}},
		{"condition_embedder.text_embedder.linear_1.weight", []int{256, 256}},
		{"proj_out.weight", []int{64, 256}},
		{"blocks.0.attn1.to_q.bias", []int{256}},
	} {
		fmt.Println(t.name, hold(t.name, t.shape, quant.BF16))
	}
	// Output:
	// blocks.0.attn1.to_q.weight q4_K
	// blocks.0.ffn.net.2.weight q5_0
	// condition_embedder.text_embedder.linear_1.weight bf16
	// proj_out.weight bf16
	// blocks.0.attn1.to_q.bias f32
}
