// Package procedural generates vdpp's procedural video dataset: short clips of 1-3 shapes
// on a plain dark background in which the first frame determines the future. Under the
// heading rule (DefaultRule, the built-in model's) the shapes are arrowheads that fly where
// they point; under the colour rule an object's colour sets its direction and its shape its
// speed. Objects move in straight lines and bounce off the walls (elastic reflection), and
// nothing random happens after frame 0, so a generated clip can be compared with the true
// continuation.
//
// Contract: a sample is a pure function of (seed, split, index): Sample never reads a
// clock or global state, and the same arguments give bit-identical frames on every run and
// platform. The train and held-out splits draw from disjoint PCG streams.
package procedural

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"

	"github.com/vdpp/vdpp/tensor"
)

// Split names a disjoint part of the dataset.
type Split int

const (
	// Train is the training split (unbounded: any index is a sample).
	Train Split = iota
	// HeldOut is the evaluation split.
	HeldOut
)

// String names the split.
func (s Split) String() string {
	switch s {
	case Train:
		return "train"
	case HeldOut:
		return "heldout"
	}
	return fmt.Sprintf("Split(%d)", int(s))
}

// ParseSplit parses "train" or "heldout".
func ParseSplit(s string) (Split, error) {
	switch s {
	case "train":
		return Train, nil
	case "heldout", "held-out", "test":
		return HeldOut, nil
	}
	return 0, fmt.Errorf("procedural: unknown split %q (want train or heldout)", s)
}

// Shape is an object's shape; it sets the speed.
type Shape int

const (
	// Circle moves at CircleSpeed pixels per frame.
	Circle Shape = iota
	// Square moves at SquareSpeed pixels per frame.
	Square
	// Arrow is the heading rule's shape: a triangle whose tip points along its velocity.
	Arrow
)

// Rule names how the first frame determines the future.
type Rule int

const (
	// ColourRule: an object's palette colour sets its direction (colour i moves at i·60°)
	// and its shape its speed (circle CircleSpeed, square SquareSpeed).
	ColourRule Rule = iota
	// HeadingRule: every object is an arrowhead of one colour (ArrowColour) moving at
	// ArrowSpeed where it points; after a bounce it points along its new velocity.
	HeadingRule
)

// String names the rule.
func (r Rule) String() string {
	switch r {
	case ColourRule:
		return "colour"
	case HeadingRule:
		return "heading"
	}
	return fmt.Sprintf("Rule(%d)", int(r))
}

// RuleUsage is the help of a --rule flag (a *Rule is its flag.Value).
const RuleUsage = "dataset rule: colour (colour sets direction, shape speed) or heading (arrows move where they point)"

