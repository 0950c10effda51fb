package video

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/internal/atomicfile"
)

// ErrNoFFmpeg is returned by WriteMP4 when no ffmpeg executable can be found.
var ErrNoFFmpeg = errors.New("video: ffmpeg not found on PATH")

// MP4Writer encodes frames to H.264 MP4 by piping raw RGB frames into an ffmpeg
// process. Its fields are the dependencies, so tests can replace them.
type MP4Writer struct {
	// Binary is the executable name looked up with LookPath ("ffmpeg" when empty).
	Binary string
	// LookPath resolves Binary (exec.LookPath when nil).
	LookPath func(file string) (string, error)
	// Command builds the process (exec.Command when nil).
	Command func(name string, args ...string) *exec.Cmd
}

// WriteMP4 writes frames to path as H.264 (libx264, yuv420p) MP4 at fps frames per
// second using the default MP4Writer; it returns ErrNoFFmpeg when ffmpeg is missing.
func WriteMP4(path string, frames []image.Image, fps float64) error {
	return MP4Writer{}.Write(path, frames, fps)
}

// Write encodes frames to path. All frames must have the size of the first. Odd widths
// or heights are padded by repeating the last column / row (yuv420p needs even sizes).
// ffmpeg writes a temporary file that is renamed to path only on success.
func (m MP4Writer) Write(path string, frames []image.Image, fps float64) (err error) {
	if len(frames) == 0 {
		return ErrNoFrames
	}
	if !(fps > 0) {
		return fmt.Errorf("video: mp4: fps must be positive, got %v", fps)
	}
	bin, look, command := m.Binary, m.LookPath, m.Command
	if bin == "" {
		bin = "ffmpeg"
	}
	if look == nil {
		look = exec.LookPath
	}
	if command == nil {
		command = exec.Command
	}
	exe, lerr := look(bin)
	if lerr != nil {
		return fmt.Errorf("%w (%v)", ErrNoFFmpeg, lerr)
	}
	b := frames[0].Bounds()
	w, h := b.Dx(), b.Dy()
	if w < 1 || h < 1 {
		return fmt.Errorf("video: mp4: empty frame")
	}
	for i, f := range frames {
		if f.Bounds().Dx() != w || f.Bounds().Dy() != h {
			return fmt.Errorf("video: mp4: frame %d is %v, frame 0 is %dx%d", i, f.Bounds().Size(), w, h)
		}
	}
	ew, eh := w+w%2, h+h%2
	var runErr error
	err = atomicfile.WriteNamed(path, atomicfile.Options{}, func(tmpName string) error {
		runErr = runFFmpeg(command, exe, tmpName, frames, fps, ew, eh)
		return runErr
	})
	if err != nil && err != runErr {
		return fmt.Errorf("video: mp4: %w", err)
	}
	return err
}

// runFFmpeg encodes frames (padded to ew x eh) at fps into the MP4 file tmpName with exe.
func runFFmpeg(command func(string, ...string) *exec.Cmd, exe, tmpName string, frames []image.Image, fps float64, ew, eh int) error {
	cmd := command(exe, "-y", "-hide_banner", "-loglevel", "error",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", ew, eh),
		"-r", strconv.FormatFloat(fps, 'g', -1, 64), "-i", "-",
		"-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart",
		"-f", "mp4", tmpName)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("video: mp4: %w", err)
	}
	if err = cmd.Start(); err != nil {
		return fmt.Errorf("video: mp4: start ffmpeg: %w", err)
	}
	werr := writeRawRGB(stdin, frames, ew, eh)
	cerr := stdin.Close()
	if err = cmd.Wait(); err != nil {
		return fmt.Errorf("video: mp4: ffmpeg: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if werr != nil || cerr != nil {
		return fmt.Errorf("video: mp4: feeding ffmpeg: %w", errors.Join(werr, cerr))
	}
	return nil
}

// writeRawRGB writes frames as packed rgb24, padded to ew×eh by edge replication.
func writeRawRGB(w io.Writer, frames []image.Image, ew, eh int) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	row := make([]uint8, ew*3)
	for _, f := range frames {
		pix, fw, fh := rgb8(f)
		for y := 0; y < eh; y++ {
			src := pix[min(y, fh-1)*fw*3:]
			copy(row, src[:fw*3])
			for x := fw; x < ew; x++ {
				copy(row[x*3:x*3+3], src[(fw-1)*3:fw*3])
			}
			if _, err := bw.Write(row); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}
