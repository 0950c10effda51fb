package procedural

import (
	"image"
	"math"
	"testing"
)

func TestHeadingRule(t *testing.T) {
	c := HeadingConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		for _, o := range NewScene(c, 1, Train, i).Objects {
			if o.Shape != Arrow {
				t.Fatalf("clip %d: shape %d, want Arrow", i, o.Shape)
			}
			if s := math.Hypot(o.VX, o.VY); math.Abs(s-ArrowSpeed) > 1e-9 {
				t.Fatalf("clip %d: speed %v, want %v", i, s, ArrowSpeed)
			}
			if o.Half < c.MinHalf || o.Half > c.MaxHalf {
				t.Fatalf("clip %d: half %v outside %v..%v", i, o.Half, c.MinHalf, c.MaxHalf)
			}
		}
	}
}

// reach returns how far the drawn shape extends ahead of (x, y) along heading a and how far
// behind it (pixel centres of every non-background pixel, projected on the heading).
func reach(img *image.RGBA, x, y, a float64) (ahead, behind float64) {
	b := img.Bounds()
	for py := b.Min.Y; py < b.Max.Y; py++ {
		for px := b.Min.X; px < b.Max.X; px++ {
			if img.RGBAAt(px, py) == Background {
				continue
			}
			d := (float64(px)+0.5-x)*math.Cos(a) + (float64(py)+0.5-y)*math.Sin(a)
			ahead, behind = max(ahead, d), max(behind, -d)
		}
	}
	return ahead, behind
}

// TestArrowPointsAlongVelocity renders one arrow per heading and checks that its tip (which
// reaches Half ahead of the centre, against 0.77·Half behind) leads, before and after a
// bounce turns it round.
func TestArrowPointsAlongVelocity(t *testing.T) {
	c := HeadingConfig()
	for _, deg := range []float64{0, 45, 90, 200, 300} {
		a := deg * math.Pi / 180
		o := Object{Shape: Arrow, Half: 10, X: 32, Y: 32, VX: ArrowSpeed * math.Cos(a), VY: ArrowSpeed * math.Sin(a)}
		ahead, behind := reach(Render(c, []Object{o}), o.X, o.Y, a)
		if ahead < behind+1.2 || ahead > 10.5 {
			t.Errorf("heading %v°: reaches %.2f ahead and %.2f behind; want the tip ahead (about 10 vs 7.7)", deg, ahead, behind)
		}
	}
	// Heading right towards the right wall: after the bounce it points left.
	s := Scene{Objects: []Object{{Shape: Arrow, Half: 10, X: 50, Y: 32, VX: ArrowSpeed}}}
	o := s.At(c, 6)[0]
	if o.VX != -ArrowSpeed {
		t.Fatalf("after the wall: vx %v, want %v", o.VX, -ArrowSpeed)
	}
	if ahead, behind := reach(Render(c, []Object{o}), o.X, o.Y, math.Pi); ahead < behind+1.2 {
		t.Fatalf("after the bounce: reaches %.2f left and %.2f right; want it to point left", ahead, behind)
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rule
		ok   bool
	}{{"colour", ColourRule, true}, {"color", ColourRule, true}, {"heading", HeadingRule, true}, {"shape", 0, false}} {
		got, err := ParseRule(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("%q: %v %v", tc.in, got, err)
		}
		if tc.ok && got.String() != map[Rule]string{ColourRule: "colour", HeadingRule: "heading"}[tc.want] {
			t.Errorf("%q: String %q", tc.in, got.String())
		}
	}
}
