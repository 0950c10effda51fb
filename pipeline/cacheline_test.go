package pipeline_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/pipeline"
)

// records makes one sample's calls: one per step, computed where comp says, with the
// adaptive indicator vals[k] (NaN for none) and the latent change chg at a reuse.
func records(comp []bool, vals []float32, chg float32) []pipeline.CacheRecord {
	var out []pipeline.CacheRecord
	for k, c := range comp {
		r := pipeline.CacheRecord{Step: k, Branch: pipeline.BranchCond, Computed: c, Value: float32(math.NaN()), Change: float32(math.NaN())}
		if vals != nil {
			r.Value = vals[k]
		}
		if !c {
			r.Change = chg
		}
		out = append(out, r)
	}
	return out
}

func TestCacheLine(t *testing.T) {
	fb := pipeline.Cache{Mode: pipeline.CacheFB, Threshold: 0.1}
	nan := float32(math.NaN())
	for _, c := range []struct {
		name string
		o    pipeline.CacheOutcome
		want []string // substrings, in order
		not  []string
	}{
		{
			name: "reuses, estimated saving, latent change",
			o: pipeline.CacheOutcome{Steps: 4, DenoiseMS: 1000, ReuseFraction: 0.25,
				Samples: []pipeline.CacheSummary{pipeline.Summarize(fb, records([]bool{true, false, true, false}, []float32{nan, 0.05, 0.2, 0.08}, 0.02))}},
			// 2 computed + 2 x 0.25 = 2.5 units for 1000 ms; uncached 4 units = 1600 ms.
			want: []string{"cache fbcache (threshold 0.1): computed 2 of 4 calls, 2 of 4 steps", "denoising 1.00 s, about 0.60 s saved (38%, estimated)",
				"latent change at the 2 reuses: max 0.02, mean 0.02"},
		},
		{
			name: "measured saving and PSNR/SSIM",
			o: pipeline.CacheOutcome{Steps: 4, DenoiseMS: 1000, UncachedMS: 1500, PSNR: 41.234, SSIM: 0.99123,
				Samples: []pipeline.CacheSummary{pipeline.Summarize(fb, records([]bool{true, false, true, true}, nil, 0.01))}},
			want: []string{"computed 3 of 4 calls, 3 of 4 steps", "denoising 1.00 s, 0.50 s saved (33%)", "vs uncached: PSNR 41.23 dB, SSIM 0.9912"},
			not:  []string{"estimated", "latent change"},
		},
		{
			name: "measured slower than uncached",
			o: pipeline.CacheOutcome{Steps: 4, DenoiseMS: 760, UncachedMS: 600, PSNR: 65.63, SSIM: 1,
				Samples: []pipeline.CacheSummary{pipeline.Summarize(fb, records([]bool{true, false, true, true}, nil, 0.01))}},
			want: []string{"computed 3 of 4 calls, 3 of 4 steps", "denoising 0.76 s, none saved: the uncached run took 0.60 s", "vs uncached: PSNR 65.63 dB"},
			not:  []string{"-0.", "saved (", "estimated"},
		},
		{
			name: "nothing saved suggests a threshold",
			o: pipeline.CacheOutcome{Steps: 5, DenoiseMS: 800,
				Samples: []pipeline.CacheSummary{pipeline.Summarize(pipeline.Cache{Mode: pipeline.CacheFB, Threshold: 0.05},
					records([]bool{true, true, true, true, true}, []float32{nan, 0.12, 0.09, 0.3, 0.2}, 0))}},
			// Sorted values 0.09 0.12 0.2 0.3: the quarter is 0.09, rounded up to 0.091.
			want: []string{"cache fbcache (threshold 0.05): computed all 5 calls, nothing saved", "--cache-threshold 0.091 would have reused about 1 of the 4 calls that compared (indicator 0.09 to 0.3 this run)"},
		},
		{
			name: "deepcache, two samples",
			o: pipeline.CacheOutcome{Steps: 3, DenoiseMS: 600, ReuseFraction: 0.5,
				Samples: []pipeline.CacheSummary{
					pipeline.Summarize(pipeline.Cache{Mode: pipeline.CacheDeep, Interval: 3}, records([]bool{true, false, false}, nil, 0.1)),
					pipeline.Summarize(pipeline.Cache{Mode: pipeline.CacheDeep, Interval: 3}, records([]bool{true, false, false}, nil, 0.3)),
				}},
			want: []string{"cache deepcache (interval 3, branch 0): computed 2 of 6 calls, 2 of 6 steps", "latent change at the 4 reuses: max 0.3, mean 0.2"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			line := c.o.Line()
			at := 0
			for _, w := range c.want {
				i := strings.Index(line[at:], w)
				if i < 0 {
					t.Fatalf("line\n  %s\nlacks (after byte %d)\n  %s", line, at, w)
				}
				at += i + len(w)
			}
			for _, w := range c.not {
				if strings.Contains(line, w) {
					t.Fatalf("line\n  %s\nhas %q", line, w)
				}
			}
			if strings.Contains(line, "\n") {
				t.Fatalf("more than one line: %q", line)
			}
		})
	}
}

// A record's latent change survives JSON (report.json, bench's worker reports); a
// computing call has none.
func TestCacheRecordJSON(t *testing.T) {
	in := records([]bool{true, false}, []float32{float32(math.NaN()), 0.25}, 0.125)
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.Contains(s, `"latent_change":0.125`) || strings.Count(s, "latent_change") != 1 || !strings.Contains(s, `"value":null`) {
		t.Fatalf("JSON %s", s)
	}
	var out []pipeline.CacheRecord
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || !math.IsNaN(float64(out[0].Value)) || !math.IsNaN(float64(out[0].Change)) || out[1].Value != 0.25 || out[1].Change != 0.125 || out[1].Computed {
		t.Fatalf("round trip %+v", out)
	}
}
