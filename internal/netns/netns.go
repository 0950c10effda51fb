// Package netns gives tests several "hosts" on one Linux machine: network namespaces joined
// through a switch (a bridge in a namespace of its own) by veth pairs, each host with its own
// private address, the links shaped with tc's token bucket filter (tbf), and processes run
// inside a host with `ip netns exec`.
//
// Contract: New skips the test, with a message saying why, where namespaces cannot be made
// (not Linux, not root, iproute2's ip or tc missing, the kernel refusing); it installs
// nothing. Every namespace, link and address it creates exists only inside the namespaces of
// that one Net, so concurrent tests, and other people's runs on the same machine, never see
// each other's traffic or collide on names (names carry the creating process's pid and a
// counter). The Net is removed however the test ends (t.Cleanup): the processes still
// inside its namespaces are killed, then the namespaces deleted. New also removes what a
// test process that died without cleaning up (killed by a timeout) left behind.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// namePrefix starts every namespace this package makes: "vdppns-PID-N-".
const namePrefix = "vdppns-"

// Subnet is the /24 the hosts' addresses are taken from (host i is Subnet.(i+1)). It is
// private and exists only inside each Net's namespaces, so every Net may use it.
const Subnet = "10.77.0"

// MaxHosts bounds Config.Hosts.
const MaxHosts = 8

// Config describes the hosts to make.
type Config struct {
	// Hosts is the number of hosts (2..MaxHosts).
	Hosts int
	// Rate, when set, limits every host's link in each direction with tc tbf
	// (tc's rate syntax: "1gbit", "100mbit").
	Rate string
}

// Net is a set of hosts joined by a switch.
type Net struct {
	Hosts []*Host
	id    string // "vdppns-PID-N"
	sw    string // the switch namespace
	made  []string
	mu    sync.Mutex
}

// Host is one network namespace with one link to the switch.
type Host struct {
	// Index is the host's position in Net.Hosts.
	Index int
	// NS is the namespace's name (for `ip netns exec`).
	NS string
	// Addr is the host's IPv4 address, reachable from the other hosts of its Net only.
	Addr string
	net  *Net
}

var counter atomic.Int64

// New makes the hosts of cfg and removes them when the test ends. It skips t where network
// namespaces cannot be made, and fails it when making them goes wrong half-way.
func New(t testing.TB, cfg Config) *Net {
	t.Helper()
	if reason := Unsupported(); reason != "" {
		t.Skip(reason)
	}
	if cfg.Hosts < 2 || cfg.Hosts > MaxHosts {
		t.Fatalf("netns: %d hosts (2..%d)", cfg.Hosts, MaxHosts)
	}
	removeStale()
	n := &Net{id: fmt.Sprintf("%s%d-%d", namePrefix, os.Getpid(), counter.Add(1))}
	n.sw = n.id + "-sw"
	// The first namespace is the probe: a kernel or container that refuses it skips the test.
	if out, err := ip("netns", "add", n.sw); err != nil {
		t.Skipf("netns: cannot make a network namespace here (%v: %s)", err, out)
	}
	n.made = append(n.made, n.sw)
	t.Cleanup(n.remove)
	if err := n.build(cfg); err != nil {
		t.Fatalf("netns: %v", err)
	}
	return n
}

// Unsupported says why the hosts cannot be made in this process ("" when they can, as far
// as can be told without trying).
func Unsupported() string {
	switch {
	case runtime.GOOS != "linux":
		return "netns: network namespaces need Linux (this is " + runtime.GOOS + ")"
	case os.Geteuid() != 0:
		return "netns: making network namespaces needs root (CAP_NET_ADMIN); run the tests as root to include the multi-host tests"
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "netns: iproute2's " + tool + " is not installed (Debian: apt-get install iproute2)"
		}
	}
	return ""
}

