package eval_test

import (
	"fmt"

	"github.com/vdpp/vdpp/eval"
)

func ExamplePSNR() {
	p, _ := eval.PSNR([]float32{0, 0, 0, 0}, []float32{0.1, 0.1, 0.1, 0.1})
	fmt.Printf("%.1f dB\n", p)
	fmt.Println(eval.MeanAfterFirst([]float64{100, 20, 22}))
	// Output:
	// 20.0 dB
	// 21
}

// ExampleCompare pairs two reports on the same three clips.
func ExampleCompare() {
	clips := func(psnr ...float64) []eval.ClipScore {
		var cs []eval.ClipScore
		for i, p := range psnr {
			cs = append(cs, eval.ClipScore{Index: i, PSNRAfterFirst: p})
		}
		return cs
	}
	a := eval.Report{Model: "old", Split: "heldout", Clips: clips(17.0, 18.5, 16.0)}
	b := eval.Report{Model: "new", Split: "heldout", Clips: clips(17.4, 18.6, 16.5)}
	c, err := eval.Compare(a, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("B - A = %+.2f ± %.2f dB, B better on %d/%d clips\n", c.PSNR.Diff, c.PSNR.StdErr, c.PSNR.BWins, c.PSNR.N)
	// Output:
	// B - A = +0.33 ± 0.12 dB, B better on 3/3 clips
}
