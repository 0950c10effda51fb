package video

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// Text chunks go in and come back out; the image decodes to the same pixels.
func TestPNGText(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{200, 10, 30, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	text := []TextChunk{{"parameters", `vdpp generate --prompt "Café ☕ 東京"`}, {"vdpp", "v1 (commit abc)"}}
	b, err := AddPNGText(buf.Bytes(), text...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := PNGText(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range text {
		if got[c.Key] != c.Text {
			t.Fatalf("%s = %q, want %q", c.Key, got[c.Key], c.Text)
		}
	}
	back, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r, g, bl, _ := back.At(1, 1).RGBA(); r>>8 != 200 || g>>8 != 10 || bl>>8 != 30 {
		t.Fatal("pixels changed")
	}
	if _, err := AddPNGText([]byte("not a png"), text...); err == nil {
		t.Fatal("a non-PNG accepted")
	}
	if _, err := AddPNGText(buf.Bytes(), TextChunk{Key: ""}); err == nil {
		t.Fatal("an empty key accepted")
	}
}

func FuzzPNGText(f *testing.F) {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1)))
	b, _ := AddPNGText(buf.Bytes(), TextChunk{"k", "v"})
	f.Add(b)
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		PNGText(bytes.NewReader(data)) // must not panic or allocate without bound
		AddPNGText(data, TextChunk{"k", "v"})
	})
}

// The uncompressed MP4 carries the comment in moov/udta/©cmt; without one it has no udta.
func TestMP4PCMComment(t *testing.T) {
	frames := []image.Image{image.NewRGBA(image.Rect(0, 0, 16, 16)), image.NewRGBA(image.Rect(0, 0, 16, 16))}
	var with, without bytes.Buffer
	const comment = "vdpp generate --model builtin-wan --prompt 'a fox'"
	if err := WriteMP4PCMComment(&with, frames, 8, comment); err != nil {
		t.Fatal(err)
	}
	if err := WriteMP4PCM(&without, frames, 8); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("\xa9cmt\x00"), byte(len(comment)), 0, 0)
	if i := bytes.Index(with.Bytes(), want); i < 0 || !bytes.HasPrefix(with.Bytes()[i+len(want):], []byte(comment)) || !bytes.Contains(with.Bytes(), []byte("udta")) {
		t.Fatal("no ©cmt box with the comment")
	}
	if bytes.Contains(without.Bytes(), []byte("udta")) {
		t.Fatal("a udta box without a comment")
	}
}
