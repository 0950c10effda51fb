package qgemm

import (
	"encoding/binary"
	"fmt"

	"github.com/vdpp/vdpp/tensor/quant"
)

// Type is a weight type (tensor/quant's table). The types with a kernel are Q8_0 and Q4_K.
type Type = quant.Type

// The types with a kernel.
const (
	Q8_0 = quant.Q8_0 // blocks of 32: an f16 scale d and 32 int8, w = d·q
	Q4_K = quant.Q4_K // super-blocks of 256: f16 d and dmin, 8 6-bit scales and mins, 4-bit quants
)

// PanelCols is the number of weight rows (output columns) one packed panel holds; a panel
// of a tensor whose row count is not a multiple of it is padded with zero weights.
const PanelCols = 32

// layout describes a type's ggml block (from tensor/quant's table) and its packed form.
type layout struct {
	blockK     int // weights along a row per ggml block
	blockBytes int // bytes of one ggml block
	panelBytes int // bytes of one block of PanelCols rows in the packed panel
}

// panelBytes is the size of one block of PanelCols rows in each type's panels.
var panelBytes = map[Type]int{
	// Q8_0 panel block: the 32 rows' f16 scales, then for each quad t of contracting
	// positions (4t..4t+3) and each row j the 4 quants as unsigned bytes (q+128).
	Q8_0: 64 + 8*PanelCols*4,
	// Q4_K panel super-block: the rows' f16 d, their f16 dmin, the 8 sub-blocks' 6-bit
	// scales [8][32] and mins [8][32] as bytes, then for each sub-block s, pair t (0..3) and
	// row j 4 bytes whose low nibbles are the quants of positions 32s+8t+i and high nibbles
	// those of 32s+8t+4+i (i < 4).
	Q4_K: 640 + 8*4*PanelCols*4,
}

var layouts = func() map[Type]layout {
	m := map[Type]layout{}
	for t, pb := range panelBytes {
		m[t] = layout{blockK: t.BlockSize(), blockBytes: t.BlockBytes(), panelBytes: pb}
	}
	return m
}()

func lookup(t Type) (layout, error) {
	l, ok := layouts[t]
	if !ok {
		return layout{}, fmt.Errorf("qgemm: no kernel for %v", t)
	}
	return l, nil
}

// Supported reports whether the kernels read type t.
func Supported(t Type) bool { _, ok := layouts[t]; return ok }

// BlockK returns the number of weights along a row in one block of t (a row's length
// must be a multiple of it), 0 for a type without a kernel.
func BlockK(t Type) int { return layouts[t].blockK }

// Weights is a weight matrix W [N, K] of type Type packed for the kernels: Data holds
// ceil(N/PanelCols) panels, each K/BlockK(Type) panel blocks. It is read-only once packed
// and safe for concurrent products.
type Weights struct {
	Type Type
	N, K int
	Data []byte
}

// PackedLen returns the bytes of W [n, k] of type t packed (n padded to whole panels).
func PackedLen(t Type, n, k int) (int, error) {
	l, err := lookup(t)
	if err != nil {
		return 0, err
	}
	if n <= 0 || k <= 0 || k%l.blockK != 0 {
		return 0, fmt.Errorf("qgemm: %v weights [%d, %d]: rows must be whole blocks of %d", t, n, k, l.blockK)
	}
	return (n + PanelCols - 1) / PanelCols * (k / l.blockK) * l.panelBytes, nil
}

// FromPacked wraps data, as Pack wrote it, as W [n, k] of type t (no copy).
func FromPacked(t Type, n, k int, data []byte) (*Weights, error) {
	size, err := PackedLen(t, n, k)
	if err != nil {
		return nil, err
	}
	if len(data) != size {
		return nil, fmt.Errorf("qgemm: %v weights [%d, %d] packed take %d bytes, got %d", t, n, k, size, len(data))
	}
	return &Weights{Type: t, N: n, K: k, Data: data}, nil
}

// Pack rearranges W [n, k] of type t, given as ggml stores it (n rows, each k/BlockK(t)
// blocks in order), into the kernels' panels (PackedLen bytes). The scales and quants are
// kept bit for bit: Unpack gives src back.
func Pack(t Type, n, k int, src []byte) (*Weights, error) {
	size, err := PackedLen(t, n, k)
	if err != nil {
		return nil, err
	}
	return PackInto(make([]byte, size), t, n, k, src)
}

