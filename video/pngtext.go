package video

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// pngSignature starts every PNG file.
var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// ErrPNG: the bytes are not a PNG file this package can add text to or read text from.
var ErrPNG = errors.New("video: not a PNG file")

// TextChunk is a key and a UTF-8 text, written as a PNG iTXt chunk (uncompressed). A1111
// and sd.cpp write their parameters under the key "parameters"; vdpp does too.
type TextChunk struct {
	Key, Text string
}

// AddPNGText returns the PNG file png with chunks as iTXt chunks right after its IHDR
// (the pixels are untouched). A key must be 1 to 79 bytes without NUL.
func AddPNGText(png []byte, chunks ...TextChunk) ([]byte, error) {
	if !bytes.HasPrefix(png, pngSignature) || len(png) < len(pngSignature)+8+13+4 || string(png[12:16]) != "IHDR" {
		return nil, ErrPNG
	}
	ihdrEnd := len(pngSignature) + 8 + int(binary.BigEndian.Uint32(png[8:12])) + 4
	if ihdrEnd > len(png) {
		return nil, ErrPNG
	}
	out := append([]byte(nil), png[:ihdrEnd]...)
	for _, c := range chunks {
		if len(c.Key) == 0 || len(c.Key) > 79 || bytes.IndexByte([]byte(c.Key), 0) >= 0 {
			return nil, fmt.Errorf("video: png text key %q: 1 to 79 bytes without NUL", c.Key)
		}
		// keyword, NUL, compression flag 0, method 0, language "", NUL, translated "", NUL, text
		data := append(append([]byte(c.Key), 0, 0, 0, 0, 0), c.Text...)
		out = appendChunk(out, "iTXt", data)
	}
	return append(out, png[ihdrEnd:]...), nil
}

func appendChunk(b []byte, kind string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(append(b, kind...), data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// PNGText returns the tEXt and iTXt (uncompressed) texts of a PNG file by key.
func PNGText(r io.Reader) (map[string]string, error) {
	sig := make([]byte, len(pngSignature))
	if _, err := io.ReadFull(r, sig); err != nil || !bytes.Equal(sig, pngSignature) {
		return nil, ErrPNG
	}
	out := map[string]string{}
	var head [8]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPNG, err)
		}
		n := binary.BigEndian.Uint32(head[:4])
		if n > 1<<26 {
			return nil, fmt.Errorf("%w: chunk of %d bytes", ErrPNG, n)
		}
		kind := string(head[4:])
		data := make([]byte, n+4)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPNG, err)
		}
		data = data[:n]
		switch kind {
		case "IEND":
			return out, nil
		case "tEXt":
			if k, v, ok := bytes.Cut(data, []byte{0}); ok {
				out[string(k)] = string(v)
			}
		case "iTXt":
			k, rest, ok := bytes.Cut(data, []byte{0})
			if !ok || len(rest) < 2 || rest[0] != 0 {
				continue // compressed, or malformed: not ours to read
			}
			rest = rest[2:]
			if _, rest, ok = bytes.Cut(rest, []byte{0}); !ok { // language
				continue
			}
			if _, rest, ok = bytes.Cut(rest, []byte{0}); !ok { // translated keyword
				continue
			}
			out[string(k)] = string(rest)
		}
	}
}
