package sentencepiece

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// hfTokenizer is the part of a Hugging Face tokenizer.json the tokenizer reads.
type hfTokenizer struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type         string              `json:"type"`
		UnkID        *int                `json:"unk_id"`
		Vocab        [][]json.RawMessage `json:"vocab"`
		ByteFallback bool                `json:"byte_fallback"`
	} `json:"model"`
}

// hfComponent is a normalizer or pre-tokenizer node of tokenizer.json.
type hfComponent struct {
	Type                string          `json:"type"`
	PrecompiledCharsmap *string         `json:"precompiled_charsmap"`
	Pattern             json.RawMessage `json:"pattern"`
	Content             string          `json:"content"`
	Replacement         string          `json:"replacement"`
	AddPrefixSpace      *bool           `json:"add_prefix_space"`
	PrependScheme       string          `json:"prepend_scheme"`
	Normalizers         []hfComponent   `json:"normalizers"`
	Pretokenizers       []hfComponent   `json:"pretokenizers"`
}

// maxJSONComponentDepth bounds the nesting of Sequence components.
const maxJSONComponentDepth = 16

// ParseTokenizerJSON builds a tokenizer from a Hugging Face tokenizer.json
// that wraps a SentencePiece unigram model, as transformers' converters write
// it (T5TokenizerFast's among them): the Unigram vocabulary with its scores
// and unk_id, the Precompiled normalizer's charsmap, Replace(" {2,}") or
// Strip or WhitespaceSplit as remove_extra_whitespaces, and the Metaspace
// pre-tokenizer's prepend scheme as add_dummy_prefix. Added tokens marked
// special become control pieces, the others user-defined pieces. The result
// encodes as the model file it was converted from.
func ParseTokenizerJSON(data []byte) (*Tokenizer, error) {
	var hf hfTokenizer
	if err := json.Unmarshal(data, &hf); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %w", ErrCorruptModel, err)
	}
	if hf.Model.Type != "Unigram" {
		return nil, fmt.Errorf("%w: tokenizer.json model type %q (only Unigram)", ErrUnsupported, hf.Model.Type)
	}
	spec := defaultModelSpec()
	spec.byteFallback = hf.Model.ByteFallback
	spec.normalizer.removeExtraWhitespaces = false
	spec.normalizer.addDummyPrefix = false
	for i, entry := range hf.Model.Vocab {
		if len(entry) != 2 {
			return nil, fmt.Errorf("%w: tokenizer.json vocab entry %d has %d fields, want [piece, score]", ErrCorruptModel, i, len(entry))
		}
		var p piece
		var score float64
		if err := json.Unmarshal(entry[0], &p.text); err != nil {
			return nil, fmt.Errorf("%w: tokenizer.json vocab entry %d: %w", ErrCorruptModel, i, err)
		}
		if err := json.Unmarshal(entry[1], &score); err != nil {
			return nil, fmt.Errorf("%w: tokenizer.json vocab entry %d: %w", ErrCorruptModel, i, err)
		}
		p.score, p.kind = float32(score), typeNormal
		if _, isByte := pieceToByte(p.text); isByte && spec.byteFallback {
			p.kind = typeByte
		}
		spec.pieces = append(spec.pieces, p)
	}
	added := append(hf.AddedTokens[:0:0], hf.AddedTokens...)
	sort.SliceStable(added, func(i, j int) bool { return added[i].ID < added[j].ID })
	for _, at := range added {
		if at.ID == len(spec.pieces) && at.Content != "" {
			// Tokens added after conversion sit past the model's vocabulary.
			spec.pieces = append(spec.pieces, piece{text: at.Content})
		}
		if at.ID < 0 || at.ID >= len(spec.pieces) {
			return nil, fmt.Errorf("%w: tokenizer.json added token %q has id %d outside the vocabulary of %d", ErrCorruptModel, at.Content, at.ID, len(spec.pieces))
		}
		if spec.pieces[at.ID].text != at.Content {
			return nil, fmt.Errorf("%w: tokenizer.json added token %d is %q but the vocabulary says %q", ErrCorruptModel, at.ID, at.Content, spec.pieces[at.ID].text)
		}
		if at.Special {
			spec.pieces[at.ID].kind = typeControl
		} else {
			spec.pieces[at.ID].kind = typeUserDefined
		}
	}
	if hf.Model.UnkID != nil {
		u := *hf.Model.UnkID
		if u < 0 || u >= len(spec.pieces) {
			return nil, fmt.Errorf("%w: tokenizer.json unk_id %d outside the vocabulary of %d", ErrCorruptModel, u, len(spec.pieces))
		}
		spec.pieces[u].kind = typeUnknown
		spec.unkPiece = spec.pieces[u].text
	}
	if err := applyHFComponent(hf.Normalizer, &spec, 0); err != nil {
		return nil, fmt.Errorf("tokenizer.json normalizer: %w", err)
	}
	if err := applyHFComponent(hf.PreTokenizer, &spec, 0); err != nil {
		return nil, fmt.Errorf("tokenizer.json pre_tokenizer: %w", err)
	}
	return newTokenizer(&spec)
}

// applyHFComponent maps one normalizer or pre-tokenizer (and a Sequence's
// members) onto the sentencepiece normalizer settings.
func applyHFComponent(raw json.RawMessage, spec *modelSpec, depth int) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptModel, err)
	}
	return applyParsedComponent(c, spec, depth)
}

func applyParsedComponent(c hfComponent, spec *modelSpec, depth int) error {
	if depth > maxJSONComponentDepth {
		return fmt.Errorf("%w: Sequence nested deeper than %d", ErrCorruptModel, maxJSONComponentDepth)
	}
	switch c.Type {
	case "Sequence":
		for _, m := range append(c.Normalizers, c.Pretokenizers...) {
			if err := applyParsedComponent(m, spec, depth+1); err != nil {
				return err
			}
		}
	case "Precompiled":
		if c.PrecompiledCharsmap == nil {
			return nil
		}
		blob, err := base64.StdEncoding.DecodeString(*c.PrecompiledCharsmap)
		if err != nil {
			return fmt.Errorf("%w: precompiled_charsmap: %w", ErrCorruptModel, err)
		}
		spec.normalizer.precompiledCharsmap = blob
	case "Replace":
		var pat struct{ Regex, String *string }
		if err := json.Unmarshal(c.Pattern, &pat); err != nil {
			return fmt.Errorf("%w: Replace pattern: %w", ErrCorruptModel, err)
		}
		if pat.Regex != nil && *pat.Regex == " {2,}" {
			spec.normalizer.removeExtraWhitespaces = true
			return nil
		}
		return fmt.Errorf("%w: Replace normalizer with pattern %s", ErrUnsupported, c.Pattern)
	case "Strip", "WhitespaceSplit":
		spec.normalizer.removeExtraWhitespaces = true
	case "Metaspace":
		if c.Replacement != "" && c.Replacement != spaceSymbol {
			return fmt.Errorf("%w: Metaspace replacement %q (only %q)", ErrUnsupported, c.Replacement, spaceSymbol)
		}
		switch {
		case c.PrependScheme != "":
			spec.normalizer.addDummyPrefix = c.PrependScheme != "never"
		case c.AddPrefixSpace != nil:
			spec.normalizer.addDummyPrefix = *c.AddPrefixSpace
		default:
			spec.normalizer.addDummyPrefix = true
		}
	default:
		return fmt.Errorf("%w: component %q", ErrUnsupported, strings.TrimSpace(c.Type))
	}
	return nil
}
