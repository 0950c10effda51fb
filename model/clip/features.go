package clip

import (
	"encoding/json"
	"fmt"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// FeatureExtractorComponent is the image processor's folder in an SVD pipeline folder
// (model_index.json's key): the resize, crop and normalisation before the image encoder.
const FeatureExtractorComponent = "feature_extractor"

// ReadFeatureExtractor reads and validates the image processor's preprocessor_config.json
// of ck.
func ReadFeatureExtractor(ck *checkpoint.Checkpoint) (FeatureExtractorConfig, error) {
	path, data, err := ck.ReadConfig(FeatureExtractorComponent)
	if err != nil {
		return FeatureExtractorConfig{}, err
	}
	return ParseFeatureExtractorConfig(path, data)
}

// ImageSize is a transformers size dict: either ShortestEdge (resize keeping the aspect
// ratio) or Height and Width. Zero fields are unset.
type ImageSize struct {
	ShortestEdge int
	Height       int
	Width        int
}

// String formats the size like the JSON dict it came from.
func (s ImageSize) String() string {
	if s.ShortestEdge > 0 {
		return fmt.Sprintf("{shortest_edge %d}", s.ShortestEdge)
	}
	return fmt.Sprintf("{height %d, width %d}", s.Height, s.Width)
}

// FeatureExtractorConfig is feature_extractor/preprocessor_config.json of a
// CLIPImageProcessor, with transformers defaults for absent keys.
type FeatureExtractorConfig struct {
	Path string // the file it was read from

	DoResize      bool      // default true
	Size          ImageSize // default {shortest_edge 224}; a bare int n means {shortest_edge n}
	Resample      int       // PIL filter id; default 3 (bicubic)
	DoCenterCrop  bool      // default true
	CropSize      ImageSize // default {224, 224}; a bare int n means {n, n}
	DoRescale     bool      // default true
	RescaleFactor float64   // default 1/255
	DoNormalize   bool      // default true
	ImageMean     []float64 // default OpenAI CLIP mean
	ImageStd      []float64 // default OpenAI CLIP std
	DoConvertRGB  bool      // default true
}

// OpenAI CLIP normalisation constants (transformers OPENAI_CLIP_MEAN / OPENAI_CLIP_STD).
var (
	openAICLIPMean = []float64{0.48145466, 0.4578275, 0.40821073}
	openAICLIPStd  = []float64{0.26862954, 0.26130258, 0.27577711}
)

// ParseFeatureExtractorConfig parses and validates a CLIP image processor config; path
// names the file in errors.
func ParseFeatureExtractorConfig(path string, data []byte) (FeatureExtractorConfig, error) {
	f, err := checkpoint.ParseFields(path, data, checkpoint.ErrConfig)
	if err != nil {
		return FeatureExtractorConfig{}, err
	}
	c := FeatureExtractorConfig{
		Path:          path,
		DoResize:      f.Bool("do_resize", true),
		Size:          imageSize(f, "size", ImageSize{ShortestEdge: 224}, false),
		Resample:      f.Int("resample", 3),
		DoCenterCrop:  f.Bool("do_center_crop", true),
		CropSize:      imageSize(f, "crop_size", ImageSize{Height: 224, Width: 224}, true),
		DoRescale:     f.Bool("do_rescale", true),
		RescaleFactor: f.Float("rescale_factor", 1.0/255),
		DoNormalize:   f.Bool("do_normalize", true),
		ImageMean:     f.Floats("image_mean", openAICLIPMean),
		ImageStd:      f.Floats("image_std", openAICLIPStd),
		DoConvertRGB:  f.Bool("do_convert_rgb", true),
	}
	if f.Err() != nil {
		return FeatureExtractorConfig{}, f.Err()
	}
	if err := c.Validate(); err != nil {
		return FeatureExtractorConfig{}, err
	}
	return c, nil
}

// imageSize reads a size dict or a bare int (shortest edge, or a square when square).
func imageSize(f *checkpoint.Fields, key string, def ImageSize, square bool) ImageSize {
	v := f.Raw(key)
	if v == nil || f.Err() != nil {
		return def
	}
	var n int
	if json.Unmarshal(v, &n) == nil {
		if square {
			return ImageSize{Height: n, Width: n}
		}
		return ImageSize{ShortestEdge: n}
	}
	var d struct {
		ShortestEdge *int `json:"shortest_edge"`
		Height       *int `json:"height"`
		Width        *int `json:"width"`
	}
	if json.Unmarshal(v, &d) != nil {
		f.Fail(key, "want an integer or a size object, got %s", checkpoint.Abbrev(v))
		return def
	}
	switch {
	case d.ShortestEdge != nil && d.Height == nil && d.Width == nil:
		return ImageSize{ShortestEdge: *d.ShortestEdge}
	case d.ShortestEdge == nil && d.Height != nil && d.Width != nil:
		return ImageSize{Height: *d.Height, Width: *d.Width}
	}
	f.Fail(key, "want {shortest_edge} or {height, width}, got %s", checkpoint.Abbrev(v))
	return def
}

// Validate checks the normalisation constants and sizes. Errors name the config file.
func (c FeatureExtractorConfig) Validate() error {
	k := checkpoint.Checker{Path: c.Path}
	k.Check(len(c.ImageMean) > 0 && len(c.ImageMean) == len(c.ImageStd), "image_mean has %d values, image_std %d", len(c.ImageMean), len(c.ImageStd))
	for i, s := range c.ImageStd {
		k.Check(s > 0, "image_std[%d] = %g must be positive", i, s)
	}
	validSize := func(s ImageSize) bool { return s.ShortestEdge > 0 || (s.Height > 0 && s.Width > 0) }
	k.Check(!c.DoResize || validSize(c.Size), "size %v must be positive", c.Size)
	k.Check(!c.DoCenterCrop || (c.CropSize.Height > 0 && c.CropSize.Width > 0), "crop_size %v needs a positive height and width", c.CropSize)
	k.Check(!c.DoRescale || c.RescaleFactor > 0, "rescale_factor %g must be positive", c.RescaleFactor)
	return k.Err()
}
