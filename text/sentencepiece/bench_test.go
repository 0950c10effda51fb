package sentencepiece

import "testing"

// BenchmarkEncode encodes the whole parity corpus once per iteration
// (scripts/tokenizer-bench.sh compares the rate with python3-sentencepiece).
func BenchmarkEncode(b *testing.B) {
	strs := goldenStrings(b)
	for _, name := range []string{"nfkc_4000_t5ids", "nmt_nfkc_8000"} {
		tok, err := Load("testdata/models/" + name + ".model")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, s := range strs {
					tok.Encode(s)
				}
			}
			b.ReportMetric(float64(b.N*len(strs))/b.Elapsed().Seconds(), "strings/s")
		})
	}
}