// Set implements flag.Value (ParseRule): a *Rule is a command-line flag.
func (r *Rule) Set(s string) error {
	v, err := ParseRule(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRule parses "colour" or "heading".
func ParseRule(s string) (Rule, error) {
	switch s {
	case "colour", "color":
		return ColourRule, nil
	case "heading":
		return HeadingRule, nil
	}
	return 0, fmt.Errorf("procedural: unknown rule %q (want colour or heading)", s)
}

// Speeds in pixels per frame, by shape.
const (
	CircleSpeed = 3.0
	SquareSpeed = 1.5
	ArrowSpeed  = 2.5
)

// ArrowColour is the one object colour of the heading rule.
var ArrowColour = color.RGBA{235, 225, 200, 255}

// Palette holds the object colours; colour i moves in direction i·60° (0° = +x, 90° = +y,
// image rows grow downwards).
var Palette = []color.RGBA{
	{230, 60, 50, 255},  // red: right
	{240, 200, 40, 255}, // yellow: down-right
	{60, 200, 80, 255},  // green: down-left
	{60, 210, 220, 255}, // cyan: left
	{70, 100, 240, 255}, // blue: up-left
	{220, 80, 220, 255}, // magenta: up-right
}

// Background is the plain background colour.
var Background = color.RGBA{24, 26, 34, 255}

// Config sets the clip geometry and the rule.
type Config struct {
	Rule                  Rule
	Width, Height, Frames int
	MinObjects            int
	MaxObjects            int
	MinHalf, MaxHalf      float64 // half-size (radius) range in pixels
}

// DefaultRule is the rule of the dataset vdpp's built-in model is trained and evaluated on.
const DefaultRule = HeadingRule

// DefaultConfig is ConfigFor(DefaultRule).
func DefaultConfig() Config { return ConfigFor(DefaultRule) }

// ConfigFor returns the 64x64, 14-frame configuration of a rule: ColourConfig or
// HeadingConfig.
func ConfigFor(r Rule) Config {
	if r == HeadingRule {
		return HeadingConfig()
	}
	return ColourConfig()
}

// ColourConfig is the colour rule, 64x64, 14 frames, 1-3 objects of radius 6-9 px.
func ColourConfig() Config {
	return Config{Rule: ColourRule, Width: 64, Height: 64, Frames: 14, MinObjects: 1, MaxObjects: 3, MinHalf: 6, MaxHalf: 9}
}

// HeadingConfig is the heading rule, 64x64, 14 frames, 1-3 arrows of corner radius 8-12 px.
func HeadingConfig() Config {
	return Config{Rule: HeadingRule, Width: 64, Height: 64, Frames: 14, MinObjects: 1, MaxObjects: 3, MinHalf: 8, MaxHalf: 12}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Width < 8 || c.Height < 8 || c.Frames < 1:
		return fmt.Errorf("procedural: %dx%d, %d frames: too small", c.Width, c.Height, c.Frames)
	case c.MinObjects < 1 || c.MaxObjects < c.MinObjects:
		return fmt.Errorf("procedural: objects %d..%d", c.MinObjects, c.MaxObjects)
	case c.MinHalf <= 0 || c.MaxHalf < c.MinHalf || 2*c.MaxHalf >= float64(min(c.Width, c.Height)):
		return fmt.Errorf("procedural: half-size %v..%v does not fit %dx%d", c.MinHalf, c.MaxHalf, c.Width, c.Height)
	}
	return nil
}

// Object is one shape: its colour index (unused by arrows), shape, half-size (for an
// arrow, the distance from its centre to its corners) and its centre and velocity at
// frame 0.
type Object struct {
	Colour int
	Shape  Shape
	Half   float64
	X, Y   float64
	VX, VY float64
}

// Velocity returns the velocity the data's rule gives a colour and shape.
func Velocity(colour int, s Shape) (vx, vy float64) {
	speed := CircleSpeed
	if s == Square {
		speed = SquareSpeed
	}
	a := float64(colour) * math.Pi / 3
	return speed * math.Cos(a), speed * math.Sin(a)
}

// Scene is a sample's objects at frame 0.
type Scene struct {
	Objects []Object
}

// NewScene draws the scene of (seed, split, index).
func NewScene(c Config, seed uint64, split Split, index int) Scene {
	r := rand.New(rand.NewPCG(seed^uint64(split+1)*0x9E3779B97F4A7C15, uint64(index)))
	n := c.MinObjects + r.IntN(c.MaxObjects-c.MinObjects+1)
	objs := make([]Object, n)
	if c.Rule == HeadingRule {
		for i := range objs {
			o := Object{Shape: Arrow}
			o.place(c, r)
			a := r.Float64() * 2 * math.Pi
			o.VX, o.VY = ArrowSpeed*math.Cos(a), ArrowSpeed*math.Sin(a)
			objs[i] = o
		}
		return Scene{Objects: objs}
	}
	for i := range objs {
		o := Object{Colour: r.IntN(len(Palette)), Shape: Shape(r.IntN(2))}
		o.place(c, r)
		o.VX, o.VY = Velocity(o.Colour, o.Shape)
		objs[i] = o
	}
	return Scene{Objects: objs}
}

// place draws the object's half-size and a centre that keeps it inside the frame.
func (o *Object) place(c Config, r *rand.Rand) {
	o.Half = c.MinHalf + r.Float64()*(c.MaxHalf-c.MinHalf)
	o.X = o.Half + r.Float64()*(float64(c.Width)-2*o.Half)
	o.Y = o.Half + r.Float64()*(float64(c.Height)-2*o.Half)
}

// reflect moves a coordinate p by v within [lo, hi], bouncing elastically, and returns
// the new position and velocity.
func reflect(p, v, lo, hi float64) (float64, float64) {
	p += v
	for p < lo || p > hi {
		if p < lo {
			p = 2*lo - p
		} else {
			p = 2*hi - p
		}
		v = -v
	}
	return p, v
}

// At returns the objects' state at frame t (frame 0 is the scene itself): each centre
// moves by its velocity per frame and bounces off the walls so the shape stays inside.
func (s Scene) At(c Config, t int) []Object {
	out := make([]Object, len(s.Objects))
	copy(out, s.Objects)
	for f := 0; f < t; f++ {
		for i := range out {
			o := &out[i]
			o.X, o.VX = reflect(o.X, o.VX, o.Half, float64(c.Width)-o.Half)
			o.Y, o.VY = reflect(o.Y, o.VY, o.Half, float64(c.Height)-o.Half)
		}
	}
	return out
}

// Render draws objects (in order, later on top) over the background with 4x4
// supersampling.
func Render(c Config, objs []Object) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, c.Width, c.Height))
	shapes := make([]outline, len(objs))
	for i, o := range objs {
		shapes[i] = outlineOf(o)
	}
	const ss = 4
	for y := 0; y < c.Height; y++ {
		for x := 0; x < c.Width; x++ {
			var acc [3]int
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					px := float64(x) + (float64(sx)+0.5)/ss
					py := float64(y) + (float64(sy)+0.5)/ss
					col := Background
					for _, sh := range shapes {
						if sh.inside(px, py) {
							col = sh.o.colour()
						}
					}
					acc[0] += int(col.R)
					acc[1] += int(col.G)
					acc[2] += int(col.B)
				}
			}
			const n = ss * ss
			img.SetRGBA(x, y, color.RGBA{uint8((acc[0] + n/2) / n), uint8((acc[1] + n/2) / n), uint8((acc[2] + n/2) / n), 255})
		}
	}
	return img
}

