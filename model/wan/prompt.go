package wan

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/umt5"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/text/sentencepiece"
)

// Component folder names of Wan's text conditioner.
const (
	TextEncoder = "text_encoder"
	Tokenizer   = "tokenizer"
)

// ErrNoTextEncoder: a prompt was given to a folder without a text encoder or tokenizer.
var ErrNoTextEncoder = errors.New("wan: no text encoder")

// PromptCacheSize is how many prompts' embeddings a PromptEncoder keeps: the negative
// prompt (the same for every sample of a run, and usually every job of a server) and the
// recent prompts.
const PromptCacheSize = 8

// tokenizerFiles are the files sentencepiece.Load reads from a tokenizer folder.
var tokenizerFiles = []string{"spiece.model", "tokenizer.model", "sentencepiece.model", "tokenizer.json"}

// CheckText checks, without reading weights, that the folder can encode prompts: a
// text_encoder/ with its config.json and a tokenizer/ with spiece.model or tokenizer.json.
// The error names what is missing.
func (f *Folder) CheckText() error {
	cfg := filepath.Join(f.ComponentDir(TextEncoder), umt5.ConfigFile)
	if _, err := os.Stat(cfg); err != nil {
		return fmt.Errorf("%w: %s is missing: the folder cannot encode a prompt", ErrNoTextEncoder, cfg)
	}
	tok := f.ComponentDir(Tokenizer)
	for _, name := range tokenizerFiles {
		if fi, err := os.Stat(filepath.Join(tok, name)); err == nil && !fi.IsDir() {
			return nil
		}
	}
	return fmt.Errorf("%w: %s has no spiece.model or tokenizer.json: the folder cannot tokenize a prompt", ErrNoTextEncoder, tok)
}

// PromptEncoder is Wan's text conditioner: the umT5 tokenizer and text encoder of a
// folder, turning a prompt into the embeddings WanPipeline._get_t5_prompt_embeds makes
// ([MaxLen, d_model], real tokens then zero rows). It keeps the last PromptCacheSize
// prompts' embeddings, so a negative prompt shared by many samples is encoded once. It is
// safe for concurrent use.
type PromptEncoder struct {
	Tok *sentencepiece.Tokenizer
	Enc *umt5.Model
	// MaxLen is max_sequence_length (WanPipeline's 512).
	MaxLen int

	mu     sync.Mutex
	lru    *list.List // of *cached, most recent first
	byText map[string]*list.Element
	hits   int
	misses int
}

type cached struct {
	text   string
	embeds *tensor.Dense
}

// LoadPromptEncoder loads the folder's tokenizer/ and text_encoder/ onto backend;
// progress, when not nil, is called as the encoder's weights load (bytes read, total).
func (f *Folder) LoadPromptEncoder(b backends.Backend, progress func(loaded, total int64)) (*PromptEncoder, error) {
	if err := f.CheckText(); err != nil {
		return nil, err
	}
	tok, err := sentencepiece.Load(f.ComponentDir(Tokenizer))
	if err != nil {
		return nil, fmt.Errorf("wan: tokenizer: %w", err)
	}
	enc, err := umt5.Load(f.ComponentDir(TextEncoder), b, umt5.LoadOptions{Progress: progress})
	if err != nil {
		return nil, fmt.Errorf("wan: text encoder %s: %w", f.ComponentDir(TextEncoder), err)
	}
	if v := enc.Config().VocabSize; tok.VocabSize() > v {
		enc.Close()
		return nil, fmt.Errorf("%w: %s: the tokenizer has %d pieces, the text encoder's vocab_size is %d", ErrFolder, f.ComponentDir(Tokenizer), tok.VocabSize(), v)
	}
	return NewPromptEncoder(tok, enc, umt5.DefaultMaxSequenceLength), nil
}

// NewPromptEncoder wraps a tokenizer and an encoder (which it owns from now on).
func NewPromptEncoder(tok *sentencepiece.Tokenizer, enc *umt5.Model, maxLen int) *PromptEncoder {
	return &PromptEncoder{Tok: tok, Enc: enc, MaxLen: maxLen, lru: list.New(), byText: map[string]*list.Element{}}
}

// Width is the embeddings' width (the encoder's d_model).
func (e *PromptEncoder) Width() int { return e.Enc.Config().DModel }

// Embeds returns prompt's embeddings [MaxLen, d_model], from the cache when it holds them.
// The result is shared: callers must not modify it.
func (e *PromptEncoder) Embeds(prompt string) (*tensor.Dense, error) {
	e.mu.Lock()
	if el, ok := e.byText[prompt]; ok {
		e.lru.MoveToFront(el)
		e.hits++
		e.mu.Unlock()
		return el.Value.(*cached).embeds, nil
	}
	e.misses++
	e.mu.Unlock()

	// Encoded alone, as WanPipeline.encode_prompt encodes the prompt and the negative
	// prompt in separate calls.
	out, err := e.Enc.PromptEmbeds(e.Tok, []string{prompt}, e.MaxLen)
	if err != nil {
		return nil, fmt.Errorf("wan: prompt: %w", err)
	}
	out.Shape = out.Shape[1:]

	e.mu.Lock()
	defer e.mu.Unlock()
	if el, ok := e.byText[prompt]; ok { // encoded meanwhile by another caller
		return el.Value.(*cached).embeds, nil
	}
	e.byText[prompt] = e.lru.PushFront(&cached{text: prompt, embeds: out})
	for e.lru.Len() > PromptCacheSize {
		old := e.lru.Remove(e.lru.Back()).(*cached)
		delete(e.byText, old.text)
	}
	return out, nil
}

// CacheStats returns how many Embeds calls the cache answered and how many encoded.
func (e *PromptEncoder) CacheStats() (hits, misses int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits, e.misses
}

// WeightBytes is the encoder's weight memory.
func (e *PromptEncoder) WeightBytes() int64 { return e.Enc.WeightBytes() }

// Close releases the encoder.
func (e *PromptEncoder) Close() error { return e.Enc.Close() }
