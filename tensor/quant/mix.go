package quant

import (
	"fmt"
	"strings"
)

// Mix is a --weights-dtype value that names a GGUF file type rather than one weight type:
// the quantizer picks each weight matrix's type from its name and the length of its rows,
// as llama.cpp's file types (LLAMA_FTYPE_MOSTLY_Q4_K_M, ...) do.
type Mix struct {
	// Flag is the mix as --weights-dtype takes it ("q4_k_m").
	Flag string
	// Name is the file type as GGUF tools and model repositories spell it ("Q4_K_M").
	Name string
	// Base is the type of the matrices no name rule raises.
	Base Type
	// Doc is one line for help texts and docs/weights.md.
	Doc string
	// Type returns the type a 2-D weight matrix named name, whose rows hold row weights, is
	// quantized to. Names are the model's own (diffusers' for SVD and Wan, or Wan's
	// original layout).
	Type func(name string, row int) Type
}

// mixes is the one declaration of the mixes, in the order help texts list them (after the
// types of table).
var mixes = []Mix{
	{Flag: "q4_k_m", Name: "Q4_K_M", Base: Q4_K, Type: q4KM,
		Doc: "ComfyUI-GGUF's Q4_K_M for image models: q4_K, attention's value projection and the feed-forward's output in q6_K, rows that are not whole super-blocks in f16"},
}

// Mixes returns every mix, in the order help texts list them.
func Mixes() []Mix { return mixes }

// ParseMix returns the mix s names (--weights-dtype's spelling or the file type's, any
// case); ok is false when s names none.
func ParseMix(s string) (m Mix, ok bool) {
	for _, m := range mixes {
		if strings.EqualFold(s, m.Flag) || strings.EqualFold(s, m.Name) {
			return m, true
		}
	}
	return Mix{}, false
}

// DTypeFlags returns every --weights-dtype value after auto: the types' spellings (Flags)
// and then the mixes'.
func DTypeFlags() []string {
	out := Flags()
	for _, m := range mixes {
		out = append(out, m.Flag)
	}
	return out
}

// CheckDType returns an error naming s and listing DTypeFlags when s is neither a type nor
// a mix.
func CheckDType(s string) error {
	if _, ok := ParseMix(s); ok {
		return nil
	}
	if _, err := Parse(s); err != nil {
		return fmt.Errorf("unknown weight type %q (one of %s)", s, strings.Join(DTypeFlags(), ", "))
	}
	return nil
}

// The name rules of ComfyUI-GGUF's patch to llama.cpp's quantizer, img_tensor_get_type in
// tools/lcpp.patch of github.com/city96/ComfyUI-GGUF: a name containing one of these
// strings (std::string::find) takes the rule's type. The rules are tried in this order
// and apply to every layer alike (the patch has no use_more_bits for image models; its
// layer counter matters only for Q3_K_M and Q4_K_S).
var (
	// mixValue are attention's value projections: Wan's self_attn.v and cross_attn.v
	// (diffusers' attn1.to_v and attn2.to_v), SVD's to_v.
	mixValue = []string{"attn_v.weight", ".to_v.weight", ".v.weight", ".attn.w1v.weight", ".attn.w2v.weight", "_attn.v_proj.weight"}
	// mixQKV are fused query-key-value projections.
	mixQKV = []string{"attn_qkv.weight", "attn.qkv.weight", "attention.qkv.weight"}
	// mixFFNDown are the feed-forwards' output projections: Wan's ffn.2, SVD's ff.net.2.
	// ".ffn.net.2.weight" is not the patch's: it is diffusers' name of Wan's ffn.2 (the
	// patch sees Wan's original names, as city96's files store them).
	mixFFNDown = []string{"ffn_down", ".ffn.2.weight", ".ffn.net.2.weight", ".ff.net.2.weight", ".mlp.layer2.weight", ".adaln_modulation_mlp.2.weight", ".feed_forward.w2.weight"}
)

// q4KM is the patch's Q4_K_M: value projections and feed-forward outputs in q6_K, fused
// qkv in q5_K, the rest in q4_K, and a matrix whose rows are not whole super-blocks of 256
// in f16 (the patch's fallback, not llama.cpp's q5_0).
func q4KM(name string, row int) Type {
	t := Q4_K
	switch {
	case containsAny(name, mixValue):
		t = Q6_K
	case containsAny(name, mixQKV):
		t = Q5_K
	case containsAny(name, mixFFNDown) || strings.Contains(name, "experts.") && strings.Contains(name, ".w2.weight"):
		t = Q6_K
	}
	if !t.Fits(row) {
		return F16
	}
	return t
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
