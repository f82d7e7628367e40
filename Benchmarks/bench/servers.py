"""What the tools download from: nginx (NGINX_SERVERS), relay.py (RELAYS),
`rangeget serve`, the self-signed certificate, the data files they serve (and the
Metalink documents and altered mirror copies of them), and
what nginx's access logs say about a run (connections, protocols, bytes)."""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from .common import DATA, HERE, LIVE, LOGS, MiB, REPO, WORK, log, which
from .measure import sha256_of


# nginx servers: name -> limit_rate (per connection; "0" = none) and options:
# label (for per-mirror notes), tls (`listen ... ssl http2` with the harness's
# self-signed certificate), bursty (nginx's default pacing: no sendfile_max_chunk),
# sndbuf (`listen ... sndbuf=`: behind a relay, what nginx may queue; see README).
NGINX_SERVERS = {"open": dict(rate="0"), "cap20": dict(rate="20m"), "tls": dict(rate="0", tls=True),
                 "tls-relayed": dict(rate="0", tls=True, sndbuf="256k"),
                 "m2": dict(rate="2m", label="2m"), "m8": dict(rate="8m", label="8m"),
                 "m32": dict(rate="32m", label="32m"),
                 "m2b": dict(rate="2m", label="2m", bursty=True), "m8b": dict(rate="8m", label="8m", bursty=True),
                 "m32b": dict(rate="32m", label="32m", bursty=True),
                 "u10": dict(rate="0", sndbuf="256k"), "u20": dict(rate="0", sndbuf="256k"),
                 "u40": dict(rate="0", sndbuf="256k"),
                 "cap20b": dict(rate="20m", bursty=True),
                 "r10": dict(rate="10m"), "r10b": dict(rate="10m", bursty=True), "b20": dict(rate="20m"),
                 "lists": dict(rate="0"),
                 # piece-hash-cost-capped: 50 MiB/s per connection, smoothed; 8 connections: 400 MiB/s in all
                 "cap50": dict(rate="50m"),
                 # metalink: three unthrottled mirrors of one path, each from a root of its own (see
                 # altered_copy: the same size and mtime, so the same ETag and Last-Modified)
                 "ml-other": dict(rate="0", label="different file", root=os.path.join(DATA, "metalink-other")),
                 "ml-flip": dict(rate="0", label="one byte flipped", root=os.path.join(DATA, "metalink-flip")),
                 "ml-good": dict(rate="0", label="good")}
# relays (Benchmarks/relay.py) in front of an nginx server: name -> the backend
# server, relay.py's pacing options and a label.  A scenario names them like
# servers; their URLs have the backend's scheme, their requests are in the
# backend's access log.
RELAYS = {"h2cap": dict(backend="tls-relayed", args=["--per-connection", "5MiB"], label="5 MiB/s per connection"),
          "up10": dict(backend="u10", args=["--total", "10MB"], label="10MB"),
          "up20": dict(backend="u20", args=["--total", "20MB"], label="20MB"),
          "up40": dict(backend="u40", args=["--total", "40MB"], label="40MB")}


