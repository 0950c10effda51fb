package sentencepiece

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"
)

// Errors the package returns, wrapped with the details.
var (
	// ErrCorruptModel means a model file or tokenizer.json could not be decoded
	// or breaks a rule the reference checks at load time.
	ErrCorruptModel = errors.New("sentencepiece: corrupt model")
	// ErrUnsupported means a well-formed model the package does not implement
	// (a BPE, word or char model; a tokenizer.json that is not Unigram).
	ErrUnsupported = errors.New("sentencepiece: unsupported model")
	// ErrNoModel means the path holds neither spiece.model nor tokenizer.json.
	ErrNoModel = errors.New("sentencepiece: no tokenizer model")
	// ErrNoSpecialPiece means EncodeBatch needs </s> (or <pad>, to pad) and the
	// model has no such control piece.
	ErrNoSpecialPiece = errors.New("sentencepiece: model lacks a special piece")
)

// Tokenizer encodes text into SentencePiece unigram ids. It is immutable
// after loading and safe for concurrent use.
type Tokenizer struct {
	vocab    []string
	scores   []float32
	kinds    []uint8
	pieces   *byteTrie      // NORMAL, USER_DEFINED and UNUSED pieces
	reserved map[string]int // CONTROL, UNKNOWN and BYTE pieces

	norm         *normalizer
	denorm       *normalizer // nil unless the model has a denormalizer charsmap
	addDummy     bool
	removeExtra  bool
	byteFallback bool
	byteIDs      [256]int

	unkID, eosID, padID int
	unkSurface          string
	minScore, maxScore  float32

	scratch sync.Pool // *encodeScratch
}

type encodeScratch struct {
	best  []bestPath
	spans []span
}

