"""The peers and rangeget: which tools run (TOOLS, LIST_ONLY), their variant rows
(VARIANTS, STREAMS, BASELINE), how each is installed (PACKAGES, ensure_tools),
built (build_rangeget) and invoked (command, metalink_command, bulk_command)."""
import os
import re
import shlex
import shutil
import subprocess
import time

from .common import REPO, WORK, log, which
from .filesystems import slow_flush_library


TOOLS = ["rangeget", "aria2c", "axel", "lftp", "curl", "wget2"]
# Tools that only run in list scenarios (those with `files`); elsewhere they
# have no row.
LIST_ONLY = {"wget2"}
# Extra rows in the scenarios that list them under `variants`: name -> the tool
# it runs (see command()).  curl+sync: curl, then `sync OUT`, an fsync of the
# file (rangeget's completion is durable, curl's is not).  rangeget (fast only):
# rangeget given only the last (fastest) mirror's URL, the yardstick of mirrors-pair.
# rangeget (no flush): rangeget with every fsync, fdatasync and syncfs made a no-op
# (slowflush.c, SLOW_FLUSH_SKIP): what its durable completion costs, in the same run.
VARIANTS = {"curl+sync": "curl", "rangeget (fast only)": "rangeget", "rangeget (baseline)": "rangeget",
            "rangeget -o - | sha256sum": "rangeget", "curl | sha256sum": "curl",
            "rangeget (no flush)": "rangeget",
            # digest-headers: the origin's Digest header is wrong (exit 3 and the .part kept is right)
            "rangeget (wrong Digest)": "rangeget", "aria2c (wrong Digest)": "aria2c",
            # piece-hash-cost: the same download from a Metalink (rangeget and aria2c without one are
            # the plain rows); "+ file hash": the Metalink also has the whole file's SHA-256
            "rangeget (Metalink)": "rangeget", "rangeget (Metalink + file hash)": "rangeget",
            "aria2c (Metalink)": "aria2c",
            # verify-repair: yardsticks, one read of the same damaged file with coreutils' SHA-256 and
            # with OpenSSL's; rows of rangeget's group, so they run whenever rangeget does (--tools rangeget)
            "sha256sum (read once)": "rangeget", "openssl sha256 (read once)": "rangeget",
            # trace-overhead: the same download writing --trace FILE
            "rangeget (--trace)": "rangeget"}
# auto_count (bench/adaptive.py): rangeget with each fixed connection count, beside the row
# `rangeget`, which there is `rangeget -n auto`.
FIXED_COUNTS = (1, 2, 4, 8, 16)
VARIANTS.update({f"rangeget -n {n}": "rangeget" for n in FIXED_COUNTS})
# Rows that read a file and print its SHA-256 (verify-repair): checked against the digest they print.
READERS = {"sha256sum (read once)", "openssl sha256 (read once)"}
# Variants that write the file to stdout, into sha256sum, whose digest (in OUT.sha256) is checked.
STREAMS = {"rangeget -o - | sha256sum", "curl | sha256sum"}
# --baseline PATH: an earlier rangeget binary, run as the row "rangeget (baseline)"
# in every scenario, so before and after are measured side by side in one run.
BASELINE = None  # set by main (tools.BASELINE)


# executable -> Debian package (installed with apt-get when missing).
PACKAGES = {"aria2c": "aria2", "axel": "axel", "lftp": "lftp", "curl": "curl", "wget2": "wget2",
            "nginx": "nginx", "openssl": "openssl", "xargs": "findutils", "/usr/bin/time": "time"}


def base_tool(tool):
    return VARIANTS.get(tool, tool)


def row_order(sc):
    """The scenario's tools and variants, each variant after its tool."""
    variants = list(sc.get("variants", ())) + (["rangeget (baseline)"] if BASELINE else [])
    tools = [b for b in TOOLS if "files" in sc or b not in LIST_ONLY]
    return [t for b in tools for t in [b] + [v for v in variants if VARIANTS[v] == b]]


def slug(tool):
    return re.sub(r"[^A-Za-z0-9+.]+", "-", tool).strip("-")


def ensure_tools():
    missing = sorted({PACKAGES[t] for t in PACKAGES if not which(t)})
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if sudo is None:
        log(f"missing {' '.join(missing)} and not root: install them (apt-get install -y ...)")
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log(f"installing {' '.join(missing)} with apt-get")
    subprocess.run(sudo + ["apt-get", "update", "-q"], env=env, check=False)
    subprocess.run(sudo + ["apt-get", "install", "-y", "-q", *missing], env=env, check=False)


