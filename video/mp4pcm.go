package video

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
)

// WriteMP4PCM writes frames as an MP4 file (ISO BMFF, moov first) holding an H.264
// Constrained Baseline stream whose every picture is an IDR slice of I_PCM macroblocks: the
// samples are stored uncompressed (BT.601 limited-range YUV 4:2:0), so any H.264 decoder
// plays it, no encoder library or ffmpeg is needed, and the file is about 1.5 bytes per
// pixel per frame. WriteMP4Any uses it when ffmpeg is not installed. Frames must share one
// size; fps is the frame rate (1..240).
func WriteMP4PCM(w io.Writer, frames []image.Image, fps int) error {
	return WriteMP4PCMComment(w, frames, fps, "")
}

// WriteMP4PCMComment is WriteMP4PCM with a comment in the file's user data (moov/udta's
// ©cmt, which players and ffprobe show as "comment"); "" writes none.
func WriteMP4PCMComment(w io.Writer, frames []image.Image, fps int, comment string) error {
	if len(frames) == 0 {
		return fmt.Errorf("video: mp4: no frames")
	}
	if fps < 1 || fps > 240 {
		return fmt.Errorf("video: mp4: fps %d out of range", fps)
	}
	b := frames[0].Bounds()
	width, height := b.Dx(), b.Dy()
	if width < 2 || height < 2 || width > 4096 || height > 4096 {
		return fmt.Errorf("video: mp4: frame size %dx%d out of range", width, height)
	}
	for i, f := range frames {
		if f.Bounds().Dx() != width || f.Bounds().Dy() != height {
			return fmt.Errorf("video: mp4: frame %d is %v, frame 0 is %dx%d", i, f.Bounds().Size(), width, height)
		}
	}
	mbw, mbh := (width+15)/16, (height+15)/16
	sps := spsNAL(mbw, mbh, width, height)
	pps := ppsNAL()
	samples := make([][]byte, len(frames))
	for i, f := range frames {
		samples[i] = idrNAL(f, mbw, mbh, i)
	}
	ftyp := box("ftyp", []byte("isom"), u32(512), []byte("isomiso2avc1mp41"))
	moov := moovBox(samples, sps, pps, width, height, fps, 0, comment)
	// The chunk offset is the mdat payload's position: after ftyp, moov and the mdat header.
	moov = moovBox(samples, sps, pps, width, height, fps, uint32(len(ftyp)+len(moov)+8), comment)
	mdatLen := 8
	for _, s := range samples {
		mdatLen += len(s)
	}
	for _, part := range [][]byte{ftyp, moov, u32(uint32(mdatLen)), []byte("mdat")} {
		if _, err := w.Write(part); err != nil {
			return err
		}
	}
	for _, s := range samples {
		if _, err := w.Write(s); err != nil {
			return err
		}
	}
	return nil
}

// bitWriter writes an RBSP most significant bit first.
type bitWriter struct {
	buf  []byte
	cur  byte
	nbit uint
}

func (bw *bitWriter) bit(b uint) {
	bw.cur = bw.cur<<1 | byte(b&1)
	bw.nbit++
	if bw.nbit == 8 {
		bw.buf = append(bw.buf, bw.cur)
		bw.cur, bw.nbit = 0, 0
	}
}

func (bw *bitWriter) bits(v uint64, n int) {
	for i := n - 1; i >= 0; i-- {
		bw.bit(uint(v >> uint(i)))
	}
}

// ue writes an unsigned Exp-Golomb code.
func (bw *bitWriter) ue(v uint64) {
	v++
	n := 0
	for x := v; x > 1; x >>= 1 {
		n++
	}
	bw.bits(0, n)
	bw.bits(v, n+1)
}

func (bw *bitWriter) align() {
	for bw.nbit != 0 {
		bw.bit(0)
	}
}

// trailing writes rbsp_trailing_bits and returns the RBSP.
func (bw *bitWriter) trailing() []byte {
	bw.bit(1)
	bw.align()
	return bw.buf
}

