package bench

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SVG layout, in pixels.
const (
	svgWidth       = 1200
	svgRight       = 28
	svgLaneH       = 38
	svgComputeTop  = 5    // compute bar offset inside a lane
	svgComputeH    = 20   // compute bar height
	svgCommTop     = 27   // send/recv bar offset inside a lane
	svgCommH       = 6    // send/recv bar height
	svgMinPx       = 3.0  // slices narrower than this may be merged with their neighbours
	svgMergeGapPx  = 0.75 // ... when the gap between them is at most this
	svgMaxTooltips = 3000 // beyond this many drawn slices, slices carry no <title>
	svgCharW       = 6.3  // average glyph width at 11px, for fitting labels
	svgFont        = "Helvetica, Arial, sans-serif"
)

// samplePalette colours compute slices by sample number (Tableau 10).
var samplePalette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

const (
	colorSend    = "#263238"
	colorRecv    = "#90a4ae"
	colorMerged  = "#616161" // merged compute slices of several samples
	colorMergedC = "#607d8b" // merged send and recv slices
	colorNoSamp  = "#9e9e9e"
	colorLaneA   = "#f6f7f9"
	colorLaneB   = "#ffffff"
	colorGrid    = "#dde1e6"
	colorText    = "#212121"
	colorSubtext = "#616161"
)

// SVGTitle returns a two-line chart title with the report's key numbers, for WriteSVG.
func SVGTitle(r Report) string {
	head := []string{"vdpp bench", orDash(r.Model), plural(r.NProc, "process", "processes"), plural(r.TotalSteps, "step", "steps")}
	nums := []string{
		"first sample " + fmtNum(r.FirstSampleMS) + " ms",
		"steady " + fmtNum(r.SteadySampleMS) + " ms/sample",
		fmtNum(r.ThroughputSamplesPerS) + " samples/s",
	}
	if r.HasBaseline() && r.Speedup > 0 {
		nums = append(nums, fmt.Sprintf("speedup %.2f× (%s efficiency)", r.Speedup, fmtPct(r.Efficiency)))
	}
	if r.EqualToBaseline != nil {
		nums = append(nums, "equal to baseline: "+strings.Trim(equalText(r.EqualToBaseline), "*"))
	}
	return strings.Join(head, " · ") + "\n" + strings.Join(nums, " · ")
}

// svgSlice is one rectangle to draw.
type svgSlice struct {
	x0, x1  float64
	fill    string
	pattern bool   // hatched overlay (encode/decode)
	label   string // written inside when it fits
	tip     string // tooltip
	merged  int    // >1 when several tiny slices were merged
}

