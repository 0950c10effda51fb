package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/vdpp/vdpp/internal/atomicfile"
)

// CalibrationVersion is the version of the calibration file format.
const CalibrationVersion = 1

// Measurement is one timed quantity of a calibration (a median over repeats).
type Measurement struct {
	Name   string  `json:"name"` // "step", "link"
	Rows   int     `json:"rows,omitempty"`
	Frames int     `json:"frames,omitempty"`
	Bytes  int64   `json:"bytes,omitempty"`
	MS     float64 `json:"ms"`
}

// Calibration is what a calibration file holds: the costs measured for one model at one
// latent shape, and the raw measurements they were fitted from.
type Calibration struct {
	Version int    `json:"version"`
	Model   string `json:"model"`
	// LatentShape is the per-sample latent [T, C, H, W] the costs were measured at.
	LatentShape  []int         `json:"latent_shape"`
	Costs        Costs         `json:"costs"`
	Measurements []Measurement `json:"measurements,omitempty"`
}

// Validate checks the version, the latent shape and the costs.
func (c Calibration) Validate() error {
	if c.Version != CalibrationVersion {
		return fmt.Errorf("%w: calibration version %d, want %d", ErrBadInput, c.Version, CalibrationVersion)
	}
	if len(c.LatentShape) != 4 {
		return fmt.Errorf("%w: calibration latent_shape %v is not [T,C,H,W]", ErrBadInput, c.LatentShape)
	}
	for i, d := range c.LatentShape {
		if d < 1 {
			return fmt.Errorf("%w: calibration latent_shape[%d] = %d", ErrBadInput, i, d)
		}
	}
	if err := c.Costs.Validate(); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	return nil
}

// ReadCalibration parses and validates one calibration (as written by WriteCalibration).
// Unknown fields are ignored so that older readers accept newer files.
func ReadCalibration(r io.Reader) (Calibration, error) {
	var c Calibration
	dec := json.NewDecoder(r)
	if err := dec.Decode(&c); err != nil {
		return Calibration{}, fmt.Errorf("%w: calibration: %w", ErrBadInput, err)
	}
	if dec.More() {
		return Calibration{}, fmt.Errorf("%w: calibration: trailing data", ErrBadInput)
	}
	if err := c.Validate(); err != nil {
		return Calibration{}, err
	}
	return c, nil
}

// WriteCalibration writes c as indented JSON.
func WriteCalibration(w io.Writer, c Calibration) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("plan: encode calibration: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("plan: write calibration: %w", err)
	}
	return nil
}

// LoadCalibration reads a calibration file.
func LoadCalibration(path string) (Calibration, error) {
	f, err := os.Open(path)
	if err != nil {
		return Calibration{}, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	c, err := ReadCalibration(f)
	if err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// SaveCalibration writes a calibration file atomically (a temporary file, then rename).
func SaveCalibration(path string, c Calibration) error {
	var fillErr error
	err := atomicfile.Write(path, atomicfile.Options{Perm: 0o600}, func(w io.Writer) error {
		fillErr = WriteCalibration(w, c)
		return fillErr
	})
	if err != nil && err != fillErr {
		return fmt.Errorf("plan: %w", err)
	}
	return err
}
