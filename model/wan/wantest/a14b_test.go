package wantest

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// noMinus128 on a word equals the byte-by-byte replacement of 0x80 with 0x81.
func TestNoMinus128(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []uint64{0, 0x8080808080808080, 0x7f80817f80008001, 0xffffffffffffffff, 0x0180018001800180}
	for range 100000 {
		v := r.Uint64()
		// Plant 0x80 bytes and their neighbours 0x7f, 0x81, 0x00, 0x01.
		for k := range 8 {
			if r.IntN(3) == 0 {
				v = v&^(0xff<<(8*k)) | uint64([]byte{0x80, 0x7f, 0x81, 0x00, 0x01}[r.IntN(5)])<<(8*k)
			}
		}
		words = append(words, v)
	}
	for _, v := range words {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		for i := range b {
			if b[i] == 0x80 {
				b[i] = 0x81
			}
		}
		if got, want := noMinus128(v), binary.LittleEndian.Uint64(b[:]); got != want {
			t.Fatalf("noMinus128(%#016x) = %#016x, want %#016x", v, got, want)
		}
	}
}
