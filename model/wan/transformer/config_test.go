package transformer

import (
	"errors"
	"strings"
	"testing"
)

// Absent keys take diffusers' defaults (the Wan 2.1 14B T2V shape).
func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.InnerDim() != 5120 || c.NumLayers != 40 || c.PatchSize != [3]int{1, 2, 2} || c.FFNDim != 13824 ||
		c.TextDim != 4096 || c.FreqDim != 256 || c.Eps != 1e-6 || !c.CrossAttnNorm || c.HasImage() || c.RopeMaxSeqLen != 1024 {
		t.Fatalf("defaults: %+v", c)
	}
	if got := ropeAxisDims(128); got != [3]int{44, 42, 42} {
		t.Fatalf("rope split of 128: %v", got)
	}
}

// Bad configs are one error naming the file and the key.
func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"attention_head_dim": 21}`, "odd"},
		{`{"patch_size": [1, 2]}`, "patch_size"},
		{`{"patch_size": [1, 0, 2]}`, "patch_size[1]"},
		{`{"num_layers": 0}`, "num_layers"},
		{`{"image_dim": 8}`, "added_kv_proj_dim"},
		{`{"added_kv_proj_dim": 8}`, "image_dim"},
		{`{"image_dim": 8, "added_kv_proj_dim": 8}`, "inner dim"},
		{`{"eps": 0}`, "eps"},
		{`[1]`, "bad config"},
		{`{"num_layers": "x"}`, "bad config"},
	} {
		_, err := ParseConfig("dir/config.json", []byte(c.json))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "dir/config.json") {
			t.Errorf("%s: error %v, want ErrConfig mentioning %q and the file", c.json, err, c.want)
		}
	}
}

// Inputs of the wrong shape are one error naming the tensor.
func TestCheckInputsErrors(t *testing.T) {
	cfg, err := ParseConfig("c", []byte(`{"num_attention_heads": 2, "attention_head_dim": 8, "in_channels": 4, "text_dim": 16, "rope_max_seq_len": 8}`))
	if err != nil {
		t.Fatal(err)
	}
	i2v, err := ParseConfig("c", []byte(`{"num_attention_heads": 2, "attention_head_dim": 8, "in_channels": 4, "text_dim": 16, "image_dim": 6, "added_kv_proj_dim": 16}`))
	if err != nil {
		t.Fatal(err)
	}
	hs := []int{2, 4, 3, 8, 8}
	for _, c := range []struct {
		cfg                 Config
		hidden, t, ehs, img []int
		want                string
	}{
		{cfg, []int{2, 5, 3, 8, 8}, []int{2}, []int{2, 7, 16}, nil, "hidden_states"},
		{cfg, []int{2, 4, 3, 1, 8}, []int{2}, []int{2, 7, 16}, nil, "smaller than one patch"},
		{cfg, []int{2, 4, 3, 8, 18}, []int{2}, []int{2, 7, 16}, nil, "rope_max_seq_len"},
		{cfg, hs, []int{3}, []int{2, 7, 16}, nil, "timestep"},
		{cfg, hs, []int{2, 5}, []int{2, 7, 16}, nil, "timestep"},
		{cfg, hs, []int{2}, []int{2, 7, 15}, nil, "encoder_hidden_states"},
		{cfg, hs, []int{2}, []int{2, 7, 16}, []int{2, 3, 6}, "without image_dim"},
		{i2v, hs, []int{2}, []int{2, 512, 16}, nil, "needs encoder_hidden_states_image"},
		{i2v, hs, []int{2}, []int{2, 7, 16}, []int{2, 3, 6}, "512"},
		{i2v, hs, []int{2}, []int{2, 512, 16}, []int{1, 3, 6}, "rows"},
	} {
		_, err := CheckInputs(c.cfg, c.hidden, c.t, c.ehs, c.img)
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v %v %v: error %v, want ErrInput mentioning %q", c.hidden, c.t, c.ehs, c.img, err, c.want)
		}
	}
	sh, err := CheckInputs(cfg, hs, []int{2, 48}, []int{2, 7, 16}, nil)
	if err != nil || !sh.PerTokenTimestep || sh.Tokens != 48 {
		t.Fatalf("per-token timesteps: %+v, %v", sh, err)
	}
}

// FuzzParseConfig: any bytes give a valid config or an ErrConfig, never a panic, and a
// config that parses can list its tensors when small.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"num_attention_heads": 2, "attention_head_dim": 20, "num_layers": 2, "text_dim": 32, "freq_dim": 32, "ffn_dim": 64, "in_channels": 4}`))
	f.Add([]byte(`{"patch_size": [2,2,1], "image_dim": 8, "added_kv_proj_dim": 16, "num_attention_heads": 2, "attention_head_dim": 8, "pos_embed_seq_len": 4}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("config.json", data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			return
		}
		if c.Validate() != nil {
			t.Fatal("parsed config does not validate")
		}
	})
}