def keystream(name, size, path):
    """Writes `size` random-looking bytes to path; returns their SHA-256.
    Deterministic (AES-128-CTR keystream keyed by the name) when openssl exists."""
    h = hashlib.sha256()
    key = hashlib.sha256(name.encode()).hexdigest()[:32]
    proc = None
    if shutil.which("openssl"):
        proc = subprocess.Popen(
            ["openssl", "enc", "-aes-128-ctr", "-nosalt", "-K", key, "-iv", "0" * 32],
            stdin=open("/dev/zero", "rb"), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        with open(path + ".tmp", "wb") as f:
            left = size
            while left:
                k = min(left, 8 * MiB)
                b = proc.stdout.read(k) if proc else os.urandom(k)
                if len(b) != k:
                    raise RuntimeError("openssl keystream ended early")
                f.write(b)
                h.update(b)
                left -= k
    finally:
        if proc:
            proc.kill()
            proc.wait()
    os.replace(path + ".tmp", path)
    return h.hexdigest()


def data_file(rel, size):
    """Benchmarks/data/REL of `size` bytes, generated once; returns (path, sha256)."""
    path = os.path.join(DATA, rel)
    cache = path + ".sha256"
    try:
        st = os.stat(path)
        c = json.load(open(cache))
        if st.st_size == size == c["size"] and st.st_mtime_ns == c["mtime_ns"]:
            return path, c["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if size >= 64 * MiB:
        log(f"generating {os.path.relpath(path, REPO)} ({size // MiB} MiB)")
    sha = keystream(rel, size, path)
    json.dump({"size": size, "mtime_ns": os.stat(path).st_mtime_ns, "sha256": sha}, open(cache, "w"))
    return path, sha


def file_set(rel_dir, count, size):
    """Benchmarks/data/REL_DIR/f00000.bin ... : `count` files of `size` bytes,
    generated once, for the long lists; returns [(path, sha256)].  File i is bytes
    i*size .. (i+1)*size of one keystream keyed by REL_DIR (as keystream(): no two
    files alike).  One manifest, REL_DIR.json, holds every file's size, mtime and
    SHA-256 (not a .sha256 file per file); the files are written again when any of
    the first `count` does not match it.  A set generated for more files serves
    fewer (--quick takes the first ones)."""
    d = os.path.join(DATA, rel_dir)
    manifest = os.path.join(DATA, rel_dir + ".json")
    names = [f"f{i:05d}.bin" for i in range(count)]
    try:
        m = json.load(open(manifest))
        if m["size"] == size and all(
                (st := os.stat(os.path.join(d, n))).st_size == size and st.st_mtime_ns == m["files"][n][0]
                for n in names):
            return [(os.path.join(d, n), m["files"][n][1]) for n in names]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    log(f"generating {os.path.relpath(d, REPO)}/ ({count} files of {size} bytes)")
    os.makedirs(d, exist_ok=True)
    stream = os.path.join(d, ".stream")
    keystream(rel_dir, count * size, stream)
    files = {}
    with open(stream, "rb") as f:
        for n in names:
            b = f.read(size)
            with open(os.path.join(d, n), "wb") as out:
                out.write(b)
            files[n] = [os.stat(os.path.join(d, n)).st_mtime_ns, hashlib.sha256(b).hexdigest()]
    os.remove(stream)
    json.dump({"size": size, "count": count, "files": files}, open(manifest + ".tmp", "w"))
    os.replace(manifest + ".tmp", manifest)
    return [(os.path.join(d, n), files[n][1]) for n in names]


def piece_hashes(path, piece):
    """The SHA-256 of every `piece` bytes of path (the last piece may be shorter), as
    hex, computed with hashlib once and cached next to the file
    (PATH.pieces-N.json, checked against size and mtime)."""
    cache = f"{path}.pieces-{piece}.json"
    st = os.stat(path)
    try:
        c = json.load(open(cache))
        if (c["size"], c["mtime_ns"]) == (st.st_size, st.st_mtime_ns):
            return c["pieces"]
    except (OSError, ValueError, KeyError):
        pass
    pieces = []
    with open(path, "rb") as f:
        while b := f.read(piece):
            pieces.append(hashlib.sha256(b).hexdigest())
    json.dump({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "pieces": pieces}, open(cache, "w"))
    return pieces


def write_metalink(meta_path, src, sha, urls, piece=MiB, whole=True, name=None):
    """The one Metalink 4 (RFC 5854) writer of every scenario: a document at
    meta_path for the file src (SHA-256 sha) named `name` (default src's base
    name), with its <size>, its whole-file <hash type="sha-256"> (unless whole is
    False), <pieces length=PIECE type="sha-256"> from piece_hashes (unless piece is
    None), and one <url priority="1"> per URL in the order given (rangeget and
    aria2c keep that order among equal priorities).  Returns meta_path."""
    name = name or os.path.basename(src)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<metalink xmlns="urn:ietf:params:xml:ns:metalink">',
             f'  <file name="{name}">',
             f"    <size>{os.path.getsize(src)}</size>"]
    if whole:
        lines.append(f'    <hash type="sha-256">{sha}</hash>')
    if piece:
        lines.append(f'    <pieces length="{piece}" type="sha-256">')
        lines += [f"      <hash>{h}</hash>" for h in piece_hashes(src, piece)]
        lines.append("    </pieces>")
    lines += [f'    <url priority="1">{u}</url>' for u in urls]
    lines += ["  </file>", "</metalink>", ""]
    os.makedirs(os.path.dirname(meta_path), exist_ok=True)
    open(meta_path, "w").write("\n".join(lines))
    return meta_path


def altered_copy(src, rel_dir, flip_at=None):
    """DATA/REL_DIR/NAME beside src (DATA/NAME): src with the byte at flip_at
    inverted, or, without flip_at, a different file (another keystream) of src's
    size.  Either way it gets src's mtime, so that nginx (whose ETag is the mtime
    and the size) sends the same ETag and Last-Modified for both: a client cannot
    tell the copies apart by their validators.  Made once, cached like
    data_file (checked against src's size and mtime).  Returns (path, sha256)."""
    path = os.path.join(DATA, rel_dir, os.path.basename(src))
    cache = path + ".sha256"
    st = os.stat(src)
    key = dict(size=st.st_size, src_mtime_ns=st.st_mtime_ns, flip_at=flip_at)
    try:
        c = json.load(open(cache))
        if all(c.get(k) == v for k, v in key.items()) and os.stat(path).st_size == st.st_size:
            return path, c["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if flip_at is None:
        if st.st_size >= 64 * MiB:
            log(f"generating {os.path.relpath(path, REPO)} ({st.st_size // MiB} MiB, different bytes)")
        sha = keystream(os.path.join(rel_dir, os.path.basename(src)), st.st_size, path)
    else:
        shutil.copyfile(src, path + ".tmp")
        with open(path + ".tmp", "r+b") as f:
            f.seek(flip_at)
            b = f.read(1)
            f.seek(flip_at)
            f.write(bytes([b[0] ^ 0xFF]))
        os.replace(path + ".tmp", path)
        sha = sha256_of(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    json.dump(dict(key, sha256=sha), open(cache, "w"))
    return path, sha


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def stop_group(proc, sig=signal.SIGTERM, grace=3.0):
    if proc is None or proc.poll() is not None:
        LIVE.discard(proc.pid if proc else None)
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    LIVE.discard(proc.pid)


def pacing_chunk(rate):
    """nginx paces limit_rate by sending a chunk (<= sendfile_max_chunk) and then
    sleeping chunk*1000/rate ms, truncated to whole ms; the first chunk of every
    response is a free burst.  A chunk of exactly 10 ms at the rate keeps both the
    burst and the truncation error small (with the 2 MiB default, a 4 MiB range at
    20 MiB/s finishes in about half the time the cap implies)."""
    rate_bytes = int(rate[:-1]) * {"k": 1 << 10, "m": MiB}[rate[-1]]
    return -(-rate_bytes // 100)


def make_certificate():
    """A self-signed certificate for 127.0.0.1 (EC P-256), made at every start
    under Benchmarks/work/tls/.  It is its own CA: every tool is given it as the
    CA file.  Returns (cert, key) or (None, why not)."""
    d = os.path.join(WORK, "tls")
    os.makedirs(d, exist_ok=True)
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    if not which("openssl"):
        return None, "no openssl"
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "7", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", cert], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "openssl req failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return cert, key


def start_nginx(cert=None, key=None, servers=None, tag="nginx", ports=None):
    """One nginx (daemon off, own pid/logs) with a server per entry of servers
    (default NGINX_SERVERS; TLS ones only with a certificate).  An entry may set
    root (default DATA) and headers ([(name, value)], nginx's add_header); ports
    may fix some servers' ports (the others get free ones).  tag names the
    config, pid and error log (WORK/TAG.conf ...), so a scenario can start an
    nginx of its own beside the harness's.
    Returns (process, {name: port}, {name: access log path})."""
    nginx = which("nginx")
    if not nginx:
        raise SystemExit("nginx not found and could not be installed")
    servers = NGINX_SERVERS if servers is None else servers
    wanted = [name for name, o in servers.items() if cert or not o.get("tls")]
    ports = {name: port for name, port in (ports or {}).items() if name in wanted}
    for name in wanted:
        # free_port() closes the port it found, so two calls may return the same one: nginx then
        # serves both servers' requests from the first ("conflicting server name" in its error log)
        while name not in ports or list(ports.values()).count(ports[name]) > 1:
            ports[name] = free_port()
    ports = {name: ports[name] for name in wanted}
    logs = {name: os.path.join(LOGS, f"nginx-{name}.access.log") for name in ports}
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.makedirs(os.path.join(WORK, "nginx-tmp", d), exist_ok=True)
    # (nginx before 1.23.4 leaves TLSv1.3 out of its default ssl_protocols)
    tls = (f"ssl http2;\n        ssl_certificate {cert};\n        ssl_certificate_key {key};\n"
           f"        ssl_protocols TLSv1.2 TLSv1.3;")
    servers_conf = "".join(
        f"""
    server {{  # {name}
        listen 127.0.0.1:{ports[name]}{" sndbuf=" + o["sndbuf"] if o.get("sndbuf") else ""}{" " + tls if o.get("tls") else ";"}
        root {o.get("root", DATA)};
        access_log {logs[name]} bench;
        limit_rate {o["rate"]};
        {f"sendfile_max_chunk {pacing_chunk(o['rate'])};" if o["rate"] != "0" and not o.get("bursty") else ""}
        {"".join(f"add_header {n} '{v}';" for n, v in o.get("headers", ()))}
        location / {{ }}
    }}""" for name, o in servers.items() if name in ports)
    tmp = os.path.join(WORK, "nginx-tmp")
    error_log = os.path.join(LOGS, f"{tag}-error.log")
    conf = f"""# generated by Benchmarks/run
{"user root;" if os.geteuid() == 0 else ""}
daemon off;
master_process on;
worker_processes auto;
pid {WORK}/{tag}.pid;
error_log {error_log} warn;
events {{ worker_connections 4096; }}
http {{
    types {{ }}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    log_format bench '$msec $connection $server_protocol $ssl_protocol $status $bytes_sent $body_bytes_sent '
                     '"$http_range" $request_time "$request" "$http_user_agent"';
{servers_conf}
}}
"""
    path = os.path.join(WORK, f"{tag}.conf")
    open(path, "w").write(conf)
    stderr = os.path.join(LOGS, f"{tag}.stderr")
    proc = subprocess.Popen([nginx, "-p", WORK, "-e", error_log, "-c", path],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(stderr, "wb"), start_new_session=True)
    LIVE.add(proc.pid)
    deadline = time.monotonic() + 10
    while not all(port_open(p) for p in ports.values()):
        if proc.poll() is not None or time.monotonic() > deadline:
            err = open(stderr, errors="replace").read()
            err += open(error_log, errors="replace").read() if os.path.exists(error_log) else ""
            stop_group(proc)
            raise SystemExit(f"nginx did not start:\n{err[-2000:]}")
        time.sleep(0.05)
    return proc, ports, logs


def start_relay(name, backend_port, timeout=10.0):
    """Benchmarks/relay.py in front of backend_port; returns (process, port) or (None, why)."""
    port = free_port()
    out = os.path.join(LOGS, f"relay-{name}.out")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "relay.py"), "--listen", str(port),
                             "--backend", str(backend_port), *RELAYS[name]["args"],
                             "--log", os.path.join(LOGS, f"relay-{name}.log")],
                            stdin=subprocess.DEVNULL, stdout=open(out, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    LIVE.add(proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if port_open(port):
            return proc, port
        time.sleep(0.05)
    stop_group(proc)
    tail = open(out, errors="replace").read().strip().splitlines()[-1:] or ["no output"]
    return None, f"relay.py did not start: {tail[0][:120]}"


def start_serve(rangeget, args, timeout=10.0, log_name="serve.log"):
    """`rangeget serve DATA --port P ARGS...`, its output into LOGS/log_name;
    returns (process, port) or (None, why)."""
    if not rangeget:
        return None, "no rangeget binary"
    port = free_port()
    out = os.path.join(LOGS, log_name)
    proc = subprocess.Popen([rangeget, "serve", DATA, "--port", str(port), *args],
                            stdin=subprocess.DEVNULL, stdout=open(out, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    LIVE.add(proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        first = open(out, errors="replace").readline()
        if re.match(rf"serving .* on http://127\.0\.0\.1:{port}/", first) or port_open(port):
            return proc, port  # (stdout may be block-buffered: an open port also counts)
        time.sleep(0.05)
    stop_group(proc)
    tail = open(out, errors="replace").read().strip().splitlines()[-1:] or ["no output"]
    return None, f"`rangeget serve` did not start: {tail[0][:120]}"


def log_size(access_log):
    return os.path.getsize(access_log) if os.path.exists(access_log) else 0


def log_entries(access_log, offset):
    """nginx log lines after byte offset, as (connection, protocol, body bytes,
    seconds the response took).  Format `bench`: $msec $connection
    $server_protocol $ssl_protocol $status $bytes_sent $body_bytes_sent
    "$http_range" $request_time ...; $connection is the TCP connection's serial
    number (counted across workers; all HTTP/2 streams of a connection share it)."""
    if not os.path.exists(access_log):
        return []
    with open(access_log, "rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    return [(int(w[1]), w[2] + ("" if w[3] == "-" else " over " + w[3]), int(w[6]), float(w[8]))
            for w in (l.split() for l in lines) if len(w) > 8]


def delivered_rate(entries):
    """What nginx sent per second of a response, over every response of a run:
    body bytes / the sum of their $request_time.  Under a per-connection
    limit_rate this is the rate one busy connection got, which is below the
    nominal one when nginx's pacing timers fire late (a busy CPU): the ideal
    at the nominal rate is then out of every client's reach.  A client slow
    to read lowers it as well, which a whole second of socket buffering at
    20 MiB/s hides.  None without a logged response."""
    seconds = sum(e[3] for e in entries)
    return sum(e[2] for e in entries) / seconds if seconds > 0 else None


def served_bytes(access_log, offset):
    """(body bytes, requests) of nginx log lines after byte offset."""
    entries = log_entries(access_log, offset)
    return sum(e[2] for e in entries), len(entries)