func (o Object) colour() color.RGBA {
	if o.Shape == Arrow {
		return ArrowColour
	}
	return Palette[o.Colour]
}

// arrowRearAngle is the angle between an arrow's heading and the directions from its
// centre to its two rear corners.
const arrowRearAngle = 140 * math.Pi / 180

// outline is an object ready to be hit-tested: for an arrow, its three corners relative
// to its centre, computed once per frame rather than at every supersample.
type outline struct {
	o       Object
	corners [3][2]float64
}

func outlineOf(o Object) outline {
	sh := outline{o: o}
	if o.Shape == Arrow {
		h := math.Atan2(o.VY, o.VX)
		for i, a := range [3]float64{h, h + arrowRearAngle, h - arrowRearAngle} {
			sh.corners[i] = [2]float64{o.Half * math.Cos(a), o.Half * math.Sin(a)}
		}
	}
	return sh
}

// inside reports whether the point (px, py) is covered by the object.
func (sh *outline) inside(px, py float64) bool {
	o := &sh.o
	dx, dy := px-o.X, py-o.Y
	switch o.Shape {
	case Square:
		return math.Abs(dx) <= o.Half && math.Abs(dy) <= o.Half
	case Arrow:
		// The point is inside when it is on the same side of all three edges.
		v := &sh.corners
		var pos, neg bool
		for i := range v {
			a, b := v[i], v[(i+1)%3]
			cross := (b[0]-a[0])*(dy-a[1]) - (b[1]-a[1])*(dx-a[0])
			pos = pos || cross > 0
			neg = neg || cross < 0
		}
		return !(pos && neg)
	}
	return dx*dx+dy*dy <= o.Half*o.Half
}

// Video renders the clip of (seed, split, index): c.Frames frames.
func Video(c Config, seed uint64, split Split, index int) []*image.RGBA {
	sc := NewScene(c, seed, split, index)
	frames := make([]*image.RGBA, c.Frames)
	for t := range frames {
		frames[t] = Render(c, sc.At(c, t))
	}
	return frames
}

// ToTensor converts frames to [T, 3, H, W] in [-1, 1] (the VAE's input range).
func ToTensor(frames []*image.RGBA) *tensor.Dense {
	b := frames[0].Bounds()
	h, w := b.Dy(), b.Dx()
	out := tensor.New(len(frames), 3, h, w)
	plane := h * w
	for t, f := range frames {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				p := f.RGBAAt(b.Min.X+x, b.Min.Y+y)
				base := t*3*plane + y*w + x
				out.Data[base] = float32(p.R)/127.5 - 1
				out.Data[base+plane] = float32(p.G)/127.5 - 1
				out.Data[base+2*plane] = float32(p.B)/127.5 - 1
			}
		}
	}
	return out
}

// Batch renders count consecutive samples from index start of a split as one tensor
// [count, T, 3, H, W] in [-1, 1].
func Batch(c Config, seed uint64, split Split, start, count int) *tensor.Dense {
	per := c.Frames * 3 * c.Height * c.Width
	out := tensor.New(count, c.Frames, 3, c.Height, c.Width)
	for i := 0; i < count; i++ {
		v := ToTensor(Video(c, seed, split, start+i))
		copy(out.Data[i*per:(i+1)*per], v.Data)
	}
	return out
}
