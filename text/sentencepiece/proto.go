package sentencepiece

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Piece types, as ModelProto.SentencePiece.Type numbers them.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Model types, as TrainerSpec.ModelType numbers them.
const modelTypeUnigram = 1

// piece is one vocabulary entry: its surface, log-probability score and type.
type piece struct {
	text  string
	score float32
	kind  int
}

// normalizerSpec is the part of NormalizerSpec the tokenizer needs.
type normalizerSpec struct {
	name                   string
	precompiledCharsmap    []byte
	addDummyPrefix         bool
	removeExtraWhitespaces bool
	escapeWhitespaces      bool
}

func defaultNormalizerSpec() normalizerSpec {
	return normalizerSpec{addDummyPrefix: true, removeExtraWhitespaces: true, escapeWhitespaces: true}
}

// modelSpec is the decoded ModelProto, reduced to what encoding and decoding use.
type modelSpec struct {
	pieces                  []piece
	modelType               int
	byteFallback            bool
	treatWhitespaceAsSuffix bool
	unkPiece, bosPiece      string
	eosPiece, padPiece      string
	unkSurface              string
	normalizer              normalizerSpec
	denormalizer            *normalizerSpec
}

func defaultModelSpec() modelSpec {
	return modelSpec{
		modelType:  modelTypeUnigram,
		unkPiece:   "<unk>",
		bosPiece:   "<s>",
		eosPiece:   "</s>",
		padPiece:   "<pad>",
		unkSurface: " \u2047 ",
		normalizer: defaultNormalizerSpec(),
	}
}

// Protobuf wire types.
const (
	wireVarint = 0
	wireI64    = 1
	wireBytes  = 2
	wireStart  = 3
	wireEnd    = 4
	wireI32    = 5
)

// wireReader walks the fields of one protobuf message.
type wireReader struct {
	buf []byte
	off int
}

// next returns the next field: its number and wire type, and its payload
// (varint value in v, bytes in b, fixed values in v).
func (r *wireReader) next() (num int, typ int, v uint64, b []byte, err error) {
	key, err := r.varint()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	num, typ = int(key>>3), int(key&7)
	if num <= 0 {
		return 0, 0, 0, nil, fmt.Errorf("field number %d at byte %d", num, r.off)
	}
	switch typ {
	case wireVarint:
		v, err = r.varint()
	case wireI64:
		if len(r.buf)-r.off < 8 {
			return 0, 0, 0, nil, fmt.Errorf("truncated fixed64 field %d", num)
		}
		v = binary.LittleEndian.Uint64(r.buf[r.off:])
		r.off += 8
	case wireI32:
		if len(r.buf)-r.off < 4 {
			return 0, 0, 0, nil, fmt.Errorf("truncated fixed32 field %d", num)
		}
		v = uint64(binary.LittleEndian.Uint32(r.buf[r.off:]))
		r.off += 4
	case wireBytes:
		var n uint64
		n, err = r.varint()
		if err != nil {
			return 0, 0, 0, nil, err
		}
		if n > uint64(len(r.buf)-r.off) {
			return 0, 0, 0, nil, fmt.Errorf("field %d: length %d past the end of the message", num, n)
		}
		b = r.buf[r.off : r.off+int(n)]
		r.off += int(n)
	case wireStart:
		err = r.skipGroup(num, 0)
	default:
		err = fmt.Errorf("field %d: unsupported wire type %d", num, typ)
	}
	return num, typ, v, b, err
}

func (r *wireReader) done() bool { return r.off >= len(r.buf) }

func (r *wireReader) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.off >= len(r.buf) {
			return 0, fmt.Errorf("truncated varint at byte %d", r.off)
		}
		c := r.buf[r.off]
		r.off++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("varint longer than 10 bytes at byte %d", r.off)
}

// skipGroup skips a deprecated group up to its matching end tag.
func (r *wireReader) skipGroup(num, depth int) error {
	if depth > 64 {
		return fmt.Errorf("groups nested too deep")
	}
	for {
		key, err := r.varint()
		if err != nil {
			return err
		}
		n, t := int(key>>3), int(key&7)
		switch t {
		case wireEnd:
			if n != num {
				return fmt.Errorf("group %d closed by end tag %d", num, n)
			}
			return nil
		case wireStart:
			if err := r.skipGroup(n, depth+1); err != nil {
				return err
			}
		case wireVarint:
			_, err = r.varint()
		case wireI64:
			if len(r.buf)-r.off < 8 {
				return fmt.Errorf("truncated fixed64 in group")
			}
			r.off += 8
		case wireI32:
			if len(r.buf)-r.off < 4 {
				return fmt.Errorf("truncated fixed32 in group")
			}
			r.off += 4
		case wireBytes:
			var l uint64
			l, err = r.varint()
			if err == nil && l > uint64(len(r.buf)-r.off) {
				err = fmt.Errorf("truncated bytes in group")
			}
			if err == nil {
				r.off += int(l)
			}
		default:
			return fmt.Errorf("unsupported wire type %d in group", t)
		}
		if err != nil {
			return err
		}
	}
}

