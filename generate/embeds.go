package generate

import (
	"fmt"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// LoadEmbeddings reads prompt embeddings from the safetensors file path given as flag: the
// file's only tensor, or its "prompt_embeds" ("negative_prompt_embeds" for
// --negative-prompt-embeds; so a reference case's inputs file serves both), [L, D] or
// [1, L, D] with D the model's text width (desc.TextDim). Errors name the flag and the
// file.
func LoadEmbeddings(path, flag string, desc family.Description) (*tensor.Dense, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, badOptions("%s %s: %w", flag, path, err)
	}
	defer f.Close()
	names := f.Names()
	want := "prompt_embeds"
	if flag == "--negative-prompt-embeds" {
		want = "negative_prompt_embeds"
	}
	name := ""
	for _, n := range names {
		if n == want || len(names) == 1 {
			name = n
		}
	}
	if name == "" {
		held := fmt.Sprint(names)
		if len(names) > 4 {
			held = fmt.Sprintf("%d tensors (%v, ...)", len(names), names[:4])
		}
		return nil, badOptions("%s %s: want one tensor (or one named %s), the file holds %s", flag, path, want, held)
	}
	t, err := f.Tensor(name)
	if err != nil {
		return nil, badOptions("%s %s: %w", flag, path, err)
	}
	s := t.Shape
	if !(len(s) == 2 || (len(s) == 3 && s[0] == 1)) || s[len(s)-2] < 1 {
		return nil, badOptions("%s %s: tensor %q is %v, want [L, %d] or [1, L, %d]", flag, path, name, s, desc.TextDim, desc.TextDim)
	}
	if desc.TextDim > 0 && s[len(s)-1] != desc.TextDim {
		return nil, badOptions("%s %s: embeddings %v are %d wide, the model's text_dim is %d (%s)", flag, path, s, s[len(s)-1], desc.TextDim, desc.TextDimFile)
	}
	return t, nil
}
