"""Running one tool and measuring it: its own process group, wall (monotonic),
CPU (os.wait4), peak RSS (GNU time), timeouts and signals; SHA-256 of an
output; the page cache made even before a scenario; openssl's SHA-256 speed;
medians."""
import hashlib
import os
import re
import shlex
import signal
import statistics
import subprocess
import threading
import time

from .common import LIVE, MiB


GNU_TIME = None  # /usr/bin/time, for peak RSS (see run_process); set by main (measure.GNU_TIME)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(8 * MiB):
            h.update(b)
    return h.hexdigest()


def run_process(cmd, timeout, out_log, interrupt_after=None, interrupt=None, rss=True):
    """Runs cmd in its own process group; measures wall (monotonic) and CPU user+sys
    (os.wait4 rusage, including reaped children) and peak RSS.
    Peak RSS comes from GNU time: Linux adds the pre-exec size of a process to its
    ru_maxrss, so a child forked from this Python process would report >= our own
    RSS (~40 MiB); under /usr/bin/time the floor is time's ~1 MiB.
    rss=False runs cmd as our direct child, without GNU time, and returns rss None:
    for a run that is to be killed.  A SIGKILL to the group kills GNU time too, and
    with it the CPU time of the tool (time never reaps it, so neither do we); the
    tool as our own child is reaped by os.wait4, whose rusage then has its CPU."""
    rss_file = out_log + ".rss"
    if os.path.exists(rss_file):
        os.remove(rss_file)
    use_time = GNU_TIME if rss else None
    timed = ([use_time, "-f", "maxrss_kib=%M", "-o", rss_file] if use_time else []) + cmd
    with open(out_log, "wb") as f:
        f.write(("$ " + shlex.join(cmd) + "\n").encode())
        f.flush()
        t0 = time.monotonic()
        proc = subprocess.Popen(timed, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    LIVE.add(proc.pid)
    state = {"done": False, "timeout": False, "interrupted": False, "forced": False}
    lock = threading.Lock()

    def send(sig, key):
        with lock:
            if state["done"]:
                return
            state[key] = True
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass

    timers = [threading.Timer(timeout, send, (signal.SIGKILL, "timeout"))]
    if interrupt_after is not None:
        timers.append(threading.Timer(interrupt_after, send, (interrupt, "interrupted")))
        if interrupt != signal.SIGKILL:  # a tool that ignores Ctrl-C for 10 s gets SIGKILL
            timers.append(threading.Timer(interrupt_after + 10, send, (signal.SIGKILL, "forced")))
    for t in timers:
        t.daemon = True
        t.start()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
    finally:
        with lock:
            state["done"] = True
        for t in timers:
            t.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group, if any
    except ProcessLookupError:
        pass
    LIVE.discard(proc.pid)
    peak = ru.ru_maxrss / 1024 if rss else None
    if use_time:  # None when time was killed with the group (SIGKILL, timeout)
        m = re.search(r"maxrss_kib=(\d+)", open(rss_file).read() if os.path.exists(rss_file) else "")
        peak = int(m.group(1)) / 1024 if m else None
    return dict(rc=proc.returncode, wall=wall, cpu=ru.ru_utime + ru.ru_stime, rss=peak, limit=timeout, **state)


def last_line(path):
    try:
        lines = [l.strip() for l in open(path, errors="replace").read().splitlines()[1:] if l.strip()]
    except OSError:
        return ""
    return lines[-1][:100] if lines else ""


def warm_page_cache(path):
    """Reads the file at path once, so that no run is the one that reads it from the disk."""
    with open(path, "rb") as f:
        while f.read(8 * MiB):
            pass


def make_room(directory, size):
    """Writes `size` bytes into `directory`, then removes them: the kernel
    reclaims that much page cache now, in this process's time, and the
    pages freed by the removal wait for the first timed run's writes, as
    the output the run before removed leaves them for every later run."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, ".room")
    block = bytes(8 * MiB)
    with open(path, "wb") as f:
        for _ in range(0, size, len(block)):
            f.write(block)
    os.unlink(path)


def timed_out(res):
    """The failure note of a run killed at its timeout ("timed out" is what the ok
    column counts; a tool that did not run is "skipped" there)."""
    return f"timed out (killed after {res['limit']:.0f} s)" if res.get("limit") else "timed out"


def sha256_seconds_per_gib(seconds=3):
    """What one core needs to hash 1 GiB with SHA-256, from `openssl speed
    -seconds S -bytes 1048576 sha256` (1 MiB blocks, as the Metalink pieces of
    piece-hash-cost); None without openssl or a line to read."""
    try:
        r = subprocess.run(["openssl", "speed", "-seconds", str(seconds), "-bytes", str(MiB), "sha256"],
                           capture_output=True, text=True, timeout=seconds * 5 + 30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^sha256\s+([\d.]+)k\s*$", r.stdout, re.M)  # 1000s of bytes per second
    return (1 << 30) / (float(m.group(1)) * 1000) if m else None


def med(xs):
    return statistics.median(xs) if xs else None
