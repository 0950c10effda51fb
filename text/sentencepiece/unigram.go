package sentencepiece

import "math"

// unkPenalty is how much lower than the lowest piece score an unknown
// character scores (unigram_model.cc kUnkPenalty).
const unkPenalty = float32(10.0)

// span is one segment of a normalized string: bytes [begin, end) and its id.
type span struct {
	begin, end int
	id         int
}

// bestPath is the best segmentation ending at one byte position.
type bestPath struct {
	id      int
	score   float32
	startAt int // -1 while no path ends here
}

// oneCharLen is the UTF-8 sequence length the lead byte announces, as
// sentencepiece's string_util::OneCharLen reads it (no validation).
func oneCharLen(c byte) int {
	return int("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x03\x04"[c>>4])
}

// viterbi segments a normalized string with the unigram scores, as
// unigram::Model::EncodeOptimized does, including its mix of float32 and
// float64 arithmetic (a piece score widened to double, path scores stored as
// float) so that ties and near-ties resolve the same way.
func (t *Tokenizer) viterbi(normalized string, best []bestPath, out []span) ([]span, []bestPath) {
	size := len(normalized)
	if size == 0 {
		return out, best
	}
	if cap(best) < size+1 {
		best = make([]bestPath, size+1)
	}
	best = best[:size+1]
	for i := range best {
		best[i] = bestPath{id: -1, startAt: -1}
	}
	unkScore := t.minScore - unkPenalty
	trie := t.pieces
	for start := 0; start < size; {
		scoreHere := best[start].score
		hasSingleNode := false
		mblen := oneCharLen(normalized[start])
		if mblen > size-start {
			mblen = size - start
		}
		node := int32(0)
		for pos := start; pos < size; pos++ {
			if node = trie.child(node, normalized[pos]); node < 0 {
				break
			}
			id := trie.value[node]
			if id < 0 {
				continue
			}
			kind := t.kinds[id]
			if kind == typeUnused {
				continue
			}
			end := pos + 1
			length := end - start
			var score float64
			if kind == typeUserDefined {
				// User-defined symbols get a bonus so they are always chosen.
				score = float64(float32(length)*t.maxScore) - 0.1
			} else {
				score = float64(t.scores[id])
			}
			candidate := score + float64(scoreHere)
			target := &best[end]
			if target.startAt == -1 || candidate > float64(target.score) {
				target.score = float32(candidate)
				target.startAt = start
				target.id = int(id)
			}
			if !hasSingleNode && length == mblen {
				hasSingleNode = true
			}
		}
		if !hasSingleNode {
			target := &best[start+mblen]
			candidate := unkScore + scoreHere
			if target.startAt == -1 || candidate > target.score {
				target.score = candidate
				target.startAt = start
				target.id = t.unkID
			}
		}
		start += mblen
	}
	first := len(out)
	for end := size; end > 0; {
		n := best[end]
		if n.startAt < 0 || n.startAt >= end {
			// Unreachable for a well-formed lattice; stop rather than loop.
			break
		}
		out = append(out, span{begin: n.startAt, end: end, id: n.id})
		end = n.startAt
	}
	for i, j := first, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, best
}

// scoreBounds returns the lowest and highest NORMAL piece scores, starting
// from FLT_MAX and FLT_MIN (the smallest positive float) as the reference
// does, so a vocabulary of negative scores has maxScore = FLT_MIN.
func scoreBounds(pieces []piece) (minScore, maxScore float32) {
	minScore = math.MaxFloat32
	maxScore = float32(1.17549435e-38) // FLT_MIN, the smallest normal float
	for _, p := range pieces {
		if p.kind != typeNormal {
			continue
		}
		// std::min and std::max keep the first argument unless the second
		// compares strictly better, which also fixes how NaN scores behave.
		if p.score < minScore {
			minScore = p.score
		}
		if maxScore < p.score {
			maxScore = p.score
		}
	}
	return minScore, maxScore
}
