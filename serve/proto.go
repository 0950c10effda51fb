package serve

import (
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/serve/wire"
)

// ErrProtocol marks a malformed message between the coordinator and a worker
// (wire.ErrProtocol).
var ErrProtocol = wire.ErrProtocol

// The worker protocol (package wire) as the coordinator's files name it.
const (
	// SecretLen is the length of the per-server secret every worker must present.
	SecretLen = wire.SecretLen
	// SecretEnv carries the hex secret to worker processes (never on the command line).
	SecretEnv = wire.SecretEnv

	opPing     = wire.OpPing
	opProgress = wire.OpProgress
	opDropped  = wire.OpDropped
	opResult   = wire.OpResult
	opEmpty    = wire.OpEmpty
	opFailed   = wire.OpFailed
)

func msgOp(m comm.Message) (op int, ctl []float32, err error) { return wire.Op(m) }