// Load reads a tokenizer from a sentencepiece model file (a ModelProto,
// usually spiece.model), a Hugging Face tokenizer.json with a Unigram model,
// or a folder holding either: the first of spiece.model, tokenizer.model,
// sentencepiece.model and tokenizer.json found there is read. Files are told
// apart by content: a JSON object is a tokenizer.json, anything else a
// ModelProto.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece: %w", err)
	}
	if st.IsDir() {
		found := ""
		for _, name := range []string{"spiece.model", "tokenizer.model", "sentencepiece.model", "tokenizer.json"} {
			if fi, err := os.Stat(filepath.Join(path, name)); err == nil && !fi.IsDir() {
				found = filepath.Join(path, name)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%w: %s has no spiece.model or tokenizer.json", ErrNoModel, path)
		}
		path = found
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece: %w", err)
	}
	var t *Tokenizer
	if looksLikeJSON(data) {
		t, err = ParseTokenizerJSON(data)
	} else {
		t, err = ParseModel(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func looksLikeJSON(data []byte) bool {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

// ParseModel builds a tokenizer from a serialized sentencepiece ModelProto.
func ParseModel(data []byte) (*Tokenizer, error) {
	spec, err := parseModelProto(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptModel, err)
	}
	return newTokenizer(spec)
}

// newTokenizer checks a decoded model as ModelInterface::InitializePieces
// does and builds the lookup structures.
func newTokenizer(spec *modelSpec) (*Tokenizer, error) {
	if spec.modelType != modelTypeUnigram {
		return nil, fmt.Errorf("%w: model_type %d (only unigram, 1, is implemented)", ErrUnsupported, spec.modelType)
	}
	if len(spec.pieces) == 0 {
		return nil, fmt.Errorf("%w: no pieces", ErrCorruptModel)
	}
	n := len(spec.pieces)
	t := &Tokenizer{
		vocab:        make([]string, n),
		scores:       make([]float32, n),
		kinds:        make([]uint8, n),
		reserved:     make(map[string]int, 300),
		addDummy:     spec.normalizer.addDummyPrefix,
		removeExtra:  spec.normalizer.removeExtraWhitespaces,
		byteFallback: spec.byteFallback,
		unkID:        -1,
		unkSurface:   spec.unkSurface,
	}
	var keys, userKeys []string
	var ids, userIDs []int32
	for i := range t.byteIDs {
		t.byteIDs[i] = -1
	}
	for i, p := range spec.pieces {
		if p.text == "" {
			return nil, fmt.Errorf("%w: piece %d is empty", ErrCorruptModel, i)
		}
		if p.kind < typeNormal || p.kind > typeByte {
			return nil, fmt.Errorf("%w: piece %d (%q) has type %d", ErrCorruptModel, i, p.text, p.kind)
		}
		t.vocab[i], t.scores[i], t.kinds[i] = p.text, p.score, uint8(p.kind)
		switch p.kind {
		case typeNormal, typeUserDefined, typeUnused:
			keys, ids = append(keys, p.text), append(ids, int32(i))
			if p.kind == typeUserDefined {
				userKeys, userIDs = append(userKeys, p.text), append(userIDs, int32(i))
			}
		default:
			if _, dup := t.reserved[p.text]; dup {
				return nil, fmt.Errorf("%w: piece %q is defined twice", ErrCorruptModel, p.text)
			}
			t.reserved[p.text] = i
		}
		switch p.kind {
		case typeUnknown:
			if t.unkID >= 0 {
				return nil, fmt.Errorf("%w: two unknown pieces (%d and %d)", ErrCorruptModel, t.unkID, i)
			}
			t.unkID = i
		case typeByte:
			if !spec.byteFallback {
				return nil, fmt.Errorf("%w: byte piece %q although byte_fallback is false", ErrCorruptModel, p.text)
			}
			b, ok := pieceToByte(p.text)
			if !ok {
				return nil, fmt.Errorf("%w: byte piece %q is invalid", ErrCorruptModel, p.text)
			}
			t.byteIDs[b] = i
		}
	}
	if t.unkID < 0 {
		return nil, fmt.Errorf("%w: no unknown piece", ErrCorruptModel)
	}
	if spec.byteFallback {
		for b, id := range t.byteIDs {
			if id < 0 {
				return nil, fmt.Errorf("%w: byte_fallback without the piece <0x%02X>", ErrCorruptModel, b)
			}
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no normal pieces", ErrCorruptModel)
	}
	var dup string
	if t.pieces, dup = newByteTrie(keys, ids); dup != "" {
		return nil, fmt.Errorf("%w: piece %q is defined twice", ErrCorruptModel, dup)
	}
	var user *byteTrie
	if len(userKeys) > 0 {
		user, _ = newByteTrie(userKeys, userIDs)
	}
	var err error
	if t.norm, err = newNormalizer(spec.normalizer, spec.treatWhitespaceAsSuffix, user); err != nil {
		return nil, err
	}
	if d := spec.denormalizer; d != nil && len(d.precompiledCharsmap) > 0 {
		if t.denorm, err = newNormalizer(*d, false, nil); err != nil {
			return nil, fmt.Errorf("denormalizer: %w", err)
		}
	}
	t.minScore, t.maxScore = scoreBounds(spec.pieces)
	t.eosID = t.controlID(nonEmpty(spec.eosPiece, "</s>"))
	t.padID = t.controlID(nonEmpty(spec.padPiece, "<pad>"))
	t.scratch.New = func() any { return &encodeScratch{} }
	return t, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// controlID returns the id of a control piece, or -1.
func (t *Tokenizer) controlID(p string) int {
	if id, ok := t.reserved[p]; ok && t.kinds[id] == typeControl {
		return id
	}
	return -1
}

// pieceToByte parses "<0xXX>" (upper-case hex, as the reference writes it).
func pieceToByte(p string) (int, bool) {
	const hex = "0123456789ABCDEF"
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return 0, false
	}
	hi, lo := strings.IndexByte(hex, p[3]), strings.IndexByte(hex, p[4])
	if hi < 0 || lo < 0 {
		return 0, false
	}
	return hi<<4 | lo, true
}

// VocabSize is the number of pieces (ids are 0..VocabSize()-1).
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// EOSID is the id of the end-of-sequence control piece (</s>), or -1.
func (t *Tokenizer) EOSID() int { return t.eosID }

// PadID is the id of the padding control piece (<pad>), or -1.
func (t *Tokenizer) PadID() int { return t.padID }

// UnknownID is the id of the unknown piece.
func (t *Tokenizer) UnknownID() int { return t.unkID }

// PieceToID returns the id of a piece and whether the vocabulary has it.
func (t *Tokenizer) PieceToID(p string) (int, bool) {
	if id, ok := t.reserved[p]; ok {
		return id, true
	}
	if id, ok := t.pieces.lookup(p); ok {
		return int(id), true
	}
	return t.unkID, false
}

// PieceToIDOrUnknown is PieceToID falling back to the unknown id, as the
// reference's PieceToId does.
func (t *Tokenizer) PieceToIDOrUnknown(p string) int {
	id, _ := t.PieceToID(p)
	return id
}

// IDToPiece returns the piece of an id, or "" when id is out of range.
func (t *Tokenizer) IDToPiece(id int) string {
	if id < 0 || id >= len(t.vocab) {
		return ""
	}
	return t.vocab[id]
}

// Encode returns the ids of text as the reference's EncodeAsIds does: no BOS
// or EOS. Invalid UTF-8 bytes are read as U+FFFD, as the reference's
// normalizer does; the error is reserved for future limits and is nil.
func (t *Tokenizer) Encode(text string) ([]int, error) {
	return t.appendIDs(nil, text), nil
}

// appendIDs appends the ids of text to dst.
func (t *Tokenizer) appendIDs(dst []int, text string) []int {
	normalized := t.norm.normalize(text)
	if normalized == "" {
		return dst
	}
	s := t.scratch.Get().(*encodeScratch)
	s.spans, s.best = t.viterbi(normalized, s.best, s.spans[:0])
	prevUnk := false
	for _, sp := range s.spans {
		isUnk := t.kinds[sp.id] == typeUnknown
		switch {
		case isUnk && t.byteFallback:
			for i := sp.begin; i < sp.end; i++ {
				dst = append(dst, t.byteIDs[normalized[i]])
			}
		case isUnk && prevUnk:
			// A run of unknown characters is one unknown piece.
		default:
			dst = append(dst, sp.id)
		}
		prevUnk = isUnk
	}
	t.scratch.Put(s)
	return dst
}

// EncodeBatch tokenizes texts as T5TokenizerFast does with truncation to
// maxLen: each row is Encode's ids plus </s>, cut to maxLen ids keeping </s>
// last. With padding, rows are padded with the pad id to maxLen (to the
// longest row when maxLen <= 0); mask is 1 on real ids (</s> included) and 0
// on padding. maxLen <= 0 means no truncation.
func (t *Tokenizer) EncodeBatch(texts []string, maxLen int, padding bool) (ids, mask [][]int32, err error) {
	if t.eosID < 0 {
		return nil, nil, fmt.Errorf("%w: no </s> control piece to end rows with", ErrNoSpecialPiece)
	}
	if padding && t.padID < 0 {
		return nil, nil, fmt.Errorf("%w: no <pad> control piece to pad rows with", ErrNoSpecialPiece)
	}
	ids = make([][]int32, len(texts))
	mask = make([][]int32, len(texts))
	longest := 0
	var buf []int
	for i, text := range texts {
		buf = t.appendIDs(buf[:0], text)
		if maxLen > 0 && len(buf) > maxLen-1 {
			buf = buf[:max(maxLen-1, 0)]
		}
		row := make([]int32, len(buf)+1)
		for j, id := range buf {
			row[j] = int32(id)
		}
		row[len(buf)] = int32(t.eosID)
		ids[i] = row
		longest = max(longest, len(row))
	}
	width := longest
	if maxLen > 0 {
		width = maxLen
	}
	for i, row := range ids {
		real := len(row)
		if padding && real < width {
			padded := make([]int32, width)
			copy(padded, row)
			for j := real; j < width; j++ {
				padded[j] = int32(t.padID)
			}
			ids[i] = padded
		}
		m := make([]int32, len(ids[i]))
		for j := 0; j < real; j++ {
			m[j] = 1
		}
		mask[i] = m
	}
	return ids, mask, nil
}

// Decode turns ids back into text as the reference's DecodeIds does: control
// pieces vanish, U+2581 becomes a space (the leading one dropped), runs of
// byte pieces are read as UTF-8 (U+FFFD for each invalid byte), and the
// unknown piece prints as the model's unk_surface (" ⁇ " by default). Ids
// out of range are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	var text strings.Builder
	var bytes []byte
	flush := func() {
		for len(bytes) > 0 {
			r, size := utf8.DecodeRune(bytes)
			if r == utf8.RuneError && size <= 1 {
				text.WriteString("\uFFFD")
				size = 1
			} else {
				text.Write(bytes[:size])
			}
			bytes = bytes[size:]
		}
	}
	isBOSSpace, bosSpaceSeen := true, false
	for _, id := range ids {
		if id < 0 || id >= len(t.vocab) {
			continue
		}
		kind := t.kinds[id]
		if kind == typeByte {
			b, _ := pieceToByte(t.vocab[id])
			bytes = append(bytes, byte(b))
			continue
		}
		flush()
		if bosSpaceSeen || text.Len() > 0 {
			isBOSSpace = false
		}
		var piece string
		bosSpaceSeen = false
		switch kind {
		case typeControl:
		case typeUnknown:
			piece = t.unkSurface
		default:
			piece = t.vocab[id]
			if isBOSSpace && (t.addDummy || t.removeExtra) {
				if trimmed, ok := strings.CutPrefix(piece, spaceSymbol); ok {
					piece = trimmed
					bosSpaceSeen = !t.removeExtra
				}
			}
			piece = strings.ReplaceAll(piece, spaceSymbol, " ")
		}
		text.WriteString(piece)
	}
	flush()
	out := text.String()
	if t.denorm != nil {
		out = t.denorm.normalize(out)
	}
	return out
}
