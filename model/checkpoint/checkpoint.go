package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IndexFile is the name of the pipeline index at the checkpoint root.
const IndexFile = "model_index.json"

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
	f, err := ParseFields(path, data, ErrIndex)
	if err != nil {
		return ModelIndex{}, err
	}
	idx := ModelIndex{Components: map[string]ComponentRef{}}
	idx.ClassName = f.Str("_class_name", "")
	idx.DiffusersVersion = f.Str("_diffusers_version", "")
	if f.Err() != nil {
		return ModelIndex{}, fmt.Errorf("%w (%w)", f.Err(), ErrIndex)
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

// Ref returns a component's model_index.json entry; the error (ErrIndex) names the index
// and lists the components it has.
func (c *Checkpoint) Ref(component string) (ComponentRef, error) {
	ref, ok := c.Index.Components[component]
	if !ok {
		return ComponentRef{}, fmt.Errorf("%s: %w: component %q is not listed (have %v)", filepath.Join(c.Dir, IndexFile), ErrIndex, component, c.Components())
	}
	return ref, nil
}

// ConfigFileName is the config file a component of class has, as its library's loader
// names it: a diffusers scheduler's scheduler_config.json, a transformers image
// processor's or feature extractor's preprocessor_config.json, a tokenizer's
// tokenizer_config.json, and config.json for models (diffusers and transformers).
func ConfigFileName(class string) string {
	switch {
	case strings.HasSuffix(class, "Scheduler"):
		return "scheduler_config.json"
	case strings.HasSuffix(class, "ImageProcessor") || strings.HasSuffix(class, "FeatureExtractor"):
		return "preprocessor_config.json"
	case strings.Contains(class, "Tokenizer"):
		return "tokenizer_config.json"
	}
	return "config.json"
}

// ConfigPath returns the config file of a component model_index.json lists (see
// ConfigFileName), checking that it exists.
func (c *Checkpoint) ConfigPath(component string) (string, error) {
	ref, err := c.Ref(component)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, component, ConfigFileName(ref.Class))
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
	}
	return path, nil
}

// ReadConfig reads the config file of a component (see ConfigPath) and returns its path
// and bytes; the network's package parses them.
func (c *Checkpoint) ReadConfig(component string) (string, []byte, error) {
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
