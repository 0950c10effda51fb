#!/usr/bin/python3
"""Measurements of `vdpp serve`'s admission, prepares, fair share and shutdown on the real
binary with --model builtin (docs/measurements/serve-admission-2026-12-06.md).

usage: /usr/bin/python3 scripts/serve-admission.py VDPP_BINARY [strip] [small] [fair] [sigterm]

strip:   a 1048576x1 and a 1x1048576 PNG, native and OpenAI: the answer and its time
small:   a 64x64 job submitted behind twelve 1 MP uploads: when it starts and ends
fair:    one client (127.0.0.2) floods, a second (127.0.0.3) submits one job
sigterm: SIGTERM while jobs are prepared and run (TRIALS times, at different moments):
         the exit time, and every accepted job finished by a server started again
Each server runs in a fresh temporary data dir and is stopped with SIGTERM at the end.
Standard library only.
"""
import http.client, json, os, random, shutil, signal, struct, subprocess, sys, tempfile, threading, time, zlib

BIN = sys.argv[1]
ONLY = sys.argv[2:]


def png(w, h, seed=1):
    """An RGB PNG of w x h pixels of noise (rows of random bytes; a 1048576x1 strip stays small)."""
    r = random.Random(seed)
    row = bytes(r.getrandbits(8) for _ in range(min(w, 4096) * 3))
    row = (row * (w * 3 // len(row) + 1))[: w * 3]
    raw = b"".join(b"\x00" + row for _ in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def multipart(parts):
    b = "----vdppmeasure"
    out = []
    for name, (fname, data, ctype) in parts.items():
        disp = f'form-data; name="{name}"' + (f'; filename="{fname}"' if fname else "")
        out.append(f"--{b}\r\nContent-Disposition: {disp}\r\nContent-Type: {ctype}\r\n\r\n".encode() + data + b"\r\n")
    out.append(f"--{b}--\r\n".encode())
    return b"".join(out), "multipart/form-data; boundary=" + b


class Server:
    def __init__(self, args, data=None):
        self.data = data or tempfile.mkdtemp(prefix="sk-meas-")
        self.log = open(os.path.join(self.data, "..", os.path.basename(self.data) + ".log"), "ab")
        self.p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(self.data, "d")] + args,
                                  stdout=subprocess.PIPE, stderr=self.log)
        line = self.p.stdout.readline().decode()
        if "listening on http://" not in line:
            raise SystemExit("server did not start: " + line)
        self.host, self.port = line.split("http://")[1].strip().split(":")
        self.port = int(self.port)
        self.wait_ready()

    def req(self, method, path, body=None, ctype=None, src="127.0.0.1", timeout=60):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout, source_address=(src, 0))
        h = {"Content-Type": ctype} if ctype else {}
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def wait_ready(self, limit=120):
        t = time.time()
        while time.time() - t < limit:
            try:
                if self.req("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit("not ready")

    def submit(self, img, params, src="127.0.0.1"):
        parts = {"image": ("in.png", img, "image/png")}
        if params is not None:
            parts["params"] = (None, json.dumps(params).encode(), "application/json")
        body, ct = multipart(parts)
        code, data = self.req("POST", "/v1/videos", body, ct, src=src)
        return code, json.loads(data) if data else {}

    def status(self, id):
        return json.loads(self.req("GET", "/v1/videos/" + id)[1])

    def term(self):
        t = time.time()
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "killed after 30 s"
        return time.time() - t, rc


def m_strip(model):
    s = Server(["--model", model, "--nproc", "1"])
    for w, h in [(1048576, 1), (1, 1048576)]:
        img = png(w, h)
        t = time.time()
        code, st = s.submit(img, {})
        d = time.time() - t
        print(f"strip {w}x{h} ({len(img)} bytes): {code} in {d*1000:.0f} ms: {st.get('error', st.get('id'))}")
        body, ct = multipart({"input_reference": ("in.png", img, "image/png"), "prompt": (None, b"x", "text/plain")})
        t = time.time()
        code, data = s.req("POST", "/v1/videos", body, ct)
        print(f"  OpenAI create: {code} in {(time.time()-t)*1000:.0f} ms: {data[:160]!r}")
    print("  server exit after SIGTERM: %.2f s, rc %s" % s.term())


def m_small_behind_big(model):
    s = Server(["--model", model, "--nproc", "1"])
    big = png(1024, 1024, 2)
    t = time.time()
    ids = [s.submit(big, {"num_frames": 2, "steps": 2})[1]["id"] for _ in range(12)]
    up = time.time() - t
    t0 = time.time()
    code, st = s.submit(png(64, 64, 3), {"num_frames": 2, "steps": 2})
    sid = st["id"]
    started = None
    while time.time() - t0 < 120:
        x = s.status(sid)
        if started is None and (x["state"] != "queued" or x["progress"]["step"] >= 1):
            started = time.time() - t0
        if x["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.02)
    done = time.time() - t0
    big_running = sum(1 for i in ids if s.status(i)["state"] == "queued")
    print(f"64x64 job behind twelve 1 MP uploads (uploaded in {up:.1f} s): started {started:.2f} s, {x['state']} {done:.2f} s after its submission; 1 MP jobs still queued then: {big_running}")
    print("  server exit after SIGTERM: %.2f s, rc %s" % s.term())


def m_fair(model):
    s = Server(["--model", model, "--nproc", "1", "--max-queue", "16"])
    img = png(64, 64, 4)
    p = {"num_frames": 4, "steps": 4}
    codes = {}
    for _ in range(60):
        c, _ = s.submit(img, p, src="127.0.0.2")
        codes[c] = codes.get(c, 0) + 1
    stop = threading.Event()
    flood = {}
    def flooder():
        while not stop.is_set():
            c, _ = s.submit(img, p, src="127.0.0.2")
            flood[c] = flood.get(c, 0) + 1
    th = threading.Thread(target=flooder)
    th.start()
    t0 = time.time()
    code, st = s.submit(img, p, src="127.0.0.3")
    while code == 202:
        x = s.status(st["id"])
        if x["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.02)
    took = time.time() - t0
    stop.set()
    th.join()
    print(f"flooder (127.0.0.2) 60 submissions: {codes}; while it kept flooding {flood}, the second client (127.0.0.3): {code}, {x['state'] if code == 202 else st} after {took:.2f} s (its queued_ms {x['timings'].get('queued_ms') if code == 202 else '-'})")
    print("  server exit after SIGTERM: %.2f s, rc %s" % s.term())


def m_sigterm(model, trials=int(os.environ.get("TRIALS", "6"))):
    for k in range(trials):
        data = tempfile.mkdtemp(prefix="sk-term-")
        s = Server(["--model", model, "--nproc", "2"], data)
        big, small = png(1024, 1024, 5 + k), png(64, 64, 6)
        ids = []
        for i in range(8):
            c, st = s.submit(big if i % 2 else small, {"num_frames": 2, "steps": 4})
            if c == 202:
                ids.append(st["id"])
        time.sleep(0.1 + 0.3 * k)  # at different points of prepares and runs
        states = {}
        for i in ids:
            states[s.status(i)["state"]] = states.get(s.status(i)["state"], 0) + 1
        d, rc = s.term()
        s2 = Server(["--model", model, "--nproc", "2"], data)
        final = {}
        for i in ids:
            for _ in range(6000):
                x = s2.status(i)
                if x["state"] in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(0.02)
            final[x["state"]] = final.get(x["state"], 0) + 1
        print(f"SIGTERM trial {k}: {len(ids)} accepted, {states} at the signal; exit {d:.2f} s rc {rc}; restarted: {final}")
        s2.term()
        shutil.rmtree(data, ignore_errors=True)


model = "builtin"
for name, f in [("strip", m_strip), ("small", m_small_behind_big), ("fair", m_fair), ("sigterm", m_sigterm)]:
    if not ONLY or name in ONLY:
        f(model)
