// Package sentencepiece tokenizes text as SentencePiece unigram models do,
// for T5-family text encoders (umT5 in Wan's text-to-video pipeline).
//
// It reads a SentencePiece model file (spiece.model, a serialized ModelProto,
// decoded here without a protobuf library) or the equivalent Hugging Face
// tokenizer.json (a Unigram model with a Precompiled normalizer and a
// Metaspace pre-tokenizer), and encodes exactly as the reference library
// (sentencepiece v0.1.97's EncodeAsIds) does:
//
//   - normalization: the precompiled charsmap (a Darts double-array trie of
//     rules such as NFKC, longest match first, one U+FFFD per malformed UTF-8
//     byte), user-defined pieces copied verbatim, then add_dummy_prefix,
//     remove_extra_whitespaces and escape_whitespaces (spaces become U+2581),
//     or a trailing space with treat_whitespace_as_suffix;
//   - segmentation: unigram Viterbi over the piece scores with the
//     reference's float32/float64 arithmetic and tie order, unknown
//     characters scored min_score-10, user-defined pieces always preferred,
//     unused pieces skipped;
//   - output: runs of unknown characters merged into one unknown id, or,
//     with byte_fallback, each unknown character spelt as its UTF-8 byte
//     pieces <0xXX>.
//
// Control pieces (<s>, </s>, <pad>) are never produced from text: a literal
// "</s>" in the input is tokenized as characters, as sentencepiece does (Hugging
// Face's fast tokenizer would instead match it as the special token).
// EncodeBatch adds what T5TokenizerFast adds: </s> at the end, truncation to
// a maximum length that keeps </s> last, padding with <pad> and the attention
// mask.
//
// Only unigram models are implemented (BPE, word and char models are
// ErrUnsupported). Encoding is linear in the text length times the longest
// piece; a Tokenizer is immutable and safe for concurrent use.
//
// Parity is checked against python3-sentencepiece on thousands of strings
// (testdata/gen.py trains the models and writes the golden ids).
package sentencepiece
