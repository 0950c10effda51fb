// Package wantest builds Wan folders for tests: the tiny two-expert wan-dev checkpoint
// (../shared/golden/wan-dev) with the tiny text encoder and tokenizer of
// model/wan/testdata/prompts (made by reference.py there), so prompts run end to end.
//
// Contract: PromptFolder fails the test (or skips it outside CI when wan-dev is absent, see
// internal/shared.Require); it writes only under the test's temporary folder.
package wantest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

// PromptsDir returns model/wan/testdata/prompts: text_encoder/, tokenizer/, the reference
// embeddings and prompts.
func PromptsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "prompts")
}

// PromptFolder returns a new Wan text-to-video folder: wan-dev's transformers, VAE and
// scheduler (linked), the tiny text_encoder/ and tokenizer/ (linked), and a
// model_index.json that lists them as a real Wan folder does.
func PromptFolder(t testing.TB) string {
	t.Helper()
	dev := shared.Require(t, "golden", "wan-dev")
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dev, "model_index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]any
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatal(err)
	}
	index["text_encoder"] = []string{"transformers", "UMT5EncoderModel"}
	index["tokenizer"] = []string{"transformers", "T5TokenizerFast"}
	out, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model_index.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	link := func(from, name string) {
		abs, err := filepath.Abs(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"transformer", "transformer_2", "vae", "scheduler"} {
		link(dev, c)
	}
	for _, c := range []string{"text_encoder", "tokenizer"} {
		link(PromptsDir(), c)
	}
	return dir
}

// I2VFolder returns model/wan/testdata/i2v/NAME, a committed image-to-video reference
// folder.
func I2VFolder(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "i2v", name)
}

// I2VPromptFolder returns a new folder of the image-to-video reference folder NAME (its
// components linked) with the tiny text encoder and tokenizer of PromptsDir, so prompts
// run end to end on it (the reference transformers' text_dim is the encoder's 32).
func I2VPromptFolder(t testing.TB, name string) string {
	t.Helper()
	src, err := filepath.Abs(I2VFolder(name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(src, "model_index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index map[string]any
	if err := json.Unmarshal(data, &index); err != nil {
		t.Fatal(err)
	}
	index["text_encoder"] = []string{"transformers", "UMT5EncoderModel"}
	index["tokenizer"] = []string{"transformers", "T5TokenizerFast"}
	out, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model_index.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() != "cases" {
			if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	prompts, err := filepath.Abs(PromptsDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"text_encoder", "tokenizer"} {
		if err := os.Symlink(filepath.Join(prompts, c), filepath.Join(dir, c)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