def build_rangeget():
    """Returns (path to the binary or None, why not)."""
    swift = shutil.which("swift")
    if not swift:
        return None, "swift not found on PATH"
    build_log = os.path.join(WORK, "build.log")
    log("building rangeget: swift build -c release --product rangeget --static-swift-stdlib --disable-local-rpath")
    t0 = time.monotonic()
    with open(build_log, "wb") as f:
        # As `make build` does: the commit for `rangeget --version` first, then
        # the Swift runtime linked statically (about 6 MiB less resident), and
        # the same link flags, so that neither build relinks the other's binary.
        rc = subprocess.run([os.path.join(REPO, "scripts", "build-info")], cwd=REPO, stdout=f,
                            stderr=subprocess.STDOUT).returncode
        rc = rc or subprocess.run([swift, "build", "-c", "release", "--product", "rangeget", "--static-swift-stdlib",
                                   "--disable-local-rpath"], cwd=REPO, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        tail = open(build_log, errors="replace").read().splitlines()[-25:]
        log("rangeget build FAILED (rangeget rows will be not ok); last lines of "
            f"{os.path.relpath(build_log, REPO)}:\n  " + "\n  ".join(tail))
        return None, f"build failed (exit {rc}, see Benchmarks/work/build.log)"
    log(f"built in {time.monotonic() - t0:.0f} s")
    bin_dir = subprocess.run([swift, "build", "-c", "release", "--show-bin-path"], cwd=REPO,
                             capture_output=True, text=True).stdout.strip()
    path = os.path.join(bin_dir, "rangeget")
    if not os.access(path, os.X_OK):
        return None, f"no binary at {path}"
    return path, ""


AXEL_TLS_NOTE = "`-k` (no CA-file option; with SSL_CERT_FILE its hostname check fails on an IP)"


def command(tool, rg, n, urls, out_dir, name, resume=False, ca=None):
    """ca: the CA file, given to the tool when a URL is https."""
    out = os.path.join(out_dir, name)
    tls = ca is not None and any(u.startswith("https:") for u in urls)
    if tool == "curl+sync":  # coreutils `sync FILE` fsyncs that file
        curl = command("curl", rg, n, urls, out_dir, name, ca=ca)
        return ["sh", "-c", shlex.join(curl) + " && sync " + shlex.quote(out)]
    if tool in STREAMS:  # bash for pipefail: the downloader's failure is the pipeline's
        source = ([rg, "-q", "-n", str(n), "-o", "-", *(["--cacert", ca] if tls else []), *urls]
                  if base_tool(tool) == "rangeget" else ["curl", "-s", *(["--cacert", ca] if tls else []), urls[0]])
        return ["bash", "-c", "set -o pipefail; " + shlex.join(source) + " | sha256sum > " + shlex.quote(out + ".sha256")]
    if tool == "rangeget (fast only)":
        return command("rangeget", rg, n, urls[-1:], out_dir, name, resume, ca)
    if tool == "rangeget (baseline)":
        return command("rangeget", BASELINE, n, urls, out_dir, name, resume, ca)
    if tool == "rangeget":
        return [rg, "-q", "-n", str(n), "-o", out, *(["--cacert", ca] if tls else []), *urls]
    if tool == "aria2c":
        return ["aria2c", "-q", "-x", str(n), "-s", str(n), "-k", "1M", "--file-allocation=none",
                "--allow-overwrite=true", "--auto-file-renaming=false",
                *([f"--ca-certificate={ca}"] if tls else []), "-d", out_dir, "-o", name, *urls]
    if tool == "axel":  # AXEL_TLS_NOTE
        return ["axel", "-q", *(["-k"] if tls else []), "-n", str(n), "-o", out, *urls]
    if tool == "lftp":  # pget resumes only with -c (it keeps OUT.lftp-pget-status)
        ssl = f"set ssl:ca-file {ca}; set ssl:verify-certificate yes; " if tls else ""
        return ["lftp", "-c", f"{ssl}set net:max-retries 5; pget{' -c' if resume else ''} -n {n} {urls[0]} -o {out}"]
    if tool == "curl":
        return ["curl", "-s", *(["--cacert", ca] if tls else []), "-o", out, urls[0]]
    raise ValueError(tool)


def metalink_command(tool, rg, n, meta, out_dir, name):
    """A download from the Metalink document meta into out_dir/name (the name
    the document gives the file).  rangeget also prints its --json summary (the
    per-mirror badPieces and dropped the scenarios report).  aria2c checks the
    pieces as they land (--realtime-chunk-checksum, its default, made explicit);
    it takes the name from the document (-o does not apply to a Metalink)."""
    if base_tool(tool) == "rangeget":
        rg = BASELINE if tool == "rangeget (baseline)" else rg
        return [rg, "-q", "--json", "-n", str(n), "--metalink", meta, "-o", os.path.join(out_dir, name)]
    if base_tool(tool) == "aria2c":
        return ["aria2c", "-q", "-x", str(n), "-s", str(n), "-k", "1M", "--file-allocation=none",
                "--allow-overwrite=true", "--auto-file-renaming=false", "--realtime-chunk-checksum=true",
                "-d", out_dir, "-M", meta]
    raise ValueError(tool)


def repair_command(tool, rg, n, meta, path):
    """A finished file at path, damaged, checked against the Metalink meta and
    its bad pieces fetched again from the document's mirrors (verify-repair).
    rangeget: `verify --repair`, with its --json summary (badPieces,
    bytesFetched).  aria2c: its Metalink download command line with
    --check-integrity=true (-V), which hashes the pieces of the file already in
    the directory and fetches only those that do not match; without it,
    --allow-overwrite=true fetches the whole file again, and -c alone takes a
    file of the right size as done, unchecked.  READERS: the file read once,
    hashed by coreutils (sha256sum) or by OpenSSL (`openssl dgst -sha256`)."""
    if tool == "sha256sum (read once)":
        return ["sha256sum", path]
    if tool == "openssl sha256 (read once)":
        return ["openssl", "dgst", "-sha256", path]
    if base_tool(tool) == "rangeget":
        rg = BASELINE if tool == "rangeget (baseline)" else rg
        return [rg, "verify", "--repair", "--json", "-n", str(n), "-M", meta, path]
    if base_tool(tool) == "aria2c":
        return metalink_command(tool, rg, n, meta, os.path.dirname(path), os.path.basename(path)) + [
            "--check-integrity=true"]
    raise ValueError(tool)


def bulk_command(tool, rg, list_file, urls, out_dir):
    if tool == "rangeget (baseline)":
        return bulk_command("rangeget", BASELINE, list_file, urls, out_dir)
    if tool == "rangeget (no flush)":
        return ["env", f"LD_PRELOAD={slow_flush_library()}", "SLOW_FLUSH_SKIP=1",
                *bulk_command("rangeget", rg, list_file, urls, out_dir)]
    if tool == "rangeget":
        return [rg, "-q", "-n", "16", "-d", out_dir, "-i", list_file]
    if tool == "aria2c":
        return ["aria2c", "-q", "-j", "16", "-x", "1", "-k", "1M", "--file-allocation=none",
                "--allow-overwrite=true", "--auto-file-renaming=false", "-d", out_dir, "-i", list_file]
    if tool == "axel":
        return ["xargs", "-a", list_file, "-P", "16", "-n", "1", "axel", "-q", "-n", "1", "-o", out_dir + "/"]
    if tool == "lftp":
        script = f"set net:max-retries 5; mget -P 16 -O {out_dir} " + " ".join(urls)
        if len(script) < 100_000:
            return ["lftp", "-c", script]
        # Linux caps one argument at 128 KiB (MAX_ARG_STRLEN): a long list's
        # commands go in a script file instead (the same commands)
        path = list_file + ".lftp"
        open(path, "w").write(script + "\n")
        return ["lftp", "-f", path]
    if tool == "curl":
        return ["curl", "-s", "--parallel", "--parallel-max", "16", "--output-dir", out_dir,
                "--remote-name-all", *urls]
    if tool == "wget2":  # -nd: no host directories; --no-robots: no robots.txt request
        return ["wget2", "-q", "--max-threads=16", "--no-robots", "-nd", "-P", out_dir, "-i", list_file]
    raise ValueError(tool)


BULK_NOTES = {"axel": "xargs -P 16, one `axel -n 1` per file", "lftp": "mget -P 16",
              "curl": "--parallel --parallel-max 16", "aria2c": "-j 16 -x 1 -i LIST",
              "wget2": "--max-threads=16 -i LIST, no sync"}
