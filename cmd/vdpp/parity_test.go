package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

// A Wan folder is detected from model_index.json and all its cases run and pass.
func TestParityDetectsWan(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	var out, errOut bytes.Buffer
	if err := runParity(context.Background(), []string{"--golden", dir, "--backend", "go"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"transformer_forward ", "transformer_forward_i2v", "vae_decode", "scheduler_unipc", "full_pipeline_moe", "within tolerance"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