// expect checks that a known field arrived with the wire type its schema gives.
func expect(field string, typ, want int) error {
	if typ != want {
		return fmt.Errorf("%s: wire type %d, want %d", field, typ, want)
	}
	return nil
}

// parseModelProto decodes a serialized sentencepiece ModelProto.
func parseModelProto(buf []byte) (*modelSpec, error) {
	m := defaultModelSpec()
	r := wireReader{buf: buf}
	for !r.done() {
		num, typ, _, b, err := r.next()
		if err != nil {
			return nil, err
		}
		switch num {
		case 1:
			if err := expect("ModelProto.pieces", typ, wireBytes); err != nil {
				return nil, err
			}
			p, err := parsePiece(b)
			if err != nil {
				return nil, fmt.Errorf("piece %d: %w", len(m.pieces), err)
			}
			m.pieces = append(m.pieces, p)
		case 2:
			if err := expect("ModelProto.trainer_spec", typ, wireBytes); err != nil {
				return nil, err
			}
			if err := parseTrainerSpec(b, &m); err != nil {
				return nil, fmt.Errorf("trainer_spec: %w", err)
			}
		case 3:
			if err := expect("ModelProto.normalizer_spec", typ, wireBytes); err != nil {
				return nil, err
			}
			if err := parseNormalizerSpec(b, &m.normalizer); err != nil {
				return nil, fmt.Errorf("normalizer_spec: %w", err)
			}
		case 5:
			if err := expect("ModelProto.denormalizer_spec", typ, wireBytes); err != nil {
				return nil, err
			}
			d := defaultNormalizerSpec()
			if err := parseNormalizerSpec(b, &d); err != nil {
				return nil, fmt.Errorf("denormalizer_spec: %w", err)
			}
			m.denormalizer = &d
		}
	}
	return &m, nil
}

func parsePiece(buf []byte) (piece, error) {
	p := piece{kind: typeNormal}
	r := wireReader{buf: buf}
	for !r.done() {
		num, typ, v, b, err := r.next()
		if err != nil {
			return p, err
		}
		switch num {
		case 1:
			if err := expect("piece", typ, wireBytes); err != nil {
				return p, err
			}
			p.text = string(b)
		case 2:
			if err := expect("score", typ, wireI32); err != nil {
				return p, err
			}
			p.score = math.Float32frombits(uint32(v))
		case 3:
			if err := expect("type", typ, wireVarint); err != nil {
				return p, err
			}
			p.kind = int(int32(v))
		}
	}
	return p, nil
}

func parseTrainerSpec(buf []byte, m *modelSpec) error {
	r := wireReader{buf: buf}
	for !r.done() {
		num, typ, v, b, err := r.next()
		if err != nil {
			return err
		}
		str := func(dst *string) error {
			if err := expect(fmt.Sprintf("field %d", num), typ, wireBytes); err != nil {
				return err
			}
			*dst = string(b)
			return nil
		}
		boolean := func(dst *bool) error {
			if err := expect(fmt.Sprintf("field %d", num), typ, wireVarint); err != nil {
				return err
			}
			*dst = v != 0
			return nil
		}
		switch num {
		case 3:
			err = expect("model_type", typ, wireVarint)
			m.modelType = int(int32(v))
		case 24:
			err = boolean(&m.treatWhitespaceAsSuffix)
		case 35:
			err = boolean(&m.byteFallback)
		case 44:
			err = str(&m.unkSurface)
		case 45:
			err = str(&m.unkPiece)
		case 46:
			err = str(&m.bosPiece)
		case 47:
			err = str(&m.eosPiece)
		case 48:
			err = str(&m.padPiece)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseNormalizerSpec(buf []byte, n *normalizerSpec) error {
	r := wireReader{buf: buf}
	for !r.done() {
		num, typ, v, b, err := r.next()
		if err != nil {
			return err
		}
		switch num {
		case 1:
			err = expect("name", typ, wireBytes)
			n.name = string(b)
		case 2:
			err = expect("precompiled_charsmap", typ, wireBytes)
			n.precompiledCharsmap = b
		case 3:
			err = expect("add_dummy_prefix", typ, wireVarint)
			n.addDummyPrefix = v != 0
		case 4:
			err = expect("remove_extra_whitespaces", typ, wireVarint)
			n.removeExtraWhitespaces = v != 0
		case 5:
			err = expect("escape_whitespaces", typ, wireVarint)
			n.escapeWhitespaces = v != 0
		}
		if err != nil {
			return err
		}
	}
	return nil
}
