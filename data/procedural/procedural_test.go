package procedural

import (
	"bytes"
	"image"
	"math"
	"testing"
)

func TestDeterministicAndSplitsDiffer(t *testing.T) {
	c := DefaultConfig()
	a := ToTensor(Video(c, 7, Train, 3))
	b := ToTensor(Video(c, 7, Train, 3))
	for i := range a.Data {
		if a.Data[i] != b.Data[i] {
			t.Fatalf("same (seed, split, index) differs at %d", i)
		}
	}
	diff := func(x, y []float32) bool {
		for i := range x {
			if x[i] != y[i] {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name  string
		seed  uint64
		split Split
		index int
	}{
		{"other index", 7, Train, 4},
		{"other split", 7, HeldOut, 3},
		{"other seed", 8, Train, 3},
	} {
		o := ToTensor(Video(c, tc.seed, tc.split, tc.index))
		if !diff(a.Data, o.Data) {
			t.Errorf("%s: identical clip", tc.name)
		}
	}
	if got := a.Shape; len(got) != 4 || got[0] != 14 || got[1] != 3 || got[2] != 64 || got[3] != 64 {
		t.Fatalf("shape %v, want [14 3 64 64]", got)
	}
}

func TestVelocityRule(t *testing.T) {
	for _, tc := range []struct {
		colour int
		shape  Shape
		vx, vy float64
	}{
		{0, Circle, CircleSpeed, 0},
		{0, Square, SquareSpeed, 0},
		{3, Circle, -CircleSpeed, 0},
		{1, Square, SquareSpeed / 2, SquareSpeed * math.Sqrt(3) / 2},
	} {
		vx, vy := Velocity(tc.colour, tc.shape)
		if math.Abs(vx-tc.vx) > 1e-12 || math.Abs(vy-tc.vy) > 1e-12 {
			t.Errorf("colour %d shape %d: (%v, %v), want (%v, %v)", tc.colour, tc.shape, vx, vy, tc.vx, tc.vy)
		}
	}
	c := ColourConfig()
	for i := 0; i < 50; i++ {
		for _, o := range NewScene(c, 1, Train, i).Objects {
			vx, vy := Velocity(o.Colour, o.Shape)
			if o.VX != vx || o.VY != vy {
				t.Fatalf("clip %d: object velocity (%v,%v) breaks the colour/shape rule", i, o.VX, o.VY)
			}
		}
	}
}

func TestBounce(t *testing.T) {
	c := Config{Width: 64, Height: 64, Frames: 14, MinObjects: 1, MaxObjects: 1, MinHalf: 6, MaxHalf: 6}
	for _, tc := range []struct {
		name          string
		x, vx         float64
		t             int
		wantX, wantVX float64
	}{
		{"free flight", 20, 3, 2, 26, 3},
		{"right wall", 55, 3, 1, 58 - 0, 3},  // 58 is the limit 64-6: touching, no reflection yet
		{"reflect right", 56, 3, 1, 57, -3},  // 59 -> 2*58-59
		{"reflect left", 7, -3, 1, 8, 3},     // 4 -> 2*6-4
		{"there and back", 52, 3, 4, 52, -3}, // 55, 58, 61->55, 52
	} {
		s := Scene{Objects: []Object{{Colour: 0, Shape: Circle, Half: 6, X: tc.x, Y: 32, VX: tc.vx}}}
		o := s.At(c, tc.t)[0]
		if math.Abs(o.X-tc.wantX) > 1e-9 || o.VX != tc.wantVX || o.Y != 32 {
			t.Errorf("%s: x %v vx %v y %v, want x %v vx %v", tc.name, o.X, o.VX, o.Y, tc.wantX, tc.wantVX)
		}
	}
	// Objects stay inside for every clip and frame.
	c = DefaultConfig()
	for i := 0; i < 30; i++ {
		s := NewScene(c, 3, HeldOut, i)
		for f := 0; f < c.Frames; f++ {
			for _, o := range s.At(c, f) {
				if o.X < o.Half || o.X > 64-o.Half || o.Y < o.Half || o.Y > 64-o.Half {
					t.Fatalf("clip %d frame %d: object at (%v,%v) half %v leaves the frame", i, f, o.X, o.Y, o.Half)
				}
			}
		}
	}
}

func TestRenderAndSheet(t *testing.T) {
	c := ColourConfig()
	o := Object{Colour: 2, Shape: Square, Half: 8, X: 32, Y: 32}
	img := Render(c, []Object{o})
	if got := img.RGBAAt(32, 32); got != Palette[2] {
		t.Fatalf("centre %v, want %v", got, Palette[2])
	}
	if got := img.RGBAAt(2, 2); got != Background {
		t.Fatalf("corner %v, want background", got)
	}
	rows := [][]image.Image{Images(Video(c, 1, HeldOut, 0))[:3], Images(Video(c, 1, HeldOut, 1))[:2]}
	sheet := ContactSheet(rows, 2, image.White)
	if b := sheet.Bounds(); b.Dx() != 3*64+4*2 || b.Dy() != 2*64+3*2 {
		t.Fatalf("sheet %v", b)
	}
	var buf bytes.Buffer
	if err := WriteContactSheet(&buf, rows); err != nil || buf.Len() == 0 {
		t.Fatal(err)
	}
}

func TestWriteFormats(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []Format{PNG, Safetensors} {
		paths, err := Write(dir, DefaultConfig(), 1, HeldOut, 2, f)
		if err != nil || len(paths) < 2 {
			t.Fatalf("%s: %v %v", f, paths, err)
		}
	}
	if _, err := Write(dir, DefaultConfig(), 1, HeldOut, 1, "gif"); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestParseSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Split
		ok   bool
	}{{"train", Train, true}, {"heldout", HeldOut, true}, {"test", HeldOut, true}, {"dev", 0, false}} {
		got, err := ParseSplit(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("%q: %v %v", tc.in, got, err)
		}
	}
}

func FuzzParseSplit(f *testing.F) {
	f.Add("train")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSplit(s)
		if err == nil && sp.String() != "train" && sp.String() != "heldout" {
			t.Fatalf("%q parsed to %v", s, sp)
		}
	})
}
