package sentencepiece

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// spaceSymbol is U+2581 LOWER ONE EIGHTH BLOCK, which stands for a space in pieces.
const spaceSymbol = "\u2581"

// maxCharsmapMatches is how many prefix matches the reference reads from the
// charsmap trie per position (Normalizer::kMaxTrieResultsSize).
const maxCharsmapMatches = 32

// normalizer is sentencepiece's Normalizer: the precompiled charsmap rules
// (longest match wins), user-defined symbols copied verbatim, and the
// whitespace rules of NormalizerSpec.
type normalizer struct {
	spec        normalizerSpec
	suffixSpace bool        // TrainerSpec.treat_whitespace_as_suffix
	trie        doubleArray // nil without a charsmap
	replacement string      // NUL-separated normalized strings the trie values point into
	userDefined *byteTrie   // nil without user-defined symbols
}

// newNormalizer decodes spec's precompiled charsmap: a little-endian uint32
// trie size, the Darts double array, then the replacement strings.
func newNormalizer(spec normalizerSpec, suffixSpace bool, userDefined *byteTrie) (*normalizer, error) {
	n := &normalizer{spec: spec, suffixSpace: suffixSpace, userDefined: userDefined}
	blob := spec.precompiledCharsmap
	if len(blob) == 0 {
		return n, nil
	}
	if len(blob) <= 4 {
		return nil, fmt.Errorf("%w: precompiled charsmap of %d bytes", ErrCorruptModel, len(blob))
	}
	size := binary.LittleEndian.Uint32(blob)
	if uint64(size) > uint64(len(blob)-4) {
		return nil, fmt.Errorf("%w: charsmap trie of %d bytes in a %d-byte blob", ErrCorruptModel, size, len(blob))
	}
	units := make(doubleArray, size/4)
	for i := range units {
		units[i] = binary.LittleEndian.Uint32(blob[4+4*i:])
	}
	n.trie = units
	n.replacement = string(blob[4+size:])
	return n, nil
}

// normalizePrefix normalizes the first character (or rule match) of input:
// it returns the normalized text and how many input bytes it consumed.
func (n *normalizer) normalizePrefix(input string, matches []prefixMatch) (string, int, []prefixMatch) {
	if n.userDefined != nil {
		if l := n.userDefined.longestPrefix(input); l > 0 {
			return input[:l], l, matches
		}
	}
	longestLen, longestVal := 0, 0
	if n.trie != nil {
		matches = n.trie.commonPrefixSearch(input, matches, maxCharsmapMatches)
		for _, m := range matches {
			if longestLen == 0 || m.length > longestLen {
				longestLen, longestVal = m.length, m.value
			}
		}
	}
	if longestLen == 0 {
		r, size := utf8.DecodeRuneInString(input)
		if r == utf8.RuneError && size <= 1 {
			// Malformed UTF-8: one byte becomes U+FFFD.
			return "\uFFFD", 1, matches
		}
		return input[:size], size, matches
	}
	return n.replacementAt(longestVal), longestLen, matches
}

// replacementAt returns the NUL-terminated string at offset v of the
// replacement blob (clipped at the blob's end).
func (n *normalizer) replacementAt(v int) string {
	if v >= len(n.replacement) {
		return ""
	}
	s := n.replacement[v:]
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// normalize applies the rules and the whitespace handling to input.
func (n *normalizer) normalize(input string) string {
	if input == "" {
		return ""
	}
	var matches []prefixMatch
	var sp string
	var consumed int
	if n.spec.removeExtraWhitespaces {
		for input != "" {
			sp, consumed, matches = n.normalizePrefix(input, matches)
			if sp != " " {
				break
			}
			input = input[consumed:]
		}
	}
	if input == "" {
		return ""
	}
	var b strings.Builder
	b.Grow(len(input) * 3)
	space := " "
	if n.spec.escapeWhitespaces {
		space = spaceSymbol
	}
	if !n.suffixSpace && n.spec.addDummyPrefix {
		b.WriteString(space)
	}
	isPrevSpace := n.spec.removeExtraWhitespaces
	for input != "" {
		sp, consumed, matches = n.normalizePrefix(input, matches)
		for isPrevSpace && strings.HasPrefix(sp, " ") {
			sp = sp[1:]
		}
		if sp != "" {
			if n.spec.escapeWhitespaces {
				for i := 0; i < len(sp); i++ {
					if sp[i] == ' ' {
						b.WriteString(spaceSymbol)
					} else {
						b.WriteByte(sp[i])
					}
				}
			} else {
				b.WriteString(sp)
			}
			isPrevSpace = sp[len(sp)-1] == ' '
		}
		input = input[consumed:]
		if !n.spec.removeExtraWhitespaces {
			isPrevSpace = false
		}
	}
	out := b.String()
	if n.spec.removeExtraWhitespaces {
		for strings.HasSuffix(out, space) {
			out = out[:len(out)-len(space)]
		}
	}
	if n.suffixSpace && n.spec.addDummyPrefix {
		out += space
	}
	return out
}
