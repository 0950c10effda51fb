package umt5

import "math"

// RelativePositionBucket is UMT5Attention._relative_position_bucket for the encoder
// (bidirectional) on relative position rel = key position − query position: half of the
// buckets for each sign; within a half, distances below a quarter of numBuckets get one
// bucket each and longer ones share logarithmically wider buckets up to maxDistance, past
// which they all fall in the last one. The logarithm is evaluated in float32 step by step
// as torch does it, so the bucket edges fall where the reference puts them.
func RelativePositionBucket(rel, numBuckets, maxDistance int) int {
	half := numBuckets / 2
	bucket := 0
	if rel > 0 {
		bucket = half
	}
	if rel < 0 {
		rel = -rel
	}
	maxExact := half / 2
	if rel < maxExact {
		return bucket + rel
	}
	ratio := float32(rel) / float32(maxExact)
	logRatio := float32(math.Log(float64(ratio))) / float32(math.Log(float64(maxDistance)/float64(maxExact)))
	logRatio *= float32(half - maxExact)
	large := maxExact + int(logRatio) // torch's .to(long) truncates toward zero
	return bucket + min(large, half-1)
}

// bucketTable returns the bucket of every (query, key) pair of an n-token sequence,
// row-major [n·n], as int32 gather indices.
func bucketTable(n, numBuckets, maxDistance int) []int32 {
	byRel := make([]int32, 2*n-1) // index rel + n − 1
	for r := range byRel {
		byRel[r] = int32(RelativePositionBucket(r-(n-1), numBuckets, maxDistance))
	}
	out := make([]int32, n*n)
	for q := range n {
		for k := range n {
			out[q*n+k] = byRel[k-q+n-1]
		}
	}
	return out
}
