package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/tensor"
)

// writeAll writes, into dir, the same random Wan 2.1 T2V 1.3B-shaped model for vdpp and for
// stable-diffusion.cpp:
//
//	wan/                          a diffusers WanPipeline folder: the transformer's config
//	                              (its weights come from the file below, --transformer), the
//	                              Wan 2.1 VAE (random weights) and UniPC's scheduler config
//	wan2.1_t2v_1.3B_random.safetensors  the transformer in Wan's original layout, float32
//	                              (sd-cli --diffusion-model; vdpp --transformer)
//	umt5_tiny.safetensors         a one-layer umT5 with 4096-wide outputs (sd-cli --t5xxl:
//	                              stable-diffusion.cpp needs a text encoder; vdpp takes the
//	                              prompt embeddings instead)
//	prompt_embeds.safetensors, negative_prompt_embeds.safetensors  [512, 4096] (vdpp)
//
// Every tensor is written as it is made, so no copy of the model is held in memory.
func writeAll(dir string, layers int) error {
	cfg := Wan21T2V13B
	cfg.NumLayers = layers
	wan := filepath.Join(dir, "wan")
	for _, d := range []string{"transformer", "vae", "scheduler"} {
		if err := os.MkdirAll(filepath.Join(wan, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]any{
		"model_index.json": map[string]any{"_class_name": "WanPipeline", "_diffusers_version": "0.35.2",
			"scheduler": []string{"diffusers", "UniPCMultistepScheduler"}, "text_encoder": []any{nil, nil},
			"tokenizer": []any{nil, nil}, "transformer": []string{"diffusers", "WanTransformer3DModel"},
			"vae": []string{"diffusers", "AutoencoderKLWan"}},
		"transformer/config.json": map[string]any{"_class_name": "WanTransformer3DModel", "_diffusers_version": "0.35.2",
			"added_kv_proj_dim": nil, "attention_head_dim": cfg.AttentionHeadDim, "cross_attn_norm": true, "eps": 1e-6,
			"ffn_dim": cfg.FFNDim, "freq_dim": cfg.FreqDim, "image_dim": nil, "in_channels": cfg.InChannels,
			"num_attention_heads": cfg.NumAttentionHeads, "num_layers": cfg.NumLayers, "out_channels": cfg.OutChannels,
			"patch_size": cfg.PatchSize, "pos_embed_seq_len": nil, "qk_norm": "rms_norm_across_heads",
			"rope_max_seq_len": cfg.RopeMaxSeqLen, "text_dim": cfg.TextDim},
		"vae/config.json": map[string]any{"_class_name": "AutoencoderKLWan", "_diffusers_version": "0.35.2"},
		"scheduler/scheduler_config.json": map[string]any{"_class_name": "UniPCMultistepScheduler", "_diffusers_version": "0.35.2",
			"beta_end": 0.02, "beta_schedule": "linear", "beta_start": 0.0001, "disable_corrector": []int{},
			"dynamic_thresholding_ratio": 0.995, "final_sigmas_type": "zero", "flow_shift": 3.0, "lower_order_final": true,
			"num_train_timesteps": 1000, "predict_x0": true, "prediction_type": "flow_prediction", "rescale_betas_zero_snr": false,
			"sample_max_value": 1.0, "solver_order": 2, "solver_p": nil, "solver_type": "bh2", "steps_offset": 0,
			"thresholding": false, "time_shift_type": "exponential", "timestep_spacing": "linspace", "trained_betas": nil,
			"use_beta_sigmas": false, "use_dynamic_shifting": false, "use_exponential_sigmas": false, "use_flow_sigmas": true,
			"use_karras_sigmas": false},
	}
	for name, v := range files {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(wan, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		return err
	}
	if err := writeSafetensors(filepath.Join(dir, "wan2.1_t2v_1.3B_random.safetensors"), exp, transformer.OriginalKeys.ToFile, RandomTensor); err != nil {
		return err
	}
	vcfg, err := vae.ParseConfig("vae/config.json", []byte(`{"_class_name": "AutoencoderKLWan"}`))
	if err != nil {
		return err
	}
	vexp, err := vae.ExpectedTensors(vcfg)
	if err != nil {
		return err
	}
	if err := writeSafetensors(filepath.Join(wan, "vae", "diffusion_pytorch_model.safetensors"), vexp, nil, RandomTensor); err != nil {
		return err
	}
	if err := writeSafetensors(filepath.Join(dir, "umt5_tiny.safetensors"), umt5Tiny(), nil, RandomTensor); err != nil {
		return err
	}
	for i, name := range []string{"prompt_embeds", "negative_prompt_embeds"} {
		r := rand.New(rand.NewPCG(uint64(i+1), 3))
		gen := func(string, []int) *tensor.Dense { return randDense(r, 0.1, 512, cfg.TextDim) }
		if err := writeSafetensors(filepath.Join(dir, name+".safetensors"), map[string][]int{name: {512, cfg.TextDim}}, nil, gen); err != nil {
			return err
		}
	}
	return nil
}

// umt5Tiny lists a one-layer umT5 encoder in the names stable-diffusion.cpp reads (it
// derives the sizes from the shapes): 4096-wide, one head of 64, a feed-forward of 64, a
// vocabulary of 256.
func umt5Tiny() map[string][]int {
	const d, inner, ff, vocab = 4096, 64, 64, 256
	p := "encoder.block.0.layer."
	return map[string][]int{
		"shared.weight":                                      {vocab, d},
		p + "0.SelfAttention.q.weight":                       {inner, d},
		p + "0.SelfAttention.k.weight":                       {inner, d},
		p + "0.SelfAttention.v.weight":                       {inner, d},
		p + "0.SelfAttention.o.weight":                       {d, inner},
		p + "0.SelfAttention.relative_attention_bias.weight": {32, 1},
		p + "0.layer_norm.weight":                            {d},
		p + "1.DenseReluDense.wi_0.weight":                   {ff, d},
		p + "1.DenseReluDense.wi_1.weight":                   {ff, d},
		p + "1.DenseReluDense.wo.weight":                     {d, ff},
		p + "1.layer_norm.weight":                            {d},
		"encoder.final_layer_norm.weight":                    {d},
	}
}

// writeSafetensors writes the tensors of shapes (float32) into a safetensors file, each
// made by make when its turn comes and named in the file by rename (nil: as it is).
func writeSafetensors(path string, shapes map[string][]int, rename func(string) string, gen func(string, []int) *tensor.Dense) error {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	type entry struct {
		DType   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for _, n := range names {
		size := 4 * int64(tensor.NumElements(shapes[n]))
		file := n
		if rename != nil {
			file = rename(n)
		}
		header[file] = entry{DType: "F32", Shape: shapes[n], Offsets: [2]int64{off, off + size}}
		off += size
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := binary.Write(w, binary.LittleEndian, uint64(len(h))); err != nil {
		f.Close()
		return err
	}
	w.Write(h)
	buf := make([]byte, 0, 1<<20)
	for _, n := range names {
		d := gen(n, shapes[n])
		buf = buf[:0]
		for _, v := range d.Data {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wanheld: wrote %s (%d tensors, %.1f MB)\n", path, len(names), float64(off)/(1<<20))
	return nil
}
