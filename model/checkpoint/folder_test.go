package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

const tinyIndex = `{"_class_name": "StableVideoDiffusionPipeline", "unet": ["diffusers", "UNetSpatioTemporalConditionModel"],
 "image_encoder": ["transformers", "CLIPVisionModelWithProjection"], "scheduler": ["diffusers", "EulerDiscreteScheduler"]}`

const tinyUNetConfig = `{"_class_name": "UNetSpatioTemporalConditionModel", "block_out_channels": [32, 64], "in_channels": 4,
 "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
 "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"], "num_attention_heads": [2, 4]}`

// Component names of the tiny folder (an SVD pipeline's).
const (
	UNet         = "unet"
	ImageEncoder = "image_encoder"
)

// tinyExpected is what a network built from tinyUNetConfig would declare (a subset, for
// the test).
func tinyExpected() map[string][]int {
	return map[string][]int{"conv_in.weight": {32, 4, 3, 3}, "conv_in.bias": {32}}
}

func writeTensors(t *testing.T, path string, shapes map[string][]int) {
	t.Helper()
	var ts []safetensors.NamedTensor
	for name, shape := range shapes {
		d := tensor.New(shape...)
		for i := range d.Data {
			d.Data[i] = float32(i) * 0.5
		}
		ts = append(ts, safetensors.NamedTensor{Name: name, Tensor: d})
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tinyCheckpoint writes a valid minimal checkpoint folder.
func tinyCheckpoint(t *testing.T) string {
	dir := t.TempDir()
	writeText(t, filepath.Join(dir, IndexFile), tinyIndex)
	writeText(t, filepath.Join(dir, "unet", "config.json"), tinyUNetConfig)
	writeText(t, filepath.Join(dir, "scheduler", "scheduler_config.json"), `{}`)
	writeTensors(t, filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors"), tinyExpected())
	return dir
}

func TestTinyCheckpointLoads(t *testing.T) {
	ck, err := Open(tinyCheckpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	path, data, err := ck.ReadConfig(UNet)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(ck.Dir, "unet", "config.json") || string(data) != tinyUNetConfig {
		t.Fatalf("config %s: %s", path, data)
	}
	got, err := ck.LoadComponent(UNet, "", tinyExpected(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := got["conv_in.bias"]; b == nil || b.Len() != 32 || b.Data[3] != 1.5 {
		t.Errorf("conv_in.bias = %v", b)
	}
}

func TestBadFolders(t *testing.T) {
	unetWeights := filepath.Join("unet", "diffusion_pytorch_model.safetensors")
	load := func(dir string) error {
		ck, err := Open(dir)
		if err != nil {
			return err
		}
		_, err = ck.LoadComponent(UNet, "", tinyExpected(), LoadOptions{})
		return err
	}
	cases := []struct {
		name     string
		mutate   func(t *testing.T, dir string)
		run      func(dir string) error
		want     error
		mentions []string
	}{
		{"missing model_index", func(t *testing.T, d string) { os.Remove(filepath.Join(d, IndexFile)) },
			func(d string) error { _, err := Open(d); return err }, ErrIndex, []string{IndexFile}},
		{"invalid model_index", func(t *testing.T, d string) { writeText(t, filepath.Join(d, IndexFile), `{"unet": `) },
			func(d string) error { _, err := Open(d); return err }, ErrIndex, []string{IndexFile}},
		{"missing config", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "unet", "config.json")) },
			func(d string) error { ck, _ := Open(d); _, _, err := ck.ReadConfig(UNet); return err }, ErrConfig, []string{filepath.Join("unet", "config.json")}},
		{"component not in index", nil,
			func(d string) error { ck, _ := Open(d); _, _, err := ck.ReadConfig("vae"); return err }, ErrIndex, []string{IndexFile, `"vae"`}},
		{"missing scheduler config", func(t *testing.T, d string) { os.RemoveAll(filepath.Join(d, "scheduler")) },
			func(d string) error { ck, _ := Open(d); _, err := ck.ConfigPath("scheduler"); return err }, ErrConfig, []string{"scheduler_config.json"}},
		{"missing weights variant", nil,
			func(d string) error { ck, _ := Open(d); _, _, err := ck.OpenWeights(UNet, "fp16"); return err }, ErrWeights,
			[]string{filepath.Join("unet", "diffusion_pytorch_model.fp16.safetensors"), `"fp16"`, "present: diffusion_pytorch_model.safetensors"}},
		{"missing weights", func(t *testing.T, d string) { os.Remove(filepath.Join(d, unetWeights)) }, load, ErrWeights,
			[]string{unetWeights, "no weights files"}},
		{"image encoder weights missing", nil,
			func(d string) error { ck, _ := Open(d); _, _, err := ck.OpenWeights(ImageEncoder, ""); return err }, ErrWeights,
			[]string{filepath.Join("image_encoder", "model.safetensors")}},
		{"wrong shape", func(t *testing.T, d string) {
			writeTensors(t, filepath.Join(d, unetWeights), map[string][]int{"conv_in.weight": {32, 8, 3, 3}, "conv_in.bias": {32}})
		}, load, ErrShapeMismatch, []string{unetWeights + `: tensor "conv_in.weight": shape [32 8 3 3] in file, expected [32 4 3 3]`}},
		{"unexpected tensor", func(t *testing.T, d string) {
			s := tinyExpected()
			s["extra.weight"] = []int{2}
			writeTensors(t, filepath.Join(d, unetWeights), s)
		}, load, ErrUnexpectedTensor, []string{unetWeights, `tensor "extra.weight": unexpected`}},
		{"missing tensor", func(t *testing.T, d string) {
			writeTensors(t, filepath.Join(d, unetWeights), map[string][]int{"conv_in.weight": {32, 4, 3, 3}})
		}, load, ErrMissingTensor, []string{unetWeights, `tensor "conv_in.bias": missing`}},
		{"non-float tensor", func(t *testing.T, d string) {
			err := safetensors.WriteRawFile(filepath.Join(d, unetWeights), []safetensors.RawTensor{
				{Name: "conv_in.weight", DType: safetensors.F32, Shape: []int{32, 4, 3, 3}, Data: make([]byte, 4*32*4*9)},
				{Name: "conv_in.bias", DType: safetensors.I32, Shape: []int{32}, Data: make([]byte, 4*32)},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}, load, ErrTensorDType, []string{unetWeights, `tensor "conv_in.bias"`, "I32"}},
		{"truncated safetensors", func(t *testing.T, d string) {
			p := filepath.Join(d, unetWeights)
			b, _ := os.ReadFile(p)
			writeText(t, p, string(b[:len(b)-10]))
		}, load, safetensors.ErrTruncated, []string{unetWeights}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := tinyCheckpoint(t)
			if c.mutate != nil {
				c.mutate(t, dir)
			}
			err := c.run(dir)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, m := range c.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("err %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestLoadErrorReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	writeTensors(t, path, map[string][]int{"a": {2}, "b": {3}, "c": {1}, "d": {4}, "position_ids": {1, 5}})
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	expected := map[string][]int{"a": {2}, "b": {4}, "e": {1}, "f": {2, 2}}
	_, err = LoadTensors(f, "", expected, LoadOptions{Ignore: []string{"position_ids"}, MaxProblems: 3})
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want *LoadError", err)
	}
	var names []string
	for _, p := range le.Problems {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "b,c,d,e,f" {
		t.Errorf("problems %v, want b,c,d,e,f in order", names)
	}
	want := path + `: 5 tensor problems: tensor "b": shape [3] in file, expected [4]; tensor "c": unexpected (shape [1], F32 in file); ` +
		`tensor "d": unexpected (shape [4], F32 in file); and 2 more`
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	for _, s := range []error{ErrShapeMismatch, ErrUnexpectedTensor, ErrMissingTensor} {
		if !errors.Is(err, s) {
			t.Errorf("error does not match %v", s)
		}
	}
	if errors.Is(err, ErrTensorDType) {
		t.Error("error matches ErrTensorDType without such a problem")
	}
	// Without the ignore list, position_ids is reported too.
	if probs := CheckTensors(f, expected, LoadOptions{}); len(probs) != 6 {
		t.Errorf("%d problems without Ignore, want 6", len(probs))
	}
	// The report is the same on every call (map iteration order does not leak).
	for i := 0; i < 5; i++ {
		_, again := LoadTensors(f, "", expected, LoadOptions{Ignore: []string{"position_ids"}, MaxProblems: 3})
		if again.Error() != err.Error() {
			t.Fatalf("report changed between calls:\n%s\n%s", err, again)
		}
	}
}