func (n *Net) build(cfg Config) error {
	steps := [][]string{
		{"-n", n.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", n.sw, "link", "set", "br0", "up"},
	}
	if _, err := ipAll(steps); err != nil {
		return err
	}
	for i := range cfg.Hosts {
		h := &Host{Index: i, NS: fmt.Sprintf("%s-h%d", n.id, i), Addr: fmt.Sprintf("%s.%d", Subnet, i+1), net: n}
		if out, err := ip("netns", "add", h.NS); err != nil {
			return fmt.Errorf("add namespace %s: %v: %s", h.NS, err, out)
		}
		n.mu.Lock()
		n.made = append(n.made, h.NS)
		n.mu.Unlock()
		port := "p" + strconv.Itoa(i)
		steps := [][]string{
			{"link", "add", "eth0", "netns", h.NS, "type", "veth", "peer", "name", port, "netns", n.sw},
			{"-n", h.NS, "link", "set", "lo", "up"},
			{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", "eth0"},
			{"-n", h.NS, "link", "set", "eth0", "up"},
			{"-n", n.sw, "link", "set", port, "master", "br0"},
			{"-n", n.sw, "link", "set", port, "up"},
		}
		if _, err := ipAll(steps); err != nil {
			return err
		}
		if cfg.Rate != "" {
			// Both directions: the host's egress and the switch port's egress toward it.
			for _, dev := range [][2]string{{h.NS, "eth0"}, {n.sw, port}} {
				if err := shape(dev[0], dev[1], cfg.Rate); err != nil {
					return err
				}
			}
		}
		n.Hosts = append(n.Hosts, h)
	}
	return nil
}

// shape puts a tbf qdisc of rate on dev in namespace ns. The bucket holds a few
// milliseconds at the rate and at least 256 KiB, so a veth's 64 KiB GSO super-packets fit.
func shape(ns, dev, rate string) error {
	out, err := exec.Command("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
		"rate", rate, "burst", "256kb", "latency", "50ms").CombinedOutput()
	if err != nil {
		return fmt.Errorf("tc tbf rate %s on %s in %s: %v: %s", rate, dev, ns, err, bytes.TrimSpace(out))
	}
	return nil
}

// Command returns a command running name with args inside h (`ip netns exec`; the pid is
// the program's own). Cancelling ctx kills it.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	return cmd
}

// DialContext connects from inside h, as a process of h would: the socket is made on a
// thread that entered h's namespace (and is discarded afterwards), so a test's own HTTP
// client can talk to servers that listen only inside h.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, now in h's namespace, ends with this goroutine.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread stands for the whole process (/proc/PID/ns/net, which
			// `ip netns pids` reads) and outlives its goroutine: hold it, use another.
			defer runtime.UnlockOSThread()
			c, err := h.DialContext(ctx, network, addr)
			done <- result{c, err}
			return
		}
		f, err := os.Open("/run/netns/" + h.NS)
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{nil, fmt.Errorf("netns: enter %s: %w", h.NS, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// HTTPClient returns an HTTP client whose connections are made inside h (DialContext).
func (h *Host) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: h.DialContext, DisableKeepAlives: true}}
}

// Cut takes h's link down at the switch, as a pulled cable: nothing reaches h or leaves it,
// and no connection is told (no reset, no FIN).
func (h *Host) Cut() error {
	_, err := ip("-n", h.net.sw, "link", "set", "p"+strconv.Itoa(h.Index), "down")
	return err
}

// Restore brings h's link back up.
func (h *Host) Restore() error {
	_, err := ip("-n", h.net.sw, "link", "set", "p"+strconv.Itoa(h.Index), "up")
	return err
}

// Pids lists the processes running inside h.
func (h *Host) Pids() ([]int, error) { return nsPids(h.NS) }

// KillAll kills every process inside h (SIGKILL), as a node that vanished.
func (h *Host) KillAll() error {
	pids, err := h.Pids()
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	return err
}

// remove kills what runs inside the namespaces and deletes them.
func (n *Net) remove() {
	n.mu.Lock()
	made := n.made
	n.made = nil
	n.mu.Unlock()
	for i := len(made) - 1; i >= 0; i-- {
		removeNS(made[i])
	}
}

// removeNS kills the processes of namespace ns, waits for them to go, and deletes it.
func removeNS(ns string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, _ := nsPids(ns)
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond) // polling a kernel state no event reports
	}
	ip("netns", "del", ns)
}

// removeStale deletes the namespaces of test processes that no longer exist.
func removeStale() {
	out, err := ip("netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, namePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || processExists(pid) {
			continue
		}
		removeNS(name)
	}
}

// processExists reports whether pid is a live process. A zombie is not: a test binary
// killed by go test's timeout can stay a zombie where nothing reaps it (an init that does
// not wait), and its namespaces, with the processes it started, must still be swept.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name, which may itself hold ") ".
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func nsPids(ns string) ([]int, error) {
	out, err := ip("netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

func ip(args ...string) ([]byte, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

func ipAll(steps [][]string) ([]byte, error) {
	for _, s := range steps {
		if out, err := ip(s...); err != nil {
			return out, err
		}
	}
	return nil, nil
}
