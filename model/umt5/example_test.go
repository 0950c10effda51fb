package umt5_test

import (
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/umt5"
	"github.com/vdpp/vdpp/tensor"
)

// wordTokenizer gives each word of a prompt the id 2 + its length, appends </s> (1) and
// pads with 0: a stand-in for the umT5 SentencePiece tokenizer.
type wordTokenizer struct{}

func (wordTokenizer) EncodeBatch(texts []string, maxLen int, padding bool) (ids, mask [][]int32, err error) {
	for _, t := range texts {
		var row, m []int32
		for _, w := range strings.Fields(t) {
			row = append(row, int32(2+min(len(w), 5)))
			m = append(m, 1)
		}
		row, m = append(row[:min(len(row), maxLen-1)], 1), append(m[:min(len(m), maxLen-1)], 1)
		for padding && len(row) < maxLen {
			row, m = append(row, 0), append(m, 0)
		}
		ids, mask = append(ids, row), append(mask, m)
	}
	return ids, mask, nil
}

// Example builds a tiny umT5 encoder with constant weights (a real one comes from
// umt5.Load(dir, backend, opts) on Wan's text_encoder/ folder) and embeds two prompts.
func Example() {
	cfg, err := umt5.ParseConfig("config.json", []byte(`{"vocab_size": 8, "d_model": 16, "d_kv": 4,
		"num_heads": 2, "d_ff": 32, "num_layers": 2, "relative_attention_num_buckets": 8,
		"relative_attention_max_distance": 16, "feed_forward_proj": "gated-gelu"}`))
	if err != nil {
		panic(err)
	}
	shapes, err := umt5.ExpectedTensors(cfg)
	if err != nil {
		panic(err)
	}
	weights := map[string]*tensor.Dense{}
	for name, shape := range shapes {
		t := tensor.New(shape...)
		for i := range t.Data {
			t.Data[i] = 0.1 * float32(i%7-3)
		}
		weights[name] = t
	}
	backend, err := nn.NewBackend("go")
	if err != nil {
		panic(err)
	}
	m, err := umt5.New(cfg, weights, backend)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	fmt.Println(umt5.PromptClean("  a cat &amp; a\tdog  "))
	embeds, err := m.PromptEmbeds(wordTokenizer{}, []string{"a cat &amp; a dog", "rain"}, 32)
	if err != nil {
		panic(err)
	}
	d := cfg.DModel
	zero := func(prompt, token int) bool {
		for _, v := range embeds.Data[(prompt*32+token)*d : (prompt*32+token+1)*d] {
			if v != 0 {
				return false
			}
		}
		return true
	}
	fmt.Println("prompt_embeds", embeds.Shape)
	fmt.Println("prompt 0: token 5 (</s>) zero:", zero(0, 5), "token 6 zero:", zero(0, 6))
	fmt.Println("prompt 1: token 1 (</s>) zero:", zero(1, 1), "token 2 zero:", zero(1, 2))
	// Output:
	// a cat & a dog
	// prompt_embeds [2 32 16]
	// prompt 0: token 5 (</s>) zero: false token 6 zero: true
	// prompt 1: token 1 (</s>) zero: false token 2 zero: true
}
