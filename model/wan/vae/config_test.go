package vae

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig("config.json", []byte(`{"_class_name": "AutoencoderKLWan", "patch_size": null, "decoder_base_dim": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseDim != 96 || c.DecoderBaseDim != 96 || c.ZDim != 16 || len(c.DimMult) != 4 || c.NumResBlocks != 2 ||
		len(c.LatentsMean) != 16 || c.InChannels != 3 || c.OutChannels != 3 || c.PatchSize != 0 || c.IsResidual {
		t.Errorf("defaults: %+v", c)
	}
	if c.TemporalFactor() != 4 || c.SpatialFactor() != 8 || c.LatentFrames(81) != 21 || c.VideoFrames(21) != 81 {
		t.Errorf("factors: T %d, S %d, latent(81) %d, video(21) %d", c.TemporalFactor(), c.SpatialFactor(), c.LatentFrames(81), c.VideoFrames(21))
	}
}

func TestParseConfigTI2V(t *testing.T) {
	// The Wan 2.2 TI2V-5B VAE config (diffusers layout).
	c, err := ParseConfig("config.json", []byte(`{"base_dim": 160, "decoder_base_dim": 256, "z_dim": 48,
		"dim_mult": [1, 2, 4, 4], "is_residual": true, "in_channels": 12, "out_channels": 12, "patch_size": 2,
		"scale_factor_spatial": 16, "scale_factor_temporal": 4, "temperal_downsample": [false, true, true],
		"latents_mean": [`+strings.Repeat("0,", 47)+`0], "latents_std": [`+strings.Repeat("1,", 47)+`1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SpatialFactor() != 16 || c.videoChannels(false) != 3 || c.videoChannels(true) != 3 {
		t.Errorf("S %d, channels %d / %d", c.SpatialFactor(), c.videoChannels(false), c.videoChannels(true))
	}
	shapes, err := ExpectedTensors(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]int{
		"encoder.conv_in.weight":                             {160, 12, 3, 3, 3},
		"encoder.down_blocks.1.downsampler.time_conv.weight": {320, 320, 3, 1, 1},
		"decoder.conv_in.weight":                             {1024, 48, 3, 3, 3},
		"decoder.up_blocks.0.upsampler.time_conv.weight":     {2048, 1024, 3, 1, 1},
		"decoder.up_blocks.2.upsampler.resample.1.weight":    {512, 512, 3, 3},
		"decoder.conv_out.weight":                            {12, 256, 3, 3, 3},
		"quant_conv.weight":                                  {96, 96, 1, 1, 1},
	} {
		if got := shapes[name]; !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{`, "bad config"},
		{`{"_class_name": "AutoencoderKL"}`, "AutoencoderKLWan"},
		{`{"dim_mult": [1, 2], "temperal_downsample": [true, true]}`, "len(dim_mult)-1"},
		{`{"attn_scales": [1.0]}`, "attn_scales"},
		{`{"z_dim": 4}`, "z_dim is 4"},
		{`{"base_dim": 0}`, "must be positive"},
		{`{"z_dim": 2, "latents_mean": [0, 0], "latents_std": [1, 0]}`, "latents_std[1]"},
		{`{"dim_mult": [1, 1, 1, 1, 1], "temperal_downsample": [true, true, true, false]}`, "temporal downsamples"},
		{`{"patch_size": 2}`, "in_channels 3 is not divisible"},
	} {
		_, err := ParseConfig("vae/config.json", []byte(c.json))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "vae/config.json") {
			t.Errorf("%s: %v, want ErrConfig naming the file and %q", c.json, err, c.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"base_dim": 8, "z_dim": 4, "dim_mult": [1, 2, 2, 2], "temperal_downsample": [false, true, true], "latents_mean": [0,0,0,0], "latents_std": [1,1,1,1]}`))
	f.Add([]byte(`{"is_residual": true, "patch_size": 2, "in_channels": 12, "out_channels": 12}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("config.json", data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		if c.TemporalFactor() < 1 || c.TemporalFactor() > EncodeChunkFrames || c.SpatialFactor() < 1 {
			t.Fatalf("factors T %d S %d", c.TemporalFactor(), c.SpatialFactor())
		}
	})
}

func TestCheckVideoFrames(t *testing.T) {
	for _, f := range []int{1, 5, 9, 81} {
		if err := CheckVideoFrames(f); err != nil {
			t.Errorf("%d: %v", f, err)
		}
	}
	for f, want := range map[int]string{0: "0 video frames", 10: "e.g. 9 or 13", 2: "e.g. 1 or 5"} {
		err := CheckVideoFrames(f)
		if !errors.Is(err, ErrFrames) || !strings.Contains(err.Error(), want) {
			t.Errorf("%d: %v, want ErrFrames with %q", f, err, want)
		}
	}
}

func TestNormalize(t *testing.T) {
	c := Config{ZDim: 2, LatentsMean: []float64{-0.626, 0.3602}, LatentsStd: []float64{2.46, 2.5637}}
	x := tensor.New(1, 2, 1, 1, 2)
	copy(x.Data, []float32{1, 2, 3, 4})
	n, err := c.Normalize(x)
	if err != nil {
		t.Fatal(err)
	}
	inv0 := float32(1) / float32(2.46)
	if n.Data[1] != (2-float32(-0.626))*inv0 {
		t.Errorf("normalize: %v", n.Data)
	}
	d, err := c.Denormalize(n)
	if err != nil {
		t.Fatal(err)
	}
	if got := tensor.MaxAbsDiff(d, x); got > 1e-6 {
		t.Errorf("round trip off by %g", got)
	}
	if _, err := c.Normalize(tensor.New(1, 3, 1, 1, 1)); !errors.Is(err, ErrInput) {
		t.Errorf("3 channels: %v", err)
	}
}