// nal wraps an RBSP as a NAL unit (header byte, emulation prevention).
func nal(header byte, rbsp []byte) []byte {
	out := []byte{header}
	zeros := 0
	for _, c := range rbsp {
		if zeros >= 2 && c <= 3 {
			out = append(out, 3)
			zeros = 0
		}
		out = append(out, c)
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	return out
}

const (
	avcProfile     = 66   // Baseline
	avcConstraints = 0xC0 // constraint_set0 and set1: Constrained Baseline
	avcLevel       = 40
)

func spsNAL(mbw, mbh, width, height int) []byte {
	var bw bitWriter
	bw.bits(avcProfile, 8)
	bw.bits(avcConstraints, 8)
	bw.bits(avcLevel, 8)
	bw.ue(0) // seq_parameter_set_id
	bw.ue(0) // log2_max_frame_num_minus4
	bw.ue(2) // pic_order_cnt_type: output order is decode order
	bw.ue(0) // max_num_ref_frames
	bw.bit(0)
	bw.ue(uint64(mbw - 1))
	bw.ue(uint64(mbh - 1))
	bw.bit(1) // frame_mbs_only_flag
	bw.bit(1) // direct_8x8_inference_flag
	cropR, cropB := (mbw*16-width)/2, (mbh*16-height)/2
	if cropR > 0 || cropB > 0 {
		bw.bit(1)
		bw.ue(0)
		bw.ue(uint64(cropR))
		bw.ue(0)
		bw.ue(uint64(cropB))
	} else {
		bw.bit(0)
	}
	bw.bit(0) // vui_parameters_present_flag
	return nal(0x67, bw.trailing())
}

func ppsNAL() []byte {
	var bw bitWriter
	bw.ue(0)      // pic_parameter_set_id
	bw.ue(0)      // seq_parameter_set_id
	bw.bit(0)     // entropy_coding_mode_flag: CAVLC
	bw.bit(0)     // bottom_field_pic_order_in_frame_present_flag
	bw.ue(0)      // num_slice_groups_minus1
	bw.ue(0)      // num_ref_idx_l0_default_active_minus1
	bw.ue(0)      // num_ref_idx_l1_default_active_minus1
	bw.bit(0)     // weighted_pred_flag
	bw.bits(0, 2) // weighted_bipred_idc
	bw.ue(0)      // pic_init_qp_minus26 (se 0)
	bw.ue(0)      // pic_init_qs_minus26 (se 0)
	bw.ue(0)      // chroma_qp_index_offset (se 0)
	bw.bit(0)     // deblocking_filter_control_present_flag
	bw.bit(0)     // constrained_intra_pred_flag
	bw.bit(0)     // redundant_pic_cnt_present_flag
	return nal(0x68, bw.trailing())
}

// yuv returns the BT.601 limited-range samples of img, padded to whole macroblocks by
// repeating the last row and column; values are kept in [1, 254].
func yuv(img image.Image, mbw, mbh int) (y, cb, cr []byte) {
	b := img.Bounds()
	w, h := mbw*16, mbh*16
	rgb := make([][3]float64, w*h)
	for j := 0; j < h; j++ {
		for i := 0; i < w; i++ {
			r, g, bl, _ := img.At(b.Min.X+min(i, b.Dx()-1), b.Min.Y+min(j, b.Dy()-1)).RGBA()
			rgb[j*w+i] = [3]float64{float64(r >> 8), float64(g >> 8), float64(bl >> 8)}
		}
	}
	clamp := func(v float64) byte { return byte(min(max(v+0.5, 1), 254)) }
	y = make([]byte, w*h)
	for i, p := range rgb {
		y[i] = clamp(16 + 0.257*p[0] + 0.504*p[1] + 0.098*p[2])
	}
	cw, ch := w/2, h/2
	cb, cr = make([]byte, cw*ch), make([]byte, cw*ch)
	for j := 0; j < ch; j++ {
		for i := 0; i < cw; i++ {
			var s [3]float64
			for _, o := range [4]int{0, 1, w, w + 1} {
				p := rgb[(2*j)*w+2*i+o]
				s[0], s[1], s[2] = s[0]+p[0]/4, s[1]+p[1]/4, s[2]+p[2]/4
			}
			cb[j*cw+i] = clamp(128 - 0.148*s[0] - 0.291*s[1] + 0.439*s[2])
			cr[j*cw+i] = clamp(128 + 0.439*s[0] - 0.368*s[1] - 0.071*s[2])
		}
	}
	return y, cb, cr
}

// idrNAL encodes one picture as an IDR slice of I_PCM macroblocks, length-prefixed.
func idrNAL(img image.Image, mbw, mbh, index int) []byte {
	yp, cb, cr := yuv(img, mbw, mbh)
	w, cw := mbw*16, mbw*8
	var bw bitWriter
	bw.ue(0)                 // first_mb_in_slice
	bw.ue(7)                 // slice_type: I (all slices)
	bw.ue(0)                 // pic_parameter_set_id
	bw.bits(0, 4)            // frame_num
	bw.ue(uint64(index % 2)) // idr_pic_id: differs between consecutive IDR pictures
	bw.bit(0)                // no_output_of_prior_pics_flag
	bw.bit(0)                // long_term_reference_flag
	bw.ue(0)                 // slice_qp_delta (se 0)
	for my := 0; my < mbh; my++ {
		for mx := 0; mx < mbw; mx++ {
			bw.ue(25) // mb_type I_PCM
			bw.align()
			for j := 0; j < 16; j++ {
				bw.buf = append(bw.buf, yp[(my*16+j)*w+mx*16:][:16]...)
			}
			for _, plane := range [][]byte{cb, cr} {
				for j := 0; j < 8; j++ {
					bw.buf = append(bw.buf, plane[(my*8+j)*cw+mx*8:][:8]...)
				}
			}
		}
	}
	n := nal(0x65, bw.trailing())
	return append(u32(uint32(len(n))), n...)
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func box(kind string, parts ...[]byte) []byte {
	n := 8
	for _, p := range parts {
		n += len(p)
	}
	out := append(u32(uint32(n)), kind...)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// fullBox is a box with a version byte and 24 bits of flags.
func fullBox(kind string, version byte, flags uint32, parts ...[]byte) []byte {
	return box(kind, append([][]byte{u32(uint32(version)<<24 | flags)}, parts...)...)
}

var unityMatrix = func() []byte {
	var out []byte
	for _, v := range []uint32{0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000} {
		out = append(out, u32(v)...)
	}
	return out
}()

func moovBox(samples [][]byte, sps, pps []byte, width, height, fps int, chunkOffset uint32, comment string) []byte {
	n := uint32(len(samples))
	durMS := uint32(uint64(n) * 1000 / uint64(fps))
	mvhd := fullBox("mvhd", 0, 0, u32(0), u32(0), u32(1000), u32(durMS), u32(0x00010000), u16(0x0100),
		make([]byte, 10), unityMatrix, make([]byte, 24), u32(2))
	tkhd := fullBox("tkhd", 0, 3, u32(0), u32(0), u32(1), u32(0), u32(durMS), make([]byte, 8), u16(0), u16(0),
		u16(0), u16(0), unityMatrix, u32(uint32(width)<<16), u32(uint32(height)<<16))
	mdhd := fullBox("mdhd", 0, 0, u32(0), u32(0), u32(uint32(fps)), u32(n), u16(0x55C4), u16(0))
	hdlr := fullBox("hdlr", 0, 0, u32(0), []byte("vide"), make([]byte, 12), []byte("VideoHandler\x00"))
	vmhd := fullBox("vmhd", 0, 1, make([]byte, 8))
	dinf := box("dinf", fullBox("dref", 0, 0, u32(1), fullBox("url ", 0, 1)))
	avcC := box("avcC", []byte{1, avcProfile, avcConstraints, avcLevel, 0xFF, 0xE1}, u16(uint16(len(sps))), sps,
		[]byte{1}, u16(uint16(len(pps))), pps)
	compressor := make([]byte, 32)
	copy(compressor, "\x0ah264 i_pcm")
	avc1 := box("avc1", make([]byte, 6), u16(1), u16(0), u16(0), make([]byte, 12), u16(uint16(width)), u16(uint16(height)),
		u32(0x00480000), u32(0x00480000), u32(0), u16(1), compressor, u16(0x0018), u16(0xFFFF), avcC)
	stsd := fullBox("stsd", 0, 0, u32(1), avc1)
	stts := fullBox("stts", 0, 0, u32(1), u32(n), u32(1))
	stsc := fullBox("stsc", 0, 0, u32(1), u32(1), u32(n), u32(1))
	sizes := make([]byte, 0, 4*len(samples))
	for _, s := range samples {
		sizes = append(sizes, u32(uint32(len(s)))...)
	}
	stsz := fullBox("stsz", 0, 0, u32(0), u32(n), sizes)
	stco := fullBox("stco", 0, 0, u32(1), u32(chunkOffset))
	stbl := box("stbl", stsd, stts, stsc, stsz, stco)
	minf := box("minf", vmhd, dinf, stbl)
	mdia := box("mdia", mdhd, hdlr, minf)
	trak := box("trak", tkhd, mdia)
	if comment == "" {
		return box("moov", mvhd, trak)
	}
	// QuickTime user data text: 16-bit length, 16-bit language (0: unspecified), the text.
	cmt := box("\xa9cmt", u16(uint16(min(len(comment), 0xFFFF))), u16(0), []byte(comment[:min(len(comment), 0xFFFF)]))
	return box("moov", mvhd, trak, box("udta", cmt))
}

// WriteMP4Any writes an MP4 with ffmpeg (H.264, compressed) when it is on the PATH, and
// otherwise with WriteMP4PCM (uncompressed H.264, playable everywhere, larger). It returns
// which encoder was used: "ffmpeg" or "uncompressed (ffmpeg not on PATH)". The file is
// written atomically.
func WriteMP4Any(path string, frames []image.Image, fps float64) (string, error) {
	err := WriteMP4(path, frames, fps)
	if err == nil {
		return "ffmpeg", nil
	}
	if !errors.Is(err, ErrNoFFmpeg) {
		return "", err
	}
	enc := "uncompressed (ffmpeg not on PATH)"
	return enc, writeFileAtomic(path, func(w io.Writer) error {
		return WriteMP4PCM(w, frames, max(1, int(math.Round(fps))))
	})
}
