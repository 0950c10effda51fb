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
}
