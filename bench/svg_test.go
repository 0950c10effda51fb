package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var svgOut = flag.String("svgout", "", "directory to write the example SVG charts to, for looking at them")

// svgDoc is what a test learns from parsing a chart.
type svgDoc struct {
	root       string
	lanes      []string // data-rank of each lane background, in order
	laneLabels []string
	texts      []string
	rects      int
}

func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var doc svgDoc
	var inLabel, inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if doc.root == "" {
				doc.root = el.Name.Local
				if el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", el.Name.Space)
				}
			}
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "rect":
				doc.rects++
				if attr["class"] == "lane" {
					doc.lanes = append(doc.lanes, attr["data-rank"])
				}
			case "text":
				inText, inLabel = true, attr["class"] == "lane-label"
			}
		case xml.EndElement:
			if el.Name.Local == "text" {
				inText, inLabel = false, false
			}
		case xml.CharData:
			if inLabel {
				doc.laneLabels = append(doc.laneLabels, string(el))
			}
			if inText {
				doc.texts = append(doc.texts, string(el))
			}
		}
	}
	return doc
}

func writeSVGFile(t *testing.T, name string, data []byte) {
	if *svgOut == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*svgOut, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteSVG(t *testing.T) {
	events, stages, comp := simPipeline(1_700_000_000_000_000_000, 4, 25, 10, 3*ms, ms/2, 5*ms)
	r := sampleReport()
	tm, err := ComputeTiming(1_700_000_000_000_000_000, comp, 2)
	if err != nil {
		t.Fatal(err)
	}
	r.SetTiming(tm)
	r.StageSteps = stages
	r.ComputeSpeedup()
	title := SVGTitle(r)
	var buf bytes.Buffer
	if err := WriteSVG(&buf, events, stages, title); err != nil {
		t.Fatal(err)
	}
	writeSVGFile(t, "pipeline.svg", buf.Bytes())
	doc := parseSVG(t, buf.Bytes())
	if doc.root != "svg" {
		t.Fatalf("root element %q", doc.root)
	}
	if strings.Join(doc.lanes, ",") != "0,1,2,3" {
		t.Errorf("lanes %v, want one per rank 0..3", doc.lanes)
	}
	wantLabels := []string{"rank 0 · steps 0–5", "rank 1 · steps 6–11", "rank 2 · steps 12–17", "rank 3 · steps 18–24"}
	if strings.Join(doc.laneLabels, "|") != strings.Join(wantLabels, "|") {
		t.Errorf("lane labels %q, want %q", doc.laneLabels, wantLabels)
	}
	all := strings.Join(doc.texts, "\n")
	for _, want := range []string{
		"vdpp bench · svd-dev · 4 processes · 25 steps", // title
		"steady 26.50 ms/sample",                        // last stage: 0.5 recv + 7 steps * 3 + 5 decode
		"time (ms)", "send", "recv", "gap = idle",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q; texts:\n%s", want, all)
		}
	}
	// Sample numbers are written inside the wide compute slices.
	for _, s := range []string{"0", "5", "9"} {
		if !containsLine(doc.texts, s) {
			t.Errorf("no slice labelled %q", s)
		}
	}
	if !strings.Contains(buf.String(), "<title>rank 2 · sample 4 steps 12–17 · 18.00 ms at") {
		t.Errorf("compute slice tooltip missing")
	}
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func TestWriteSVGEscapesAndEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSVG(&buf, nil, [][2]int{{0, 2}, {2, 4}}, `a <b> & "c"`+"\nsecond line"); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	if len(doc.lanes) != 2 {
		t.Errorf("%d lanes, want 2 (from stageSteps)", len(doc.lanes))
	}
	if doc.texts[0] != `a <b> & "c"` || doc.texts[1] != "second line" {
		t.Errorf("title texts %q", doc.texts[:2])
	}
	if !containsLine(doc.texts, "no events") {
		t.Error("empty chart does not say so")
	}
}

func TestWriteSVGInvalidEvent(t *testing.T) {
	err := WriteSVG(&bytes.Buffer{}, []Event{{Rank: -1, Kind: KindCompute}}, nil, "")
	if !errors.Is(err, ErrBadEvent) {
		t.Errorf("err = %v, want ErrBadEvent", err)
	}
}