// WriteSVG draws events as a standalone SVG Gantt chart: one lane per rank labelled
// "rank N · steps a–b" (steps first–last inclusive) with its busy percentage, a time axis
// in milliseconds from the earliest event, compute slices coloured by sample (a repeating
// 10-colour palette, the sample number written inside when it fits), encode/decode slices
// hatched, send (dark) and recv (light) as thin bars under the compute bar, idle time as
// gaps, a legend, and title (lines split at "\n"; see SVGTitle). Lanes come from stageSteps
// and from the ranks of the events. Wait events and kinds it does not know are not drawn.
// Slices narrower than a pixel that touch are merged into one grey slice so the file stays
// small for thousands of events. It fails with ErrBadEvent on an invalid event.
func WriteSVG(w io.Writer, events []Event, stageSteps [][2]int, title string) error {
	for i, e := range events {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("bench: svg: event %d: %w", i, err)
		}
	}
	nranks := len(stageSteps)
	for _, e := range events {
		nranks = max(nranks, e.Rank+1)
	}
	origin, end, ok := EventWindow(events)
	if !ok || end == origin {
		end = origin + 1e6 // an empty chart still gets a 1 ms axis
	}
	totalMS := float64(end-origin) / nsPerMS

	// Left margin fits the longest lane label.
	labels := make([]string, nranks)
	left := 110.0
	for r := range labels {
		labels[r] = rankLabel(r, stageSteps, "–", " · ", "")
		left = max(left, float64(len([]rune(labels[r])))*6.9+24)
	}
	left = min(left, 360)
	plotW := svgWidth - left - svgRight
	xOf := func(t int64) float64 { return left + float64(t-origin)/nsPerMS/totalMS*plotW }

	titleLines := strings.Split(strings.TrimRight(title, "\n"), "\n")
	if title == "" {
		titleLines = nil
	}
	top := 16.0 + 20*float64(len(titleLines))
	lanesH := float64(nranks) * svgLaneH
	axisY := top + lanesH
	legendY := axisY + 44
	height := legendY + 30

	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" font-family="%s">`+"\n",
		svgWidth, f2(height), svgWidth, f2(height), svgFont)
	p(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
		`<rect width="3" height="6" fill="#ffffff" fill-opacity="0.45"/></pattern></defs>` + "\n")
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	for i, line := range titleLines {
		size, weight, color := 12, "normal", colorSubtext
		if i == 0 {
			size, weight, color = 16, "bold", colorText
		}
		p(`<text x="16" y="%s" font-size="%d" font-weight="%s" fill="%s">%s</text>`+"\n", f2(22+20*float64(i)), size, weight, color, esc(line))
	}

	// Lanes and grid.
	for r := range nranks {
		fill := colorLaneA
		if r%2 == 1 {
			fill = colorLaneB
		}
		p(`<rect class="lane" data-rank="%d" x="0" y="%s" width="%d" height="%d" fill="%s"/>`+"\n", r, f2(top+float64(r)*svgLaneH), svgWidth, svgLaneH, fill)
	}
	step, decimals := niceTick(totalMS)
	var ticks []float64
	for t := 0.0; t <= totalMS*(1+1e-9); t += step {
		ticks = append(ticks, t)
	}
	for _, t := range ticks {
		x := left + t/totalMS*plotW
		p(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`+"\n", f2(x), f2(top), f2(x), f2(axisY), colorGrid)
	}

	// Slices, lane by lane.
	busy := RankAccounting(events, nranks, origin, end)
	byRank := make([][]Event, nranks)
	for _, e := range events {
		byRank[e.Rank] = append(byRank[e.Rank], e)
	}
	var rows [][]svgSlice
	var rowY []float64
	var rowH []float64
	drawn := 0
	for r := range nranks {
		evs := byRank[r]
		slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.Start, b.Start) })
		var comp, comm []svgSlice
		for _, e := range evs {
			s := svgSlice{x0: xOf(e.Start), x1: xOf(e.End)}
			samp := sampleList(e, "–")
			dur := fmt.Sprintf("%s ms at %s ms", fmtNum(float64(e.End-e.Start)/nsPerMS), fmtNum(float64(e.Start-origin)/nsPerMS))
			s.tip = fmt.Sprintf("rank %d · %s · %s", r, eventName(e, "–"), dur)
			switch e.Kind {
			case KindCompute, KindEncode, KindDecode:
				s.fill = sampleColor(e)
				s.label = samp
				if e.Kind != KindCompute {
					s.pattern = true
					s.label = strings.TrimSpace(e.Kind[:3] + " " + samp)
				}
				comp = append(comp, s)
			case KindSend:
				s.fill = colorSend
				comm = append(comm, s)
			case KindRecv:
				s.fill = colorRecv
				comm = append(comm, s)
			}
		}
		laneTop := top + float64(r)*svgLaneH
		for _, row := range [][]svgSlice{mergeTiny(comp, colorMerged), mergeTiny(comm, colorMergedC)} {
			drawn += len(row)
			rows = append(rows, row)
		}
		rowY = append(rowY, laneTop+svgComputeTop, laneTop+svgCommTop)
		rowH = append(rowH, svgComputeH, svgCommH)
	}
	tips := drawn <= svgMaxTooltips
	for i, row := range rows {
		y, h := rowY[i], rowH[i]
		for _, s := range row {
			wpx := max(s.x1-s.x0, 0.6)
			p(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"`, f2(s.x0), f2(y), f2(wpx), f2(h), s.fill)
			if tips && s.tip != "" {
				p(`><title>%s</title></rect>`+"\n", esc(s.tip))
			} else {
				p("/>\n")
			}
			if s.pattern {
				p(`<rect x="%s" y="%s" width="%s" height="%s" fill="url(#hatch)"/>`+"\n", f2(s.x0), f2(y), f2(wpx), f2(h))
			}
			if s.label != "" && h >= svgComputeH && float64(len([]rune(s.label)))*svgCharW+6 <= wpx {
				p(`<text x="%s" y="%s" font-size="11" text-anchor="middle" fill="%s" pointer-events="none">%s</text>`+"\n",
					f2(s.x0+wpx/2), f2(y+h/2+4), textColorOn(s.fill), esc(s.label))
			}
		}
	}

	// Lane labels.
	for r := range nranks {
		laneTop := top + float64(r)*svgLaneH
		p(`<text class="lane-label" x="%s" y="%s" font-size="12" text-anchor="end" fill="%s">%s</text>`+"\n",
			f2(left-10), f2(laneTop+16), colorText, esc(labels[r]))
		p(`<text x="%s" y="%s" font-size="10" text-anchor="end" fill="%s">busy %s</text>`+"\n",
			f2(left-10), f2(laneTop+30), colorSubtext, esc(fmtPct(busy[r].BusyFraction)))
	}

	// Time axis.
	p(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`+"\n", f2(left), f2(axisY), f2(left+plotW), f2(axisY), colorText)
	for _, t := range ticks {
		x := left + t/totalMS*plotW
		p(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", f2(x), f2(axisY), f2(x), f2(axisY+5), colorText)
		p(`<text x="%s" y="%s" font-size="11" text-anchor="middle" fill="%s">%s</text>`+"\n",
			f2(x), f2(axisY+18), colorText, strconv.FormatFloat(t, 'f', decimals, 64))
	}
	p(`<text x="%s" y="%s" font-size="11" text-anchor="end" fill="%s">time (ms)</text>`+"\n", f2(left+plotW), f2(axisY+34), colorSubtext)

	// Legend.
	x := 16.0
	ly := legendY
	p(`<text x="%s" y="%s" font-size="11" fill="%s">compute, colour = sample:</text>`+"\n", f2(x), f2(ly+10), colorText)
	x += 162
	for i := range 5 {
		p(`<rect x="%s" y="%s" width="22" height="14" fill="%s"/>`, f2(x), f2(ly), samplePalette[i])
		p(`<text x="%s" y="%s" font-size="10" text-anchor="middle" fill="%s">%d</text>`+"\n", f2(x+11), f2(ly+11), textColorOn(samplePalette[i]), i)
		x += 24
	}
	p(`<text x="%s" y="%s" font-size="11" fill="%s">…</text>`+"\n", f2(x+2), f2(ly+10), colorText)
	x += 30
	legend := []struct{ fill, pattern, text string }{
		{samplePalette[0], "hatch", "encode / decode"},
		{colorSend, "", "send"},
		{colorRecv, "", "recv"},
		{colorMerged, "", "many tiny slices"},
		{"none", "", "gap = idle"},
	}
	for _, it := range legend {
		stroke := ""
		if it.fill == "none" {
			stroke = ` stroke="#9e9e9e" stroke-dasharray="3,2"`
		}
		p(`<rect x="%s" y="%s" width="22" height="14" fill="%s"%s/>`, f2(x), f2(ly), it.fill, stroke)
		if it.pattern != "" {
			p(`<rect x="%s" y="%s" width="22" height="14" fill="url(#%s)"/>`, f2(x), f2(ly), it.pattern)
		}
		p(`<text x="%s" y="%s" font-size="11" fill="%s">%s</text>`+"\n", f2(x+28), f2(ly+11), colorText, esc(it.text))
		x += 28 + float64(len(it.text))*svgCharW + 22
	}
	if len(events) == 0 {
		p(`<text x="%s" y="%s" font-size="13" text-anchor="middle" fill="%s">no events</text>`+"\n",
			f2(left+plotW/2), f2(top+lanesH/2+5), colorSubtext)
	}
	p("</svg>\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("bench: write svg: %w", err)
	}
	return nil
}

// mergeTiny merges runs of slices narrower than svgMinPx separated by at most
// svgMergeGapPx into one slice (grey unless they all share a colour), so a row has at most
// about one slice per pixel and idle gaps wider than svgMergeGapPx stay visible. A merged
// slice keeps its colour when all its parts share one and takes mixedFill otherwise.
// Input is sorted by x0.
func mergeTiny(in []svgSlice, mixedFill string) []svgSlice {
	var out []svgSlice
	var cl *svgSlice
	sameFill := true
	flush := func() {
		if cl == nil {
			return
		}
		if cl.merged > 1 {
			if !sameFill {
				cl.fill = mixedFill
			}
			cl.pattern, cl.label = false, ""
			cl.tip = fmt.Sprintf("%d short slices", cl.merged)
		}
		out = append(out, *cl)
		cl = nil
	}
	for _, s := range in {
		if s.x1-s.x0 >= svgMinPx {
			flush()
			out = append(out, s)
			continue
		}
		if cl != nil && s.x0 <= cl.x1+svgMergeGapPx {
			sameFill = sameFill && s.fill == cl.fill
			cl.x1 = max(cl.x1, s.x1)
			cl.merged++
			continue
		}
		flush()
		c := s
		c.merged = 1
		cl = &c
		sameFill = true
	}
	flush()
	return out
}

// sampleColor picks the palette colour of the event's (first) sample.
func sampleColor(e Event) string {
	s := e.Sample
	if len(e.Samples) > 0 {
		s = e.Samples[0]
	}
	if s < 0 {
		return colorNoSamp
	}
	return samplePalette[s%int64(len(samplePalette))]
}

// textColorOn returns black or white, whichever reads better on the #rrggbb fill.
func textColorOn(fill string) string {
	if len(fill) != 7 || fill[0] != '#' {
		return colorText
	}
	v, err := strconv.ParseUint(fill[1:], 16, 32)
	if err != nil {
		return colorText
	}
	r, g, b := float64(v>>16&0xff), float64(v>>8&0xff), float64(v&0xff)
	if 0.299*r+0.587*g+0.114*b > 150 {
		return colorText
	}
	return "#ffffff"
}

// niceTick picks a tick step of 1, 2 or 5 times a power of ten giving at most about ten
// ticks over totalMS, and the decimals its labels need.
func niceTick(totalMS float64) (step float64, decimals int) {
	raw := totalMS / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	decimals = max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	return step, decimals
}

// f2 formats a coordinate with at most two decimals.
func f2(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writing to a strings.Builder cannot fail
	return b.String()
}
