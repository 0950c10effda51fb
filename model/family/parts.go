package family

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/tensor"
)

// PartDecoder is implemented by Samplers whose decode of one sample splits into parts that
// decode independently of each other (SVD: the decode_chunk_size chunks of frames, whose
// temporal layers see only their own chunk). Decoding every part, on any process, and
// joining the frames in part order (JoinParts) gives Decode's bits exactly, so the engine
// can spread a sample's parts over ranks (`vdpp generate --decode-ranks`). A Sampler
// without it decodes a sample as one part: spreading then spreads whole samples. Wan's
// causal VAE carries its cache from frame to frame, so its frames do not split without
// changing bits, and it decodes a sample in one part.
type PartDecoder interface {
	// DecodeParts is the number of parts of one sample's decode under p (>= 1).
	DecodeParts(p Params) int
	// DecodePart (a process that loaded the decoder) decodes part of one sample's final
	// latent [T, C, h, w] (or [1, T, C, h, w]): its frames [F_part, 3, H, W] in [0, 1].
	DecodePart(ctx context.Context, latent *tensor.Dense, p Params, part int) (*tensor.Dense, error)
}

// DecodeParts is s's part count for p: PartDecoder.DecodeParts, or 1 for a Sampler that
// decodes a sample whole.
func DecodeParts(s Sampler, p Params) int {
	if pd, ok := s.(PartDecoder); ok {
		return max(1, pd.DecodeParts(p))
	}
	return 1
}

// DecodePart decodes part of one sample: PartDecoder.DecodePart, or Decode for part 0 of a
// Sampler that decodes a sample whole.
func DecodePart(ctx context.Context, s Sampler, latent *tensor.Dense, p Params, part int) (*tensor.Dense, error) {
	if n := DecodeParts(s, p); part < 0 || part >= n {
		return nil, fmt.Errorf("%w: decode part %d of %d", ErrParams, part, n)
	}
	if pd, ok := s.(PartDecoder); ok {
		return pd.DecodePart(ctx, latent, p, part)
	}
	return s.Decode(ctx, latent, p)
}

// JoinParts joins a sample's decoded parts, in part order, into its frames [F, 3, H, W].
func JoinParts(parts []*tensor.Dense) (*tensor.Dense, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	out, err := tensor.ConcatRows(parts)
	if err != nil {
		return nil, fmt.Errorf("family: join decoded parts: %w", err)
	}
	return out, nil
}
