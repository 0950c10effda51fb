package generate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
)

// --from-report puts the report's job under the command line's flags: a flag given replaces
// the report's value, a list flag (--lora, --lora-2) its whole list, and the flags not given
// keep the report's values (its LoRAs included).
func TestExpandFromReport(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.json")
	b, err := json.Marshal(SampleReport{Provenance: Provenance{Args: []string{
		"--lora=/m/a.safetensors:1,/m/b.safetensors:0.5", "--lora-2=/m/c.safetensors:1", "--model=builtin-wan", "--seed=3", "--steps=4",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a, bb, c := lora.Spec{Path: "/m/a.safetensors", Strength: 1}, lora.Spec{Path: "/m/b.safetensors", Strength: 0.5}, lora.Spec{Path: "/m/c.safetensors", Strength: 1}
	d, e := lora.Spec{Path: "d.safetensors", Strength: 0.7}, lora.Spec{Path: "e.safetensors", Strength: 1}
	for _, tc := range []struct {
		name        string
		args        []string
		lora, lora2 []lora.Spec
		seed        int64
	}{
		{"the report's", nil, []lora.Spec{a, bb}, []lora.Spec{c}, 3},
		{"another seed", []string{"--seed", "8"}, []lora.Spec{a, bb}, []lora.Spec{c}, 8},
		{"one lora replaces the list", []string{"--lora", "d.safetensors:0.7"}, []lora.Spec{d}, []lora.Spec{c}, 3},
		{"repeated", []string{"--lora=d.safetensors:0.7", "--lora", "e.safetensors"}, []lora.Spec{d, e}, []lora.Spec{c}, 3},
		{"empty drops the list", []string{"--lora="}, nil, []lora.Spec{c}, 3},
		{"second expert's", []string{"-lora-2", "e.safetensors", "--seed=5"}, []lora.Spec{a, bb}, []lora.Spec{e}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := ExpandFromReport(append([]string{"--from-report", report}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions()
			fs := cli.New("generate", nil, nil)
			o.RegisterFlags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatalf("%q: %v", args, err)
			}
			if !slices.Equal(o.LoRA, tc.lora) || !slices.Equal(o.LoRA2, tc.lora2) || o.Seed != tc.seed || o.Steps != 4 || o.Model != "builtin-wan" {
				t.Fatalf("%q: lora %v, lora-2 %v, seed %d, steps %d, model %q; want lora %v, lora-2 %v, seed %d", args, o.LoRA, o.LoRA2, o.Seed, o.Steps, o.Model, tc.lora, tc.lora2, tc.seed)
			}
		})
	}
}

// report.json records every LoRA a run merged as it records the weights: file, strength,
// the expert it went to, size and SHA-256; and the job's flags carry them, so --from-report
// runs them again.
func TestProvenanceLoRAs(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir()) // the hash cache
	dev := shared.Require(t, "golden", "wan-dev")
	m, err := family.ResolveDir(dev)
	if err != nil {
		t.Fatal(err)
	}
	testdata, err := filepath.Abs(filepath.Join("..", "model", "lora", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	one, two := filepath.Join(testdata, "lora_wan_two", "lora0.safetensors"), filepath.Join(testdata, "lora_wan_two", "lora1.safetensors")
	sum := func(path string) (string, int64) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:]), int64(len(b))
	}
	file := func(path string, strength float64, expert int) LoRAFile {
		s, n := sum(path)
		return LoRAFile{File: path, Strength: strength, Expert: expert, Bytes: n, SHA256: s}
	}
	for _, tc := range []struct {
		name string
		l    family.LoRAs
		want []LoRAFile
	}{
		{"none", family.LoRAs{}, nil},
		{"every denoiser", family.LoRAs{LoRA: []lora.Spec{{Path: one, Strength: 0.8}, {Path: two, Strength: -1}}},
			[]LoRAFile{file(one, 0.8, 0), file(two, -1, 0)}},
		{"two experts", family.LoRAs{LoRA: []lora.Spec{{Path: one, Strength: 1}}, LoRA2: []lora.Spec{{Path: two, Strength: 0.5}}},
			[]LoRAFile{file(one, 1, 1), file(two, 0.5, 2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Model, o.LoRAs = dev, tc.l
			p, err := provenance(o, m)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.LoRAs, tc.want) {
				t.Fatalf("lora_weights %+v, want %+v", p.LoRAs, tc.want)
			}
			if len(p.Weights) == 0 {
				t.Fatal("no weights recorded")
			}
			b, err := json.Marshal(SampleReport{Provenance: p})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"lora_weights":[{"file":`); got != (len(tc.want) > 0) {
				t.Fatalf("report.json %s: lora_weights present %v", b, got)
			}
			for flag, specs := range map[string][]lora.Spec{"--lora=": tc.l.LoRA, "--lora-2=": tc.l.LoRA2} {
				arg := flag + lora.Flag{Specs: &specs}.String()
				if slices.Contains(p.Args, arg) != (len(specs) > 0) {
					t.Fatalf("args %q, want %s among them when given", p.Args, arg)
				}
			}
		})
	}
	o := DefaultOptions()
	o.Model, o.LoRA = dev, []lora.Spec{{Path: filepath.Join(testdata, "missing.safetensors"), Strength: 1}}
	if _, err := provenance(o, m); err == nil || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Fatalf("a missing LoRA: %v", err)
	}
}

// --from-report checks the files the report records by SHA-256 before any work: a model
// weights file or a LoRA that changed since the run is refused in one line naming the
// file and both hashes, unless the command line gives the flag that names it (which
// replaces the report's value); unchanged files pass.
func TestFromReportChangedFiles(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir()) // the hash cache
	dev := shared.Require(t, "golden", "wan-dev")
	model := filepath.Join(t.TempDir(), "wan")
	if err := os.CopyFS(model, os.DirFS(dev)); err != nil {
		t.Fatal(err)
	}
	loraFile := filepath.Join(t.TempDir(), "style.safetensors")
	src, err := os.ReadFile(filepath.Join("..", "model", "lora", "testdata", "lora_wan_two", "lora0.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loraFile, src, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := family.ResolveDir(model)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Model, o.ModelName, o.LoRA = model, model, []lora.Spec{{Path: loraFile, Strength: 1}}
	p, err := provenance(o, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Weights) == 0 || len(p.LoRAs) != 1 {
		t.Fatalf("weights %v, LoRAs %v recorded", p.Weights, p.LoRAs)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	b, err := json.Marshal(SampleReport{Provenance: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, b, 0o644); err != nil {
		t.Fatal(err)
	}
	expand := func(extra ...string) error {
		_, err := ExpandFromReport(append([]string{"--from-report", report}, extra...))
		return err
	}
	if err := expand(); err != nil {
		t.Fatalf("unchanged files: %v", err)
	}
	// flip changes the file's last byte (its size stays).
	flip := func(path string) (before, after string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		before = hex.EncodeToString(s[:])
		b[len(b)-1] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s = sha256.Sum256(b)
		return before, hex.EncodeToString(s[:])
	}
	refused := func(name string, err error, file, recorded, current, flag string) {
		t.Helper()
		if err == nil || !errors.Is(err, ErrOptions) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: %v, want one line of ErrOptions", name, err)
		}
		for _, s := range []string{file, "SHA-256 " + current + " now, " + recorded + " recorded", "--" + flag} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %q does not say %q", name, err, s)
			}
		}
		t.Logf("%s: %v", name, err)
	}

	recorded, current := flip(loraFile)
	refused("a changed LoRA", expand(), loraFile, recorded, current, "lora")
	if err := expand("--lora", loraFile); err != nil {
		t.Fatalf("a changed LoRA given again with --lora: %v", err)
	}
	if err := expand("--lora="); err != nil {
		t.Fatalf("the LoRAs dropped with --lora=: %v", err)
	}
	if err := expand("--lora-2", loraFile); err == nil {
		t.Fatal("--lora-2 does not replace the report's --lora LoRAs, yet the changed one passed")
	}
	flip(loraFile) // back as recorded

	vae := filepath.Join(model, "vae", "diffusion_pytorch_model.safetensors")
	recorded, current = flip(vae)
	refused("changed weights", expand(), vae, recorded, current, "model")
	if err := expand("--model", model); err != nil {
		t.Fatalf("changed weights with --model given: %v", err)
	}
	if err := os.Remove(vae); err != nil {
		t.Fatal(err)
	}
	refused("missing weights", expand(), vae, recorded, "missing", "model")
}
