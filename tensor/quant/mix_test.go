package quant

import (
	"strings"
	"testing"
)

// TestQ4KM checks the Q4_K_M mix's choice per matrix against ComfyUI-GGUF's rules
// (tools/lcpp.patch, img_tensor_get_type) for SVD's diffusers names and Wan's, in both
// the original layout (city96's files) and diffusers' (vdpp's).
func TestQ4KM(t *testing.T) {
	m, ok := ParseMix("q4_k_m")
	if !ok || m.Base != Q4_K {
		t.Fatalf("ParseMix(q4_k_m) = %+v, %v", m, ok)
	}
	for _, tc := range []struct {
		name string
		row  int
		want Type
	}{
		// SVD, released widths (rows of 320 and 640 are not whole super-blocks).
		{"down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_v.weight", 640, F16},
		{"down_blocks.2.attentions.0.transformer_blocks.0.attn2.to_v.weight", 1024, Q6_K},
		{"down_blocks.2.attentions.0.temporal_transformer_blocks.0.attn1.to_v.weight", 1280, Q6_K},
		{"down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_v.weight", 320, F16},
		{"mid_block.attentions.0.transformer_blocks.0.ff.net.2.weight", 5120, Q6_K},
		{"mid_block.attentions.0.temporal_transformer_blocks.0.ff.net.2.weight", 5120, Q6_K},
		{"mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj.weight", 1280, Q4_K},
		{"mid_block.attentions.0.transformer_blocks.0.ff_in.net.2.weight", 5120, Q4_K},
		{"mid_block.attentions.0.transformer_blocks.0.attn1.to_q.weight", 1280, Q4_K},
		{"mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight", 1024, Q4_K},
		{"down_blocks.1.attentions.0.proj_in.weight", 640, F16},
		{"down_blocks.2.attentions.0.proj_in.weight", 1280, Q4_K},
		{"down_blocks.0.attentions.0.proj_out.weight", 320, F16},
		{"down_blocks.0.resnets.0.time_emb_proj.weight", 1280, Q4_K},
		// Wan, original names (the patch's own matches: .v.weight and .ffn.2.weight).
		{"blocks.0.self_attn.v.weight", 5120, Q6_K},
		{"blocks.0.cross_attn.v.weight", 1536, Q6_K},
		{"blocks.0.cross_attn.v_img.weight", 5120, Q4_K},
		{"blocks.0.self_attn.q.weight", 5120, Q4_K},
		{"blocks.0.ffn.2.weight", 13824, Q6_K},
		{"blocks.0.ffn.0.weight", 5120, Q4_K},
		{"blocks.0.ffn.2.weight", 8960 + 32, F16},
		// Wan, diffusers' names of the same.
		{"blocks.0.attn1.to_v.weight", 1536, Q6_K},
		{"blocks.0.attn2.to_v.weight", 5120, Q6_K},
		{"blocks.0.attn2.add_v_proj.weight", 5120, Q4_K},
		{"blocks.0.ffn.net.2.weight", 8960, Q6_K},
		{"blocks.0.ffn.net.0.proj.weight", 1536, Q4_K},
		{"blocks.0.attn1.to_out.0.weight", 40, F16},
		// The patch's fused qkv rule.
		{"double_blocks.0.img_attn.qkv.weight", 3072, Q5_K},
		{"layers.0.attention.qkv.weight", 2304, Q5_K},
	} {
		if got := m.Type(tc.name, tc.row); got != tc.want {
			t.Errorf("q4_k_m: %s rows of %d: %v, want %v", tc.name, tc.row, got, tc.want)
		}
	}
}

// TestDTypeFlags checks that the --weights-dtype values are the types then the mixes, and
// that CheckDType accepts each and names the rest.
func TestDTypeFlags(t *testing.T) {
	flags := DTypeFlags()
	if len(flags) != len(Flags())+len(Mixes()) || flags[len(flags)-1] != "q4_k_m" {
		t.Fatalf("DTypeFlags() = %v", flags)
	}
	for _, f := range append(flags, "Q4_K_M", "Q8_0") {
		if err := CheckDType(f); err != nil {
			t.Errorf("CheckDType(%q): %v", f, err)
		}
	}
	err := CheckDType("q4_k_s")
	if err == nil || !strings.Contains(err.Error(), `"q4_k_s"`) || !strings.Contains(err.Error(), "q4_k_m") {
		t.Errorf("CheckDType(q4_k_s) = %v, want an error naming it and listing q4_k_m", err)
	}
}
