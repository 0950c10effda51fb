package comm

import (
	"bufio"
	"io"
)

// DefaultReadBufferSize is the read buffer of a FrameReader unless told otherwise.
const DefaultReadBufferSize = 1 << 20

// FrameReader decodes frames and whole messages from a byte stream.
type FrameReader struct {
	src          bufSource
	maxFrameSize int
}

// bufSource adapts a bufio.Reader to frameSource.
type bufSource struct{ *bufio.Reader }

func (b bufSource) chunk() int     { return b.Size() &^ 3 }
func (b bufSource) remaining() int { return -1 }

// NewFrameReader reads from r through a buffer of bufSize bytes (DefaultReadBufferSize when
// <= 0; at least 4 KiB). maxFrameSize <= 0 means DefaultMaxFrameSize.
func NewFrameReader(r io.Reader, bufSize, maxFrameSize int) *FrameReader {
	if bufSize <= 0 {
		bufSize = DefaultReadBufferSize
	}
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	return &FrameReader{src: bufSource{bufio.NewReaderSize(r, max(bufSize, 4096))}, maxFrameSize: maxFrameSize}
}

// ReadFrame decodes the next frame. Validation failures wrap ErrBadFrame; the end of the
// stream between frames is io.EOF; a frame cut short is io.ErrUnexpectedEOF.
func (fr *FrameReader) ReadFrame() (Frame, error) { return readFrame(fr.src, fr.maxFrameSize) }

// ReadMessage decodes the frames of the next message and assembles it, skipping control
// frames between messages. Frames out of order, or disagreeing on count, sample, step or
// tag, wrap ErrBadFrame; io.EOF means the stream ended cleanly between messages.
func (fr *FrameReader) ReadMessage() (Message, error) {
	for {
		m, ctl, err := fr.next()
		if err != nil || ctl.Kind == 0 {
			return m, err
		}
	}
}

// next decodes the next message, or the next control frame (ctl.Kind != 0), which may only
// come between messages.
func (fr *FrameReader) next() (Message, control, error) {
	f, err := fr.ReadFrame()
	if err != nil {
		return Message{}, control{}, err
	}
	if f.Control() {
		if f.Index == 0 {
			return Message{}, control{}, badf("control frame of kind 0")
		}
		return Message{}, control{Kind: controlKind(f.Index), A: f.Sample, B: f.Step}, nil
	}
	m, err := fr.assemble(f)
	return m, control{}, err
}

// assemble reads the rest of the message whose first frame is f.
func (fr *FrameReader) assemble(f Frame) (Message, error) {
	m := Message{Sample: f.Sample, Step: f.Step, Tag: f.Tag}
	if f.Count == 0 {
		return m, nil
	}
	if f.Index != 0 {
		return Message{}, badf("message starts with tensor %d of %d", f.Index, f.Count)
	}
	m.Tensors = make([]NamedTensor, 0, f.Count)
	m.Tensors = append(m.Tensors, NamedTensor{Name: f.Name, Tensor: f.Tensor()})
	for i := 1; i < f.Count; i++ {
		g, err := fr.ReadFrame()
		if err == nil && g.Control() {
			return Message{}, badf("control frame inside message (sample %d, step %d, tag %d, tensor %d of %d)", f.Sample, f.Step, f.Tag, i, f.Count)
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return Message{}, err
		}
		if g.Index != i || g.Count != f.Count || g.Sample != f.Sample || g.Step != f.Step || g.Tag != f.Tag {
			return Message{}, badf("frame (sample %d, step %d, tag %d, tensor %d of %d) inside message (sample %d, step %d, tag %d, tensor %d of %d)",
				g.Sample, g.Step, g.Tag, g.Index, g.Count, f.Sample, f.Step, f.Tag, i, f.Count)
		}
		m.Tensors = append(m.Tensors, NamedTensor{Name: g.Name, Tensor: g.Tensor()})
	}
	return m, nil
}
