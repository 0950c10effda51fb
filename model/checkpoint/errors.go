package checkpoint

import "errors"

// Sentinel errors; every error of this package wraps at least one.
var (
	// ErrIndex: model_index.json is missing or malformed, or lacks a component.
	ErrIndex = errors.New("checkpoint: bad model_index.json")
	// ErrConfig: a component config file is missing, malformed or inconsistent.
	ErrConfig = errors.New("checkpoint: bad config")
	// ErrWeights: a weights file for the requested component and variant is missing.
	ErrWeights = errors.New("checkpoint: weights file not found")
	// ErrMissingTensor: a tensor the network needs is not in the weights file.
	ErrMissingTensor = errors.New("checkpoint: missing tensor")
	// ErrUnexpectedTensor: the weights file holds a tensor the network does not use.
	ErrUnexpectedTensor = errors.New("checkpoint: unexpected tensor")
	// ErrShapeMismatch: a tensor's shape in the file differs from the expected one.
	ErrShapeMismatch = errors.New("checkpoint: tensor shape mismatch")
	// ErrTensorDType: a tensor's type is not one vdpp reads (tensor/quant's table).
	ErrTensorDType = errors.New("checkpoint: tensor type not supported")
	// ErrDuplicateTensor: two tensors of a file rename to the same network tensor.
	ErrDuplicateTensor = errors.New("checkpoint: tensor given twice")
	// ErrKeyList: a key list text (name<TAB>[shape] lines) is malformed.
	ErrKeyList = errors.New("checkpoint: bad key list")
	// ErrSampling: the sampling settings file (SamplingFile) is malformed or unusable.
	ErrSampling = errors.New("checkpoint: bad sampling settings")
)
