package video

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
)

// PNGFrames writes a video's frames as numbered PNG files as they come: dir/000.png,
// dir/001.png, ... (more digits when the video has over 1000 frames), each atomically, so a
// long video is written without holding its frames.
type PNGFrames struct {
	dir     string
	digits  int
	written []string
	// Text, when set, goes into every frame as iTXt chunks (AddPNGText): how the video
	// was made.
	Text []TextChunk
}

// NewPNGFrames creates dir (if needed) for a video of total frames.
func NewPNGFrames(dir string, total int) (*PNGFrames, error) {
	if total <= 0 {
		return nil, ErrNoFrames
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("video: png frames: %w", err)
	}
	return &PNGFrames{dir: dir, digits: max(3, len(fmt.Sprint(total-1)))}, nil
}

// Path is the file of frame i.
func (p *PNGFrames) Path(i int) string {
	return filepath.Join(p.dir, fmt.Sprintf("%0*d.png", p.digits, i))
}

// Write writes frame i.
func (p *PNGFrames) Write(i int, f image.Image) error {
	path := p.Path(i)
	if err := writeFileAtomic(path, func(w io.Writer) error {
		if len(p.Text) == 0 {
			if err := png.Encode(w, f); err != nil {
				return fmt.Errorf("video: encode %s: %w", path, err)
			}
			return nil
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, f); err != nil {
			return fmt.Errorf("video: encode %s: %w", path, err)
		}
		b, err := AddPNGText(buf.Bytes(), p.Text...)
		if err != nil {
			return fmt.Errorf("video: encode %s: %w", path, err)
		}
		_, err = w.Write(b)
		return err
	}); err != nil {
		return err
	}
	p.written = append(p.written, path)
	return nil
}

// Read reads frame i back (PNG is lossless: the pixels written).
func (p *PNGFrames) Read(i int) (image.Image, error) {
	f, err := os.Open(p.Path(i))
	if err != nil {
		return nil, fmt.Errorf("video: png frames: %w", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("video: decode %s: %w", p.Path(i), err)
	}
	return img, nil
}

// Remove deletes the files this writer wrote (after an error).
func (p *PNGFrames) Remove() {
	for _, path := range p.written {
		os.Remove(path)
	}
	p.written = nil
}

// MP4Stream is an MP4 being encoded by ffmpeg one frame at a time (MP4Writer.Start): Write
// each frame, then Close to finish the file, or Abort to drop it.
type MP4Stream struct {
	pw     *io.PipeWriter
	done   chan error
	w, h   int
	ew, eh int
	row    []uint8
	closed bool
}

// errAborted ends an MP4Stream's ffmpeg input when the stream is dropped.
var errAborted = errors.New("video: mp4: aborted")

// Start starts ffmpeg encoding width×height frames at fps into path (written atomically on
// Close). It returns ErrNoFFmpeg when ffmpeg is missing.
func (m MP4Writer) Start(path string, width, height int, fps float64) (*MP4Stream, error) {
	if !(fps > 0) {
		return nil, fmt.Errorf("video: mp4: fps must be positive, got %v", fps)
	}
	if width < 1 || height < 1 {
		return nil, fmt.Errorf("video: mp4: empty frame")
	}
	bin, look := m.Binary, m.LookPath
	if bin == "" {
		bin = "ffmpeg"
	}
	if look == nil {
		look = lookPath
	}
	exe, lerr := look(bin)
	if lerr != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoFFmpeg, lerr)
	}
	s := &MP4Stream{done: make(chan error, 1), w: width, h: height, ew: width + width%2, eh: height + height%2}
	s.row = make([]uint8, s.ew*3)
	pr, pw := io.Pipe()
	s.pw = pw
	go func() {
		s.done <- m.encode(path, exe, pr, fps, s.ew, s.eh)
	}()
	return s, nil
}

// Write feeds one frame (of the stream's size), padded to even sides by edge replication.
func (s *MP4Stream) Write(f image.Image) error {
	if s.closed {
		return fmt.Errorf("video: mp4: write after close")
	}
	if f.Bounds().Dx() != s.w || f.Bounds().Dy() != s.h {
		return fmt.Errorf("video: mp4: frame is %v, the video is %dx%d", f.Bounds().Size(), s.w, s.h)
	}
	pix, fw, fh := rgb8(f)
	for y := 0; y < s.eh; y++ {
		src := pix[min(y, fh-1)*fw*3:]
		copy(s.row, src[:fw*3])
		for x := fw; x < s.ew; x++ {
			copy(s.row[x*3:x*3+3], src[(fw-1)*3:fw*3])
		}
		if _, err := s.pw.Write(s.row); err != nil {
			return fmt.Errorf("video: mp4: feeding ffmpeg: %w", err)
		}
	}
	return nil
}

// Close ends the input and waits for ffmpeg; the file is in place when it returns nil.
func (s *MP4Stream) Close() error {
	if s.closed {
		return fmt.Errorf("video: mp4: closed twice")
	}
	s.closed = true
	s.pw.Close()
	return <-s.done
}

// Abort stops the encoder and leaves no file (after an error elsewhere). It returns the
// encoder's own error when it failed before the abort (nil otherwise).
func (s *MP4Stream) Abort() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.pw.CloseWithError(errAborted)
	if err := <-s.done; err != nil && !errors.Is(err, errAborted) {
		return err
	}
	return nil
}
