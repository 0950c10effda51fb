package netns

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

// The test binary doubles as the programs run inside the hosts: with $NETNS_HELPER set it
// runs that helper instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("NETNS_HELPER") {
	case "":
		os.Exit(m.Run())
	case "echo":
		echoServer()
	case "client":
		client(os.Getenv("NETNS_PEER"))
	case "sleep":
		// Not ordering: the helper process only has to stay alive until the test kills it.
		time.Sleep(time.Hour)
	}
	os.Exit(0)
}

const helperPort = "9000"

// echoServer echoes every connection's bytes back.
func echoServer() {
	ln, err := net.Listen("tcp", ":"+helperPort)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go io.Copy(c, c)
	}
}

// client connects to peer's echo server and runs the commands on stdin, one a line:
// "BYTES DEADLINE_MS" sends BYTES and waits for them to come back, printing "ok NANOS" or
// "err ...".
func client(peer string) {
	var c net.Conn
	var err error
	wait.For(10*time.Second, func() bool { // the peer's server may not listen yet
		c, err = net.Dial("tcp", net.JoinHostPort(peer, helperPort))
		return err == nil
	})
	if err != nil {
		fmt.Println("err dial:", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var n, ms int
		fmt.Sscan(in.Text(), &n, &ms)
		start := time.Now()
		c.SetDeadline(start.Add(time.Duration(ms) * time.Millisecond))
		errc := make(chan error, 1)
		go func() {
			_, err := c.Write(make([]byte, n))
			errc <- err
		}()
		_, err := io.ReadFull(c, make([]byte, n))
		if werr := <-errc; err == nil {
			err = werr
		}
		if err != nil {
			fmt.Println("err", err)
			continue
		}
		fmt.Println("ok", time.Since(start).Nanoseconds())
	}
}

// helper starts the test binary as helper mode inside h.
func helper(t *testing.T, h *Host, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := h.Command(t.Context(), os.Args[0])
	cmd.Env = append(append(os.Environ(), "NETNS_HELPER="+mode), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestHostsLinkRateAndCut(t *testing.T) {
	const rateMbit = 100
	n := New(t, Config{Hosts: 2, Rate: strconv.Itoa(rateMbit) + "mbit"})
	h0, h1 := n.Hosts[0], n.Hosts[1]
	if h0.Addr == h1.Addr {
		t.Fatalf("both hosts have address %s", h0.Addr)
	}
	// The addresses exist only inside the namespaces.
	if ln, err := net.Listen("tcp", net.JoinHostPort(h1.Addr, "0")); err == nil {
		ln.Close()
		t.Fatalf("host address %s exists outside its namespace", h1.Addr)
	}

	echo := helper(t, h1, "echo")
	if err := echo.Start(); err != nil {
		t.Fatal(err)
	}
	// The test itself can connect from inside a host.
	var c net.Conn
	var err error
	wait.For(10*time.Second, func() bool { // the server in host 1 may not listen yet
		c, err = h0.DialContext(t.Context(), "tcp", net.JoinHostPort(h1.Addr, helperPort))
		return err == nil
	})
	if err != nil {
		t.Fatalf("dial from inside host 0: %v", err)
	}
	c.Write([]byte("x"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("echo through a connection made inside host 0: %v", err)
	}
	c.Close()
	cl := helper(t, h0, "client", "NETNS_PEER="+h1.Addr)
	stdin, err := cl.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	ask := func(bytes, deadlineMS int) (time.Duration, string) {
		t.Helper()
		fmt.Fprintf(stdin, "%d %d\n", bytes, deadlineMS)
		if !lines.Scan() {
			t.Fatalf("client ended: %v", lines.Err())
		}
		f := strings.Fields(lines.Text())
		if len(f) == 2 && f[0] == "ok" {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			return time.Duration(ns), ""
		}
		return 0, lines.Text()
	}

	if _, e := ask(1, 10000); e != "" {
		t.Fatalf("no connectivity between the hosts: %s", e)
	}
	const size = 4 << 20
	d, e := ask(size, 20000)
	if e != "" {
		t.Fatalf("transfer: %s", e)
	}
	mbit := float64(size) * 8 / d.Seconds() / 1e6
	t.Logf("%d MiB echoed in %v: %.0f Mbit/s each way (tbf rate %d Mbit/s)", size>>20, d, mbit, rateMbit)
	if mbit > 1.3*rateMbit || mbit < 0.2*rateMbit {
		t.Errorf("throughput %.0f Mbit/s with a %d Mbit/s limit", mbit, rateMbit)
	}

	if err := h1.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, e := ask(1, 500); !strings.Contains(e, "timeout") {
		t.Fatalf("a byte crossed a cut link (answer %q)", e)
	}
	if err := h1.Restore(); err != nil {
		t.Fatal(err)
	}
	// The byte sent during the cut is retransmitted once the link is back.
	if _, e := ask(1, 15000); e != "" {
		t.Fatalf("after Restore: %s", e)
	}
}

func TestRemovedWhenTestEnds(t *testing.T) {
	if reason := Unsupported(); reason != "" {
		t.Skip(reason)
	}
	var names []string
	var sleeper *exec.Cmd
	t.Run("inner", func(t *testing.T) {
		n := New(t, Config{Hosts: 3})
		names = append(names, n.sw)
		for _, h := range n.Hosts {
			names = append(names, h.NS)
		}
		sleeper = helper(t, n.Hosts[2], "sleep")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		// `ip netns exec` enters the namespace, then becomes the program (same pid).
		var pids []int
		wait.For(10*time.Second, func() bool { pids, _ = n.Hosts[2].Pids(); return len(pids) > 0 })
		if len(pids) != 1 || pids[0] != sleeper.Process.Pid {
			t.Fatalf("pids in host 2: %v, want [%d]", pids, sleeper.Process.Pid)
		}
	})
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the process inside a removed host still runs")
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.Contains(string(out), name) {
			t.Errorf("namespace %s still exists:\n%s", name, out)
		}
	}
}

func TestStaleNamespacesRemoved(t *testing.T) {
	if reason := Unsupported(); reason != "" {
		t.Skip(reason)
	}
	// A namespace named for a process that no longer exists, as a killed test run leaves.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d-1-sw", namePrefix, dead.Process.Pid)
	if _, err := ip("netns", "add", stale); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { ip("netns", "del", stale) })
	New(t, Config{Hosts: 2})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), stale) {
		t.Errorf("stale namespace %s was left", stale)
	}
}

// TestProcessExistsZombie: a live process exists, an exited one that nobody has reaped yet
// (a zombie) does not, so the namespaces of a test binary killed by a timeout are swept even
// where nothing reaps it.
func TestProcessExistsZombie(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if !processExists(os.Getpid()) {
		t.Fatal("this process does not exist")
	}
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	// Not waited for, the child stays a zombie once it has exited.
	var stat []byte
	var err error
	if !wait.For(10*time.Second, func() bool {
		stat, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && strings.Contains(string(stat), ") Z ")
	}) {
		t.Fatalf("child %d never became a zombie: %s (%v)", pid, stat, err)
	}
	if processExists(pid) {
		t.Fatalf("zombie %d counts as a live process", pid)
	}
}
