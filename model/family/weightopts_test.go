package family

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestWeightOptions(t *testing.T) {
	var w WeightOptions
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	w.RegisterFlags(fs)
	if err := fs.Parse([]string{"--transformer", "hi.gguf", "--transformer-2=lo.safetensors"}); err != nil {
		t.Fatal(err)
	}
	if w.File("transformer") != "hi.gguf" || w.File("transformer_2") != "lo.safetensors" || w.File("unet") != "" || w.File("vae") != "" {
		t.Errorf("%+v", w)
	}
	if got := w.Args(); !slices.Equal(got, []string{"--transformer=hi.gguf", "--transformer-2=lo.safetensors"}) {
		t.Errorf("Args %q", got)
	}
	if err := w.Check("wan", "transformer", "transformer_2"); err != nil {
		t.Error(err)
	}
	if err := w.Check("wan", "transformer"); err == nil || err.Error() != "--transformer-2: a wan model has no transformer_2 component (it takes --transformer)" {
		t.Errorf("one expert: %v", err)
	}
	if err := (WeightOptions{UNet: "u.gguf"}).Check("synthetic"); err == nil || !strings.Contains(err.Error(), "(it takes no weights file)") {
		t.Errorf("a simulator: %v", err)
	}
	for _, dt := range []string{"", "auto", "q4_k", "Q4_K_M", "q4_k_m", "bf16"} {
		if err := (WeightOptions{DType: dt}).Check("wan"); err != nil {
			t.Errorf("--weights-dtype %q: %v", dt, err)
		}
	}
	if err := (WeightOptions{DType: "q4_k_s"}).Check("wan"); err == nil || !strings.HasPrefix(err.Error(), `--weights-dtype: unknown weight type "q4_k_s"`) || !strings.Contains(err.Error(), "q4_k_m") {
		t.Errorf("q4_k_s: %v", err)
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "q4_k, q4_1, q4_0, q3_k, q2_k, q4_k_m") {
		t.Errorf("--weights-dtype's help does not list the mixes after the types:\n%s", help.String())
	}
}
