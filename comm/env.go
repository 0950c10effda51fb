package comm

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ErrEnv: the launcher environment is inconsistent (rank out of range, bad port, ...).
var ErrEnv = errors.New("comm: bad launcher environment")

// DefaultMasterPort is the rendezvous port used when the environment names none
// (torchrun's default).
const DefaultMasterPort = 29500

// Env is where this process sits in the world, as told by the launcher: torchrun's
// RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT, or
// LeaderWorkerSet's LWS_LEADER_ADDRESS / LWS_GROUP_SIZE / LWS_WORKER_INDEX.
type Env struct {
	Rank           int
	WorldSize      int
	LocalRank      int
	LocalWorldSize int
	MasterAddr     string
	MasterPort     int
}

// SingleProcess is the environment of a process started with no launcher: rank 0 of 1.
func SingleProcess() Env {
	return Env{Rank: 0, WorldSize: 1, LocalRank: 0, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort}
}

// EnvFromOS reads the launcher variables through getenv (os.Getenv in production).
// torchrun's variables win; LeaderWorkerSet's are used when RANK and WORLD_SIZE are both
// absent (one process per pod: LOCAL_RANK 0 of 1 unless LOCAL_* say otherwise). With no
// variables at all the process is rank 0 of 1. MASTER_PORT defaults to 29500 and
// MASTER_ADDR to 127.0.0.1. Under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True:
// torchrun's own agent already listens on MASTER_PORT) the rendezvous store is at
// MASTER_PORT+1 instead. Inconsistent values give an error wrapping ErrEnv.
func EnvFromOS(getenv func(string) string) (Env, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	e := SingleProcess()
	var err error
	atoi := func(name string, dst *int) {
		v := get(name)
		if v == "" || err != nil {
			return
		}
		n, perr := strconv.Atoi(v)
		if perr != nil {
			err = fmt.Errorf("%w: %s=%q is not an integer", ErrEnv, name, v)
			return
		}
		*dst = n
	}
	rank, world := get("RANK"), get("WORLD_SIZE")
	switch {
	case rank != "" || world != "":
		if rank == "" || world == "" {
			return Env{}, fmt.Errorf("%w: RANK=%q and WORLD_SIZE=%q must be set together", ErrEnv, rank, world)
		}
		atoi("RANK", &e.Rank)
		atoi("WORLD_SIZE", &e.WorldSize)
		// A single-node torchrun world without LOCAL_* is all local.
		e.LocalRank, e.LocalWorldSize = e.Rank, e.WorldSize
		if addr := get("MASTER_ADDR"); addr != "" {
			e.MasterAddr = addr
		}
	case get("LWS_GROUP_SIZE") != "" || get("LWS_WORKER_INDEX") != "" || get("LWS_LEADER_ADDRESS") != "":
		if get("LWS_GROUP_SIZE") == "" || get("LWS_WORKER_INDEX") == "" || get("LWS_LEADER_ADDRESS") == "" {
			return Env{}, fmt.Errorf("%w: LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX must be set together", ErrEnv)
		}
		atoi("LWS_WORKER_INDEX", &e.Rank)
		atoi("LWS_GROUP_SIZE", &e.WorldSize)
		e.MasterAddr = get("LWS_LEADER_ADDRESS")
		if addr := get("MASTER_ADDR"); addr != "" {
			e.MasterAddr = addr
		}
	}
	atoi("LOCAL_RANK", &e.LocalRank)
	atoi("LOCAL_WORLD_SIZE", &e.LocalWorldSize)
	atoi("MASTER_PORT", &e.MasterPort)
	if err != nil {
		return Env{}, err
	}
	if get("TORCHELASTIC_USE_AGENT_STORE") == "True" && e.MasterPort > 0 {
		e.MasterPort++
	}
	if err := e.Validate(); err != nil {
		return Env{}, err
	}
	return e, nil
}

// Validate reports inconsistent values as an error wrapping ErrEnv.
func (e Env) Validate() error {
	switch {
	case e.WorldSize < 1:
		return fmt.Errorf("%w: world size %d < 1", ErrEnv, e.WorldSize)
	case e.Rank < 0 || e.Rank >= e.WorldSize:
		return fmt.Errorf("%w: rank %d out of range for world size %d", ErrEnv, e.Rank, e.WorldSize)
	case e.LocalWorldSize < 1 || e.LocalWorldSize > e.WorldSize:
		return fmt.Errorf("%w: local world size %d out of range 1..%d", ErrEnv, e.LocalWorldSize, e.WorldSize)
	case e.LocalRank < 0 || e.LocalRank >= e.LocalWorldSize:
		return fmt.Errorf("%w: local rank %d out of range for local world size %d", ErrEnv, e.LocalRank, e.LocalWorldSize)
	case e.MasterPort < 0 || e.MasterPort > 65535:
		return fmt.Errorf("%w: master port %d out of range 0..65535", ErrEnv, e.MasterPort)
	case e.WorldSize > 1 && e.MasterPort == 0:
		return fmt.Errorf("%w: master port 0 with world size %d", ErrEnv, e.WorldSize)
	case e.WorldSize > 1 && e.MasterAddr == "":
		return fmt.Errorf("%w: empty master address with world size %d", ErrEnv, e.WorldSize)
	}
	return nil
}

// MasterHostPort returns "MasterAddr:MasterPort" (IPv6 addresses bracketed).
func (e Env) MasterHostPort() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// ListenAddr is where rank 0 listens for the others (the rendezvous store; a launched
// server's coordinator): MASTER_PORT on the master address itself when it is a loopback
// IP, else on every interface (the master name may be a service address).
func (e Env) ListenAddr() string {
	port := strconv.Itoa(e.MasterPort)
	if ip := net.ParseIP(e.MasterAddr); ip != nil && ip.IsLoopback() {
		return net.JoinHostPort(e.MasterAddr, port)
	}
	return net.JoinHostPort("", port)
}

// Environ returns the torchrun variables describing e, as "KEY=value" strings for a child.
func (e Env) Environ() []string {
	return []string{
		"RANK=" + strconv.Itoa(e.Rank),
		"WORLD_SIZE=" + strconv.Itoa(e.WorldSize),
		"LOCAL_RANK=" + strconv.Itoa(e.LocalRank),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(e.LocalWorldSize),
		"MASTER_ADDR=" + e.MasterAddr,
		"MASTER_PORT=" + strconv.Itoa(e.MasterPort),
	}
}
