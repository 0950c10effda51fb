package video

import (
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
	// Comment, when set, is written as the file's comment metadata (ffmpeg's
	// -metadata comment=...): how the video was made.
	Comment string
}

// WriteMP4 writes frames to path as H.264 (libx264, yuv420p) MP4 at fps frames per
// second using the default MP4Writer; it returns ErrNoFFmpeg when ffmpeg is missing.
func WriteMP4(path string, frames []image.Image, fps float64) error {
	return MP4Writer{}.Write(path, frames, fps)
}

// Write encodes frames to path. All frames must have the size of the first. Odd widths
// or heights are padded by repeating the last column / row (yuv420p needs even sizes).
// ffmpeg writes a temporary file that is renamed to path only on success.
func (m MP4Writer) Write(path string, frames []image.Image, fps float64) error {
	if len(frames) == 0 {
		return ErrNoFrames
	}
	b := frames[0].Bounds()
	for i, f := range frames {
		if f.Bounds().Dx() != b.Dx() || f.Bounds().Dy() != b.Dy() {
			return fmt.Errorf("video: mp4: frame %d is %v, frame 0 is %dx%d", i, f.Bounds().Size(), b.Dx(), b.Dy())
		}
	}
	s, err := m.Start(path, b.Dx(), b.Dy(), fps)
	if err != nil {
		return err
	}
	for _, f := range frames {
		if err := s.Write(f); err != nil {
			if ferr := s.Abort(); ferr != nil {
				return ferr // ffmpeg's own message says more than the broken pipe
			}
			return err
		}
	}
	return s.Close()
}

var lookPath = exec.LookPath

// encode runs ffmpeg (exe) on the raw rgb24 frames of ew×eh read from in, at fps, into a
// temporary file renamed to path on success.
func (m MP4Writer) encode(path, exe string, in *io.PipeReader, fps float64, ew, eh int) error {
	command := m.Command
	if command == nil {
		command = exec.Command
	}
	var runErr error
	err := atomicfile.WriteNamed(path, atomicfile.Options{}, func(tmpName string) error {
		runErr = runFFmpeg(command, exe, tmpName, in, fps, ew, eh, m.Comment)
		return runErr
	})
	if err != nil && err != runErr {
		return fmt.Errorf("video: mp4: %w", err)
	}
	return err
}

// runFFmpeg encodes raw rgb24 frames of ew x eh read from in at fps into the MP4 file
// tmpName with exe. in is closed when ffmpeg has exited, so a writer never blocks on it.
func runFFmpeg(command func(string, ...string) *exec.Cmd, exe, tmpName string, in *io.PipeReader, fps float64, ew, eh int, comment string) error {
	args := []string{"-y", "-hide_banner", "-loglevel", "error",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", ew, eh),
		"-r", strconv.FormatFloat(fps, 'g', -1, 64), "-i", "-",
		"-an", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart"}
	if comment != "" {
		args = append(args, "-metadata", "comment="+comment)
	}
	cmd := command(exe, append(args, "-f", "mp4", tmpName)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdin = in
	defer in.CloseWithError(errFFmpegExited)
	if err := cmd.Run(); err != nil {
		if errors.Is(err, errAborted) {
			return err
		}
		return fmt.Errorf("video: mp4: ffmpeg: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// errFFmpegExited fails a write to an MP4Stream whose ffmpeg has already exited.
var errFFmpegExited = errors.New("ffmpeg exited")
