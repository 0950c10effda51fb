package video

import (
	"image"
	"image/color"
	"sort"
)

// histBits is the per-channel precision of the colour histogram used for the palette.
const histBits = 5

// colorBox is a box of histogram cells for median cut.
type colorBox struct {
	cells []int // histogram cell indices (r<<10 | g<<5 | b)
	count int
}

// Histogram is the colour histogram a GIF's global palette is cut from (5 bits per
// channel, with each cell's pixel sums). Add frames one at a time, in any order, then take
// Palette: the result is the same as from all frames at once, so a video can be streamed
// into it without holding its frames.
type Histogram struct {
	hist []int
	sums [][3]int
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	const cells = 1 << (3 * histBits)
	return &Histogram{hist: make([]int, cells), sums: make([][3]int, cells)}
}

// Add counts the pixels of f.
func (h *Histogram) Add(f image.Image) {
	pix, w, ht := rgb8(f)
	for i := 0; i < w*ht; i++ {
		r, g, b := int(pix[3*i]), int(pix[3*i+1]), int(pix[3*i+2])
		c := (r>>3)<<10 | (g>>3)<<5 | b>>3
		h.hist[c]++
		h.sums[c][0] += r
		h.sums[c][1] += g
		h.sums[c][2] += b
	}
}

// medianCutPalette builds a palette of at most n colours from the pixels of all frames
// (see Histogram.Palette).
func medianCutPalette(frames []image.Image, n int) color.Palette {
	h := NewHistogram()
	for _, f := range frames {
		h.Add(f)
	}
	return h.Palette(n)
}

// Palette returns a palette of at most n colours for the pixels counted: the histogram is
// split by median cut along the widest channel of the most populous box; each colour is
// the pixel-weighted mean of its box.
func (h *Histogram) Palette(n int) color.Palette {
	hist, sums := h.hist, h.sums
	var all []int
	total := 0
	for c, k := range hist {
		if k > 0 {
			all = append(all, c)
			total += k
		}
	}
	if len(all) == 0 {
		return color.Palette{color.RGBA{0, 0, 0, 255}}
	}
	boxes := []colorBox{{cells: all, count: total}}
	chanOf := func(c, ch int) int { return (c >> (10 - 5*ch)) & 31 }
	for len(boxes) < n {
		// Split the box with the largest count·extent that has more than one cell.
		best, bestScore, bestCh := -1, 0, 0
		for i, b := range boxes {
			if len(b.cells) < 2 {
				continue
			}
			for ch := 0; ch < 3; ch++ {
				lo, hi := 31, 0
				for _, c := range b.cells {
					v := chanOf(c, ch)
					lo, hi = min(lo, v), max(hi, v)
				}
				if score := (hi - lo + 1) * b.count; hi > lo && score > bestScore {
					best, bestScore, bestCh = i, score, ch
				}
			}
		}
		if best < 0 {
			break
		}
		b := boxes[best]
		sort.Slice(b.cells, func(i, j int) bool {
			vi, vj := chanOf(b.cells[i], bestCh), chanOf(b.cells[j], bestCh)
			if vi != vj {
				return vi < vj
			}
			return b.cells[i] < b.cells[j]
		})
		acc, cut := 0, 1
		for i, c := range b.cells {
			acc += hist[c]
			if acc*2 >= b.count {
				cut = min(max(i+1, 1), len(b.cells)-1)
				break
			}
		}
		left, right := colorBox{cells: b.cells[:cut]}, colorBox{cells: b.cells[cut:]}
		for _, c := range left.cells {
			left.count += hist[c]
		}
		right.count = b.count - left.count
		boxes[best] = left
		boxes = append(boxes, right)
	}
	pal := make(color.Palette, 0, len(boxes))
	for _, b := range boxes {
		var s [3]int
		for _, c := range b.cells {
			for ch := range s {
				s[ch] += sums[c][ch]
			}
		}
		pal = append(pal, color.RGBA{
			uint8((s[0] + b.count/2) / b.count), uint8((s[1] + b.count/2) / b.count),
			uint8((s[2] + b.count/2) / b.count), 255,
		})
	}
	return pal
}

// inverseMap caches the nearest palette index for 6-bit-per-channel colours.
type inverseMap struct {
	pal   color.Palette
	cache []int16 // -1 = not computed
}

func newInverseMap(pal color.Palette) *inverseMap {
	m := &inverseMap{pal: pal, cache: make([]int16, 1<<18)}
	for i := range m.cache {
		m.cache[i] = -1
	}
	return m
}

// nearest returns the palette index closest (squared RGB distance) to r, g, b.
func (m *inverseMap) nearest(r, g, b int) int {
	key := (r>>2)<<12 | (g>>2)<<6 | b>>2
	if v := m.cache[key]; v >= 0 {
		return int(v)
	}
	// Search with the cell centre so the cache is independent of visiting order.
	cr, cg, cb := (r>>2)<<2|2, (g>>2)<<2|2, (b>>2)<<2|2
	best, bestD := 0, 1<<62
	for i, c := range m.pal {
		pr, pg, pb, _ := c.RGBA()
		dr, dg, db := int(pr>>8)-cr, int(pg>>8)-cg, int(pb>>8)-cb
		if d := dr*dr + dg*dg + db*db; d < bestD {
			best, bestD = i, d
		}
	}
	m.cache[key] = int16(best)
	return best
}

// ditherFloydSteinberg maps img onto the palette with Floyd–Steinberg error diffusion
// (7/16, 3/16, 5/16, 1/16; serpentine-free, left to right).
func ditherFloydSteinberg(img image.Image, m *inverseMap) *image.Paletted {
	pix, w, h := rgb8(img)
	out := image.NewPaletted(image.Rect(0, 0, w, h), m.pal)
	cur := make([][3]int, w+2) // errors ×16, offset by 1
	next := make([][3]int, w+2)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var want [3]int
			for c := 0; c < 3; c++ {
				v := int(pix[3*(y*w+x)+c]) + (cur[x+1][c]+8)>>4
				want[c] = min(max(v, 0), 255)
			}
			idx := m.nearest(want[0], want[1], want[2])
			out.Pix[y*out.Stride+x] = uint8(idx)
			pr, pg, pb, _ := m.pal[idx].RGBA()
			got := [3]int{int(pr >> 8), int(pg >> 8), int(pb >> 8)}
			for c := 0; c < 3; c++ {
				e := want[c] - got[c]
				cur[x+2][c] += 7 * e
				next[x][c] += 3 * e
				next[x+1][c] += 5 * e
				next[x+2][c] += e
			}
		}
		cur, next = next, cur
		for i := range next {
			next[i] = [3]int{}
		}
	}
	return out
}