// PackInto is Pack writing the panels into dst (PackedLen bytes; every byte is written),
// for a caller that owns the memory the weights are held in.
func PackInto(dst []byte, t Type, n, k int, src []byte) (*Weights, error) {
	size, err := PackedLen(t, n, k)
	if err != nil {
		return nil, err
	}
	l := layouts[t]
	nb := k / l.blockK
	if len(src) != n*nb*l.blockBytes || len(dst) != size {
		return nil, fmt.Errorf("qgemm: %v weights [%d, %d] take %d bytes in ggml's layout and %d packed, got %d and %d",
			t, n, k, n*nb*l.blockBytes, size, len(src), len(dst))
	}
	clear(dst)
	w := &Weights{Type: t, N: n, K: k, Data: dst}
	for j := range n {
		for b := range nb {
			blk := src[(j*nb+b)*l.blockBytes : (j*nb+b+1)*l.blockBytes]
			pb := w.panelBlock(j/PanelCols, b)
			switch t {
			case Q8_0:
				packQ8_0(pb, j%PanelCols, blk)
			case Q4_K:
				packQ4_K(pb, j%PanelCols, blk)
			}
		}
	}
	if n%PanelCols != 0 && t == Q8_0 {
		// Padding rows: zero scale, zero quants (stored as 128).
		for b := range nb {
			pb := w.panelBlock(n/PanelCols, b)
			for j := n % PanelCols; j < PanelCols; j++ {
				for q := range 8 {
					for i := range 4 {
						pb[64+q*PanelCols*4+j*4+i] = 0x80
					}
				}
			}
		}
	}
	return w, nil
}

// Unpack writes W back in ggml's layout (n rows of blocks) into dst.
func (w *Weights) Unpack(dst []byte) error {
	l := layouts[w.Type]
	nb := w.K / l.blockK
	if len(dst) != w.N*nb*l.blockBytes {
		return fmt.Errorf("qgemm: unpack %v [%d, %d] into %d bytes", w.Type, w.N, w.K, len(dst))
	}
	for j := range w.N {
		for b := range nb {
			blk := dst[(j*nb+b)*l.blockBytes : (j*nb+b+1)*l.blockBytes]
			pb := w.panelBlock(j/PanelCols, b)
			switch w.Type {
			case Q8_0:
				unpackQ8_0(blk, j%PanelCols, pb)
			case Q4_K:
				unpackQ4_K(blk, j%PanelCols, pb)
			}
		}
	}
	return nil
}

// panelBlock returns block b of panel p.
func (w *Weights) panelBlock(p, b int) []byte {
	l := layouts[w.Type]
	nb := w.K / l.blockK
	off := (p*nb + b) * l.panelBytes
	return w.Data[off : off+l.panelBytes]
}

// panel returns panel p (all its blocks).
func (w *Weights) panel(p int) []byte {
	l := layouts[w.Type]
	size := w.K / l.blockK * l.panelBytes
	return w.Data[p*size : (p+1)*size]
}

func packQ8_0(pb []byte, j int, blk []byte) {
	pb[2*j], pb[2*j+1] = blk[0], blk[1]
	for q := range 8 {
		for i := range 4 {
			pb[64+q*PanelCols*4+j*4+i] = blk[2+4*q+i] ^ 0x80
		}
	}
}

func unpackQ8_0(blk []byte, j int, pb []byte) {
	blk[0], blk[1] = pb[2*j], pb[2*j+1]
	for q := range 8 {
		for i := range 4 {
			blk[2+4*q+i] = pb[64+q*PanelCols*4+j*4+i] ^ 0x80
		}
	}
}

// q4KScaleMin is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block s.
func q4KScaleMin(s int, q []byte) (sc, m byte) {
	if s < 4 {
		return q[s] & 63, q[s+4] & 63
	}
	return q[s+4]&0xF | (q[s-4]>>6)<<4, q[s+4]>>4 | (q[s]>>6)<<4
}

// q4KQuant returns quant e (0..255) of a Q4_K block's 128 quant bytes: element 64g+l is the
// low nibble of qs[32g+l], element 64g+32+l its high nibble.
func q4KQuant(qs []byte, e int) byte {
	g, r := e/64, e%64
	if r < 32 {
		return qs[32*g+r] & 0xF
	}
	return qs[32*g+r-32] >> 4
}