func TestWriteSVGManyEventsStaysSmall(t *testing.T) {
	// 8 ranks x 2000 samples: ~56k events, far more than pixels.
	events, stages, _ := simPipeline(0, 8, 48, 2000, 100_000, 20_000, 300_000)
	var buf bytes.Buffer
	if err := WriteSVG(&buf, events, stages, "dense"); err != nil {
		t.Fatal(err)
	}
	writeSVGFile(t, "dense.svg", buf.Bytes())
	doc := parseSVG(t, buf.Bytes())
	if len(doc.lanes) != 8 {
		t.Errorf("%d lanes, want 8", len(doc.lanes))
	}
	// At most about one slice per pixel per row (2 rows per lane, ~1000 px each).
	if doc.rects > 8*2*1100+100 {
		t.Errorf("%d rects for %d events: tiny slices were not merged", doc.rects, len(events))
	}
	if buf.Len() > 1<<20 {
		t.Errorf("SVG is %d bytes, want under 1 MiB", buf.Len())
	}
	if !strings.Contains(buf.String(), " short slices</title>") {
		t.Error("merged slices lack their tooltip")
	}
}

func TestWriteSVGDropsTooltipsWhenCrowded(t *testing.T) {
	// 8 ranks x 500 slices of 1 unit, 3 units apart: each well under a pixel with gaps over a
	// pixel, so nothing merges and 4000 slices are drawn, more than svgMaxTooltips.
	var events []Event
	for r := range 8 {
		for i := range int64(500) {
			events = append(events, Event{Rank: r, Kind: KindCompute, Sample: i, Start: 3 * i * ms, End: (3*i + 1) * ms})
		}
	}
	var buf bytes.Buffer
	if err := WriteSVG(&buf, events, nil, "crowded"); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	if doc.rects < 4000 {
		t.Errorf("%d rects, want every one of the 4000 separate slices drawn", doc.rects)
	}
	if strings.Contains(buf.String(), "<title>") {
		t.Error("tooltips kept in a chart with more than svgMaxTooltips slices")
	}
}

func TestMergeTiny(t *testing.T) {
	sl := func(x0, x1 float64, fill string) svgSlice { return svgSlice{x0: x0, x1: x1, fill: fill, label: "x"} }
	tests := []struct {
		name string
		in   []svgSlice
		want []svgSlice // only x0, x1, fill, merged compared
	}{
		{"wide slices untouched", []svgSlice{sl(0, 10, "a"), sl(10, 20, "b")},
			[]svgSlice{{x0: 0, x1: 10, fill: "a"}, {x0: 10, x1: 20, fill: "b"}}},
		{"touching tiny merge grey", []svgSlice{sl(0, 1, "a"), sl(1.2, 2, "b"), sl(2.5, 3, "a")},
			[]svgSlice{{x0: 0, x1: 3, fill: colorMerged, merged: 3}}},
		{"same colour kept", []svgSlice{sl(0, 1, "a"), sl(1.5, 2, "a")},
			[]svgSlice{{x0: 0, x1: 2, fill: "a", merged: 2}}},
		{"gap breaks a run", []svgSlice{sl(0, 1, "a"), sl(5, 6, "b")},
			[]svgSlice{{x0: 0, x1: 1, fill: "a", merged: 1}, {x0: 5, x1: 6, fill: "b", merged: 1}}},
		{"wide slice breaks a run", []svgSlice{sl(0, 1, "a"), sl(1, 9, "w"), sl(9, 10, "a")},
			[]svgSlice{{x0: 0, x1: 1, fill: "a", merged: 1}, {x0: 1, x1: 9, fill: "w"}, {x0: 9, x1: 10, fill: "a", merged: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeTiny(tc.in, colorMerged)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d slices %+v, want %d", len(got), got, len(tc.want))
			}
			for i, g := range got {
				w := tc.want[i]
				if g.x0 != w.x0 || g.x1 != w.x1 || g.fill != w.fill || g.merged != w.merged {
					t.Errorf("slice %d = %+v, want %+v", i, g, w)
				}
				if g.merged > 1 && g.label != "" {
					t.Errorf("merged slice keeps label %q", g.label)
				}
			}
		})
	}
}

func TestNiceTick(t *testing.T) {
	tests := []struct {
		total    float64
		step     float64
		decimals int
	}{{320, 50, 0}, {100, 10, 0}, {1, 0.1, 1}, {0.07, 0.01, 2}, {2500, 500, 0}, {13, 2, 0}}
	for _, tc := range tests {
		step, dec := niceTick(tc.total)
		if !near(step, tc.step) || dec != tc.decimals {
			t.Errorf("niceTick(%v) = %v, %d; want %v, %d", tc.total, step, dec, tc.step, tc.decimals)
		}
	}
}

func TestTextColorOn(t *testing.T) {
	if textColorOn("#000000") != "#ffffff" || textColorOn("#ffffff") != colorText || textColorOn("bad") != colorText {
		t.Error("text colour does not follow the fill's lightness")
	}
}
