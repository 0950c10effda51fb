package quant

import (
	"fmt"
	"strings"
)

// Type is a weight type, numbered as ggml numbers it (enum ggml_type, the id a GGUF tensor
// info stores).
type Type uint32

// The weight types vdpp knows. The ids are ggml's.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	BF16 Type = 30
)

// Info describes one weight type: the row of the table every command, reader and kernel
// derives its facts from.
type Info struct {
	Type Type
	// Name is the type as ggml's type traits, GGUF tools and stable-diffusion.cpp's --type
	// spell it ("f32", "q8_0", "q4_K").
	Name string
	// Flag is the type as --weights-dtype takes it: Name in lower case.
	Flag string
	// BlockSize is the number of weights one block holds (1 for the float types).
	BlockSize int
	// BlockBytes is the size of one block in bytes.
	BlockBytes int
	// Quantized is true for the block types (a scale per block), false for f32, f16, bf16.
	Quantized bool
	// Doc is one line for help texts and docs/weights.md.
	Doc string
}

// table is the one declaration of the weight types, in the order help texts list them.
var table = []Info{
	{F32, "f32", "f32", 1, 4, false, "IEEE float32"},
	{F16, "f16", "f16", 1, 2, false, "IEEE binary16"},
	{BF16, "bf16", "bf16", 1, 2, false, "bfloat16 (float32's top 16 bits, rounded)"},
	{Q8_0, "q8_0", "q8_0", 32, 34, true, "blocks of 32: f16 scale, 32 int8 (8.5 bits a weight)"},
	{Q6_K, "q6_K", "q6_k", 256, 210, true, "super-blocks of 256: 16 int8 scales, 6-bit quants (6.5625 bits)"},
	{Q5_K, "q5_K", "q5_k", 256, 176, true, "super-blocks of 256: 8 6-bit scales and mins, 5-bit quants (5.5 bits)"},
	{Q5_1, "q5_1", "q5_1", 32, 24, true, "blocks of 32: f16 scale and min, 5-bit quants (6 bits)"},
	{Q5_0, "q5_0", "q5_0", 32, 22, true, "blocks of 32: f16 scale, 5-bit quants (5.5 bits)"},
	{Q4_K, "q4_K", "q4_k", 256, 144, true, "super-blocks of 256: 8 6-bit scales and mins, 4-bit quants (4.5 bits)"},
	{Q4_1, "q4_1", "q4_1", 32, 20, true, "blocks of 32: f16 scale and min, 4-bit quants (5 bits)"},
	{Q4_0, "q4_0", "q4_0", 32, 18, true, "blocks of 32: f16 scale, 4-bit quants (4.5 bits)"},
	{Q3_K, "q3_K", "q3_k", 256, 110, true, "super-blocks of 256: 16 6-bit scales, 3-bit quants (3.4375 bits)"},
	{Q2_K, "q2_K", "q2_k", 256, 84, true, "super-blocks of 256: 16 4-bit scales and mins, 2-bit quants (2.625 bits)"},
}

var byType = func() map[Type]*Info {
	m := make(map[Type]*Info, len(table))
	for i := range table {
		m[table[i].Type] = &table[i]
	}
	return m
}()

// Types returns every weight type, in the table's order (float types first, then the
// block types from the most to the fewest bits).
func Types() []Type {
	out := make([]Type, len(table))
	for i, in := range table {
		out[i] = in.Type
	}
	return out
}

// Known reports whether t is a type of the table.
func (t Type) Known() bool { return byType[t] != nil }

// Info returns t's row of the table; ok is false for a type vdpp does not know (a ggml type
// such as IQ2_XXS, or a number no ggml version used).
func (t Type) Info() (in Info, ok bool) {
	p := byType[t]
	if p == nil {
		return Info{Type: t}, false
	}
	return *p, true
}

// String returns ggml's name for t ("q4_K"), or "ggml type N" for an unknown type.
func (t Type) String() string {
	if p := byType[t]; p != nil {
		return p.Name
	}
	return fmt.Sprintf("ggml type %d", uint32(t))
}