const (
	q4kSc = 128
	q4kM  = 384
	q4kQ  = 640
)

func packQ4_K(pb []byte, j int, blk []byte) {
	copy(pb[2*j:], blk[0:2])
	copy(pb[64+2*j:], blk[2:4])
	scales, qs := blk[4:16], blk[16:144]
	for s := range 8 {
		sc, m := q4KScaleMin(s, scales)
		pb[q4kSc+s*PanelCols+j] = sc
		pb[q4kM+s*PanelCols+j] = m
		for t := range 4 {
			for i := range 4 {
				lo := q4KQuant(qs, 32*s+8*t+i)
				hi := q4KQuant(qs, 32*s+8*t+4+i)
				pb[q4kQ+s*512+t*PanelCols*4+j*4+i] = lo | hi<<4
			}
		}
	}
}

func unpackQ4_K(blk []byte, j int, pb []byte) {
	copy(blk[0:2], pb[2*j:2*j+2])
	copy(blk[2:4], pb[64+2*j:64+2*j+2])
	scales, qs := blk[4:16], blk[16:144]
	clear(scales)
	for s := range 8 {
		sc, m := pb[q4kSc+s*PanelCols+j], pb[q4kM+s*PanelCols+j]
		if s < 4 {
			scales[s] |= sc
			scales[s+4] |= m
		} else {
			scales[s+4] = sc&0xF | (m&0xF)<<4
			scales[s-4] |= (sc >> 4) << 6
			scales[s] |= (m >> 4) << 6
		}
	}
	clear(qs)
	for s := range 8 {
		for t := range 4 {
			for i := range 4 {
				v := pb[q4kQ+s*512+t*PanelCols*4+j*4+i]
				for h, e := range [2]int{32*s + 8*t + i, 32*s + 8*t + 4 + i} {
					nib := v & 0xF
					if h == 1 {
						nib = v >> 4
					}
					g, r := e/64, e%64
					if r < 32 {
						qs[32*g+r] |= nib
					} else {
						qs[32*g+r-32] |= nib << 4
					}
				}
			}
		}
	}
}

func half(b []byte) float32 { return quant.HalfToFloat32(binary.LittleEndian.Uint16(b)) }

// DequantizeRows writes weight rows j0..j1−1 of W widened to float32 into dst
// ([j1−j0][K]), each value as ggml's dequantize_row_* computes it (Q8_0: q·d; Q4_K:
// (d·sc)·q − dmin·m). It is for the uses of a weight other than a product (the products
// never widen it).
func (w *Weights) DequantizeRows(j0, j1 int, dst []float32) {
	if j0 < 0 || j1 > w.N || j0 > j1 || len(dst) < (j1-j0)*w.K {
		panic(fmt.Sprintf("qgemm: rows [%d, %d) of %v [%d, %d] into %d values", j0, j1, w.Type, w.N, w.K, len(dst)))
	}
	l := layouts[w.Type]
	nb := w.K / l.blockK
	for j := j0; j < j1; j++ {
		y := dst[(j-j0)*w.K : (j-j0+1)*w.K]
		c := j % PanelCols
		for b := range nb {
			pb := w.panelBlock(j/PanelCols, b)
			yb := y[b*l.blockK : (b+1)*l.blockK]
			switch w.Type {
			case Q8_0:
				d := half(pb[2*c:])
				for q := range 8 {
					for i := range 4 {
						yb[4*q+i] = float32(int8(pb[64+q*PanelCols*4+c*4+i]^0x80)) * d
					}
				}
			case Q4_K:
				d, dmin := half(pb[2*c:]), half(pb[64+2*c:])
				for s := range 8 {
					d1 := d * float32(pb[q4kSc+s*PanelCols+c])
					m1 := dmin * float32(pb[q4kM+s*PanelCols+c])
					for t := range 4 {
						for i := range 4 {
							v := pb[q4kQ+s*512+t*PanelCols*4+c*4+i]
							yb[32*s+8*t+i] = float32(d1*float32(v&0xF)) - m1
							yb[32*s+8*t+4+i] = float32(d1*float32(v>>4)) - m1
						}
					}
				}
			}
		}
	}
}
