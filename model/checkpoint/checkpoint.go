package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Component folder names of an SVD checkpoint.
const (
	UNet             = "unet"
	VAE              = "vae"
	ImageEncoder     = "image_encoder"
	Scheduler        = "scheduler"
	FeatureExtractor = "feature_extractor"
)

// IndexFile is the name of the pipeline index at the checkpoint root.
const IndexFile = "model_index.json"

// configFiles maps each known component to its config file name.
var configFiles = map[string]string{
	UNet:             "config.json",
	VAE:              "config.json",
	ImageEncoder:     "config.json",
	Scheduler:        "scheduler_config.json",
	FeatureExtractor: "preprocessor_config.json",
}

// ComponentRef is one model_index.json entry: ["library", "Class"].
type ComponentRef struct {
	Library string
	Class   string
}

// ModelIndex is the parsed model_index.json.
type ModelIndex struct {
	ClassName        string // "_class_name", e.g. StableVideoDiffusionPipeline
	DiffusersVersion string // "_diffusers_version"
	// Components maps a component folder name to its library and class. Entries such as
	// [null, null] (an absent optional component) and non-component attributes are left out.
	Components map[string]ComponentRef
}

// ParseModelIndex parses model_index.json; path names the file in errors.
func ParseModelIndex(path string, data []byte) (ModelIndex, error) {
	f, err := parseFields(path, data, ErrIndex)
	if err != nil {
		return ModelIndex{}, err
	}
	idx := ModelIndex{Components: map[string]ComponentRef{}}
	idx.ClassName = f.str("_class_name", "")
	idx.DiffusersVersion = f.str("_diffusers_version", "")
	if f.err != nil {
		return ModelIndex{}, fmt.Errorf("%w (%w)", f.err, ErrIndex)
	}
	for key, raw := range f.m {
		if strings.HasPrefix(key, "_") {
			continue
		}
		var pair []*string
		if json.Unmarshal(raw, &pair) != nil || len(pair) != 2 {
			continue // a pipeline attribute, not a component
		}
		if pair[0] == nil || pair[1] == nil {
			continue // [null, null]: component absent
		}
		idx.Components[key] = ComponentRef{Library: *pair[0], Class: *pair[1]}
	}
	return idx, nil
}

// Checkpoint is an opened checkpoint folder.
type Checkpoint struct {
	Dir   string
	Index ModelIndex
}

// Open reads dir/model_index.json. Component configs and weights are read on demand.
func Open(dir string) (*Checkpoint, error) {
	path := filepath.Join(dir, IndexFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrIndex, err)
	}
	idx, err := ParseModelIndex(path, data)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{Dir: dir, Index: idx}, nil
}

// Components returns the component names listed in model_index.json, sorted.
func (c *Checkpoint) Components() []string {
	out := make([]string, 0, len(c.Index.Components))
	for k := range c.Index.Components {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ComponentDir returns the folder of a component.
func (c *Checkpoint) ComponentDir(component string) string { return filepath.Join(c.Dir, component) }

// ConfigPath returns the config file of a known component, checking that model_index.json
// lists it and that the file exists.
func (c *Checkpoint) ConfigPath(component string) (string, error) {
	name, ok := configFiles[component]
	if !ok {
		return "", fmt.Errorf("%s: %w: unknown component %q", filepath.Join(c.Dir, IndexFile), ErrIndex, component)
	}
	if _, ok := c.Index.Components[component]; !ok {
		return "", fmt.Errorf("%s: %w: component %q is not listed (have %v)", filepath.Join(c.Dir, IndexFile), ErrIndex, component, c.Components())
	}
	path := filepath.Join(c.Dir, component, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
	}
	return path, nil
}

// readConfig reads the config file of a component.
func (c *Checkpoint) readConfig(component string) (string, []byte, error) {
	path, err := c.ConfigPath(component)
	if err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
	}
	return path, data, nil
}

// UNetConfig reads and validates unet/config.json.
func (c *Checkpoint) UNetConfig() (UNetConfig, error) {
	path, data, err := c.readConfig(UNet)
	if err != nil {
		return UNetConfig{}, err
	}
	return ParseUNetConfig(path, data)
}

// VAEConfig reads and validates vae/config.json.
func (c *Checkpoint) VAEConfig() (VAEConfig, error) {
	path, data, err := c.readConfig(VAE)
	if err != nil {
		return VAEConfig{}, err
	}
	return ParseVAEConfig(path, data)
}

// CLIPConfig reads and validates image_encoder/config.json.
func (c *Checkpoint) CLIPConfig() (CLIPVisionConfig, error) {
	path, data, err := c.readConfig(ImageEncoder)
	if err != nil {
		return CLIPVisionConfig{}, err
	}
	return ParseCLIPVisionConfig(path, data)
}

// FeatureExtractor reads and validates feature_extractor/preprocessor_config.json.
func (c *Checkpoint) FeatureExtractor() (FeatureExtractorConfig, error) {
	path, data, err := c.readConfig(FeatureExtractor)
	if err != nil {
		return FeatureExtractorConfig{}, err
	}
	return ParseFeatureExtractorConfig(path, data)
}

// SchedulerConfigPath returns scheduler/scheduler_config.json (checked to exist; the sched
// package parses it).
func (c *Checkpoint) SchedulerConfigPath() (string, error) { return c.ConfigPath(Scheduler) }
