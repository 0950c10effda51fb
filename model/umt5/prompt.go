package umt5

import (
	"fmt"

	"github.com/vdpp/vdpp/tensor"
)

// DefaultMaxSequenceLength is WanPipeline's max_sequence_length.
const DefaultMaxSequenceLength = 512

// minRunLength is the shortest sequence PromptEmbeds runs the encoder on.
const minRunLength = 16

// Tokenizer is the umT5 tokenizer as PromptEmbeds uses it: EncodeBatch returns, per
// text, its token ids with the </s> end token appended, truncated to maxLen, and (with
// padding) padded with the pad id to exactly maxLen, plus the attention mask (1 on real
// tokens, 0 on padding).
type Tokenizer interface {
	EncodeBatch(texts []string, maxLen int, padding bool) (ids, mask [][]int32, err error)
}

// PromptEmbeds is diffusers' WanPipeline._get_t5_prompt_embeds (one video per prompt) in
// fp32: every prompt is cleaned with PromptClean, tokenized with padding to maxSeqLen
// (DefaultMaxSequenceLength when ≤ 0), encoded with its attention mask, and the
// embeddings of its real tokens (as many as the mask counts) are kept and zero-padded to
// maxSeqLen. The result is [len(prompts), maxSeqLen, d_model].
//
// Padding keys get exactly zero attention weight, so the real tokens' embeddings do not
// depend on how much padding follows them: the encoder runs on the longest prompt's
// length rounded up to a power of two (at least 16, at most maxSeqLen), not on all
// maxSeqLen positions, which changes the result only by float rounding. A tokenizer whose
// masks are not a run of ones followed by zeros gets the full length.
func (m *Model) PromptEmbeds(tok Tokenizer, prompts []string, maxSeqLen int) (*tensor.Dense, error) {
	if len(prompts) == 0 {
		return nil, fmt.Errorf("%w: no prompts", ErrInput)
	}
	if maxSeqLen <= 0 {
		maxSeqLen = DefaultMaxSequenceLength
	}
	cleaned := make([]string, len(prompts))
	for i, p := range prompts {
		cleaned[i] = PromptClean(p)
	}
	ids, mask, err := tok.EncodeBatch(cleaned, maxSeqLen, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenizer, err)
	}
	if len(ids) != len(prompts) || len(mask) != len(prompts) {
		return nil, fmt.Errorf("%w: %d id rows and %d mask rows for %d prompts", ErrTokenizer, len(ids), len(mask), len(prompts))
	}
	lens := make([]int, len(ids))
	longest, prefix := 0, true
	for i := range ids {
		if len(ids[i]) != maxSeqLen || len(mask[i]) != maxSeqLen {
			return nil, fmt.Errorf("%w: prompt %d: %d ids and %d mask entries, want %d (padding to max_sequence_length)", ErrTokenizer, i, len(ids[i]), len(mask[i]), maxSeqLen)
		}
		for j, v := range mask[i] {
			if v > 0 {
				lens[i]++
				prefix = prefix && j < lens[i]
			}
		}
		longest = max(longest, lens[i])
	}
	run := maxSeqLen
	if prefix {
		run = min(maxSeqLen, runLength(longest))
	}
	cut := func(rows [][]int32) [][]int32 {
		out := make([][]int32, len(rows))
		for i, r := range rows {
			out[i] = r[:run]
		}
		return out
	}
	hidden, err := m.Forward(cut(ids), cut(mask))
	if err != nil {
		return nil, err
	}
	d := m.cfg.DModel
	out := tensor.New(len(prompts), maxSeqLen, d)
	for i, n := range lens {
		copy(out.Data[i*maxSeqLen*d:(i*maxSeqLen+n)*d], hidden.Data[i*run*d:(i*run+n)*d])
	}
	return out, nil
}

// runLength is the power of two at or above n, at least minRunLength, so that prompts of
// similar lengths share one compiled graph.
func runLength(n int) int {
	r := minRunLength
	for r < n {
		r *= 2
	}
	return r
}
