package umt5

import (
	"errors"
	"strings"
	"testing"
)

// wanConfig is the text_encoder/config.json of Wan 2.1/2.2 (google/umt5-xxl's encoder).
const wanConfig = `{
  "architectures": ["UMT5EncoderModel"], "classifier_dropout": 0.0, "d_ff": 10240, "d_kv": 64,
  "d_model": 4096, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "dropout_rate": 0.1,
  "eos_token_id": 1, "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
  "is_encoder_decoder": true, "is_gated_act": true, "layer_norm_epsilon": 1e-06,
  "model_type": "umt5", "num_decoder_layers": 24, "num_heads": 64, "num_layers": 24,
  "output_past": true, "pad_token_id": 0, "relative_attention_max_distance": 128,
  "relative_attention_num_buckets": 32, "scalable_attention": true, "tie_word_embeddings": false,
  "tokenizer_class": "T5Tokenizer", "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 256384}`

func TestParseConfigWan(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(wanConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.DModel != 4096 || c.NumLayers != 24 || c.NumHeads != 64 || c.InnerDim() != 4096 || c.DFF != 10240 ||
		c.VocabSize != 256384 || c.DenseActFn != "gelu_new" || !c.IsGatedAct || c.LayerNormEpsilon != 1e-6 {
		t.Errorf("parsed %+v", c)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(`{"d_model": null, "feed_forward_proj": "relu"}`))
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if c.DModel != d.DModel || c.VocabSize != d.VocabSize || c.IsGatedAct || c.DenseActFn != "relu" {
		t.Errorf("parsed %+v", c)
	}
}

func TestParseConfigAliases(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(`{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3, "head_dim": 16, "d_model": 64}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.DModel != 64 || c.NumHeads != 4 || c.NumLayers != 3 || c.DKV != 16 {
		t.Errorf("parsed %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, text string }{
		{`[]`, "cannot unmarshal"},
		{`{"model_type": "t5"}`, `model_type "t5"`},
		{`{"d_model": 0}`, "d_model 0"},
		{`{"num_heads": -1}`, "num_heads -1"},
		{`{"d_kv": "x"}`, "config.json"},
		{`{"relative_attention_num_buckets": 3}`, "relative_attention_num_buckets 3"},
		{`{"relative_attention_num_buckets": 32, "relative_attention_max_distance": 8}`, "max_distance 8"},
		{`{"layer_norm_epsilon": 0}`, "layer_norm_epsilon"},
		{`{"feed_forward_proj": "gated-gelu-x"}`, "feed_forward_proj"},
		{`{"feed_forward_proj": "fancy"}`, `activation "fancy"`},
		{`{"feed_forward_proj": "gated-gelu", "dense_act_fn": "relu"}`, "dense_act_fn"},
		{`{"feed_forward_proj": "relu", "is_gated_act": true}`, "is_gated_act"},
		{`{"pad_token_id": 250112}`, "pad_token_id"},
		{`{"hidden_size": 64, "d_model": 32}`, "hidden_size 64 disagrees with d_model 32"},
	} {
		_, err := ParseConfig("config.json", []byte(c.json))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s: error %v, want ErrConfig naming config.json and %q", c.json, err, c.text)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{wanConfig, `{}`, `null`, `{"num_layers": 1, "d_model": 4, "vocab_size": 3}`, `{"relative_attention_num_buckets": 4, "relative_attention_max_distance": 2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fz.json", data)
		if err != nil {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "fz.json") {
				t.Fatalf("error %v does not wrap ErrConfig and name the file", err)
			}
			return
		}
		// Everything the network builder needs must work on an accepted config.
		if c.NumLayers <= 4 {
			if _, err := ExpectedTensors(c); err != nil {
				t.Fatalf("accepted config %+v: %v", c, err)
			}
		}
		for rel := -3 * c.RelativeAttentionMaxDistance; rel <= 3*c.RelativeAttentionMaxDistance; rel += 1 + c.RelativeAttentionMaxDistance/50 {
			if b := RelativePositionBucket(rel, c.RelativeAttentionNumBuckets, c.RelativeAttentionMaxDistance); b < 0 || b >= c.RelativeAttentionNumBuckets {
				t.Fatalf("bucket %d of %d for relative position %d", b, c.RelativeAttentionNumBuckets, rel)
			}
		}
	})
}