// BlockSize returns the number of weights in one block of t (0 for an unknown type).
func (t Type) BlockSize() int {
	if p := byType[t]; p != nil {
		return p.BlockSize
	}
	return 0
}

// BlockBytes returns the bytes of one block of t (0 for an unknown type).
func (t Type) BlockBytes() int {
	if p := byType[t]; p != nil {
		return p.BlockBytes
	}
	return 0
}

// Quantized reports whether t is a block type with per-block scales.
func (t Type) Quantized() bool {
	p := byType[t]
	return p != nil && p.Quantized
}

// Fits reports whether a row of n weights is a whole number of t's blocks.
func (t Type) Fits(n int) bool {
	bs := t.BlockSize()
	return bs > 0 && n >= 0 && n%bs == 0
}

// RowBytes returns the bytes n weights take in type t. It fails for an unknown type or when
// n is not a whole number of blocks.
func (t Type) RowBytes(n int) (int, error) {
	p := byType[t]
	if p == nil {
		return 0, fmt.Errorf("quant: unsupported %v", t)
	}
	if n < 0 || n%p.BlockSize != 0 {
		return 0, fmt.Errorf("quant: %d weights are not a whole number of %s blocks of %d", n, p.Name, p.BlockSize)
	}
	return n / p.BlockSize * p.BlockBytes, nil
}

// Bytes returns the bytes a tensor of n weights, in rows of row weights, takes in type t
// (n/row rows of RowBytes(row)); it fails when the rows do not fit t's blocks.
func (t Type) Bytes(n, row int) (int64, error) {
	if row <= 0 || n%row != 0 {
		return 0, fmt.Errorf("quant: %d weights are not rows of %d", n, row)
	}
	rb, err := t.RowBytes(row)
	if err != nil {
		return 0, err
	}
	return int64(n/row) * int64(rb), nil
}

// Parse returns the type a name spells: --weights-dtype's spelling, ggml's or GGUF's, in
// any case ("q4_k", "q4_K", "Q4_K", "BF16"). An unknown name is an error listing the names.
func Parse(s string) (Type, error) {
	for _, in := range table {
		if strings.EqualFold(s, in.Name) {
			return in.Type, nil
		}
	}
	return 0, fmt.Errorf("unknown weight type %q (one of %s)", s, strings.Join(Flags(), ", "))
}

// Flags returns every type's --weights-dtype spelling, in the table's order.
func Flags() []string {
	out := make([]string, len(table))
	for i, in := range table {
		out[i] = in.Flag
	}
	return out
}

// Fallback returns the type a tensor with rows of n weights, stored in type stored, is held
// in when t is asked for. A row that is a whole number of t's blocks takes t. Otherwise the
// GGUF quantizers' rule applies: a k-quant falls back to the 32-weight type of as many bits
// or more (llama.cpp's llama-quant.cpp: q4_K to q5_0, q5_K to q5_1, q6_K to q8_0, q2_K and
// q3_K to its 4-bit type of 32, here q4_0), and when no block type fits the tensor is not
// converted (stable-diffusion.cpp's convert and --type keep such a tensor as stored); a
// stored block type that cannot hold the row either becomes f16 (ComfyUI-GGUF's quantizer
// falls back to f16).
func (t Type) Fallback(n int, stored Type) Type {
	for cur := t; ; {
		if cur.Fits(n) {
			return cur
		}
		next, ok := fallback[cur]
		if !ok {
			break
		}
		cur = next
	}
	if stored.Known() && !stored.Quantized() {
		return stored
	}
	return F16
}

// fallback is the next type tried when a row is not a whole number of a type's blocks.
var fallback = map[Type]Type{
	Q2_K: Q4_0,
	Q3_K: Q4_0,
	Q4_K: Q5_0,
	Q5_K: Q5_1,
	Q6_K: Q8_0,
}
