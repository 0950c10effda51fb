package safetensors

import "testing"

func TestToFloat32IntoReusesMemory(t *testing.T) {
	b := []byte{0x80, 0x3f, 0x00, 0x40} // bf16 1, 2
	buf := make([]float32, 1, 8)
	out, err := ToFloat32Into(buf, BF16, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0] != 1 || out[1] != 2 || &out[0] != &buf[:1][0] {
		t.Errorf("got %v (same memory %v)", out, &out[0] == &buf[:1][0])
	}
	out, err = ToFloat32Into(make([]float32, 0, 1), BF16, b) // too small: fresh memory
	if err != nil || len(out) != 2 || out[1] != 2 {
		t.Errorf("got %v, %v", out, err)
	}
	if _, err := ToFloat32Into(nil, I32, b); err == nil {
		t.Error("I32 converted")
	}
}
