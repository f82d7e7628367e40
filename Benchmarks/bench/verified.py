"""The scenarios of verified downloads, as Bench methods (VerifiedDownloads):
a Metalink with piece hashes and two bad mirrors (metalink), a damaged .part
resumed from a Metalink (metalink_resume), the Link: rel=duplicate and
Digest headers of an origin (digest_headers), what checking the pieces
costs (piece_hash_cost, unthrottled and under a cap that leaves a core
free), and a finished file with a byte flipped, repaired from a Metalink
(verify_repair).  Each returns what Bench's other kinds return (the runs
per tool, notes, ideal, size), plus per-run keys that the scenario's
`columns` and goals read."""
import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import time
import urllib.parse

from .common import GiB, LOGS, MiB, WORK
from .measure import last_line, make_room, run_process, sha256_seconds_per_gib, timed_out, warm_page_cache
from .servers import (altered_copy, data_file, delivered_rate, free_port, log_entries, log_size, start_nginx,
                      stop_group, write_metalink)
from .tools import READERS, TOOLS, base_tool, command, metalink_command, repair_command, slug


def json_summary(out_log):
    """rangeget's --json object (the last line of the log that is one), or None."""
    try:
        lines = open(out_log, errors="replace").read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def validators(url):
    """(ETag, Last-Modified) of a HEAD to url, or the error."""
    parts = urllib.parse.urlsplit(url)
    try:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("HEAD", parts.path)
        r = conn.getresponse()
        conn.close()
        return r.getheader("ETag"), r.getheader("Last-Modified")
    except OSError as e:
        return f"HEAD failed: {e}", None


def with_json(cmd):
    """rangeget's command line with --json after -q (its summary on stdout, into the run's log)."""
    return cmd[:2] + ["--json"] + cmd[2:] if cmd[1] == "-q" else cmd


def requested_ranges(access_log, offset, size):
    """[(first, end)) byte ranges the requests after offset asked for (the whole
    file for a request without Range)."""
    ranges = []
    if not os.path.exists(access_log):
        return ranges
    with open(access_log, "rb") as f:
        f.seek(offset)
        for line in f.read().decode(errors="replace").splitlines():
            m = re.search(r'"bytes=(\d*)-(\d*)"', line)
            if not m:
                ranges.append((0, size))
            elif m.group(1):
                ranges.append((int(m.group(1)), min(int(m.group(2)) + 1, size) if m.group(2) else size))
            else:  # a suffix range: the last N bytes
                ranges.append((max(size - int(m.group(2)), 0), size))
    return ranges


def pieces_in(ranges, piece):
    """The indices of the pieces lying wholly inside the [first, end) ranges."""
    return {k for a, b in ranges for k in range(-(-a // piece), b // piece)}


class VerifiedDownloads:
    """Mixed into Bench (runner.py): self.rounds, self.check, self.out_dir, ..."""

    def served_per_server(self, res, logs, offsets):
        """Reads the nginx logs after the run: TCP conns, protocols, (conns, body
        bytes) per server, and the bytes all of them served over the size."""
        time.sleep(0.3)  # requests the tool cut are logged when nginx sees the close
        entries = [log_entries(l, o) for l, o in zip(logs, offsets)]
        res["conns"] = sum(len({e[0] for e in es}) for es in entries)
        res["protocols"] = sorted({e[1] for es in entries for e in es})
        res["per_server"] = [(len({e[0] for e in es}), sum(e[2] for e in es)) for es in entries]
        res["served_bytes"] = sum(b for _, b in res["per_server"])
        res["per_mirror_mib"] = [b / MiB for _, b in res["per_server"]]
        return res

    def metalink(self, name, sc):
        """Three mirrors in a Metalink with piece hashes: one serves another file of
        the same size and validators, one the file with a byte flipped in one piece,
        one the file.  Per run: bytes each server sent, and rangeget's --json."""
        size, piece = self.pick(sc["size"]), sc["piece"]
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        flip_piece = -(-size // piece) * 5 // 8
        other, _ = altered_copy(src, "metalink-other")
        flipped, _ = altered_copy(src, "metalink-flip", flip_at=flip_piece * piece + piece // 2)
        names = sc["server"]
        why = self.start_servers(names)
        if why:
            return dict(skipped="skipped: " + why, size=size)
        tools, notes = self.tools_for(sc)
        urls = [f"{self.base_url(s)}/{fname}" for s in names]
        meta = write_metalink(os.path.join(WORK, f"{name}.meta4"), src, sha, urls, piece=piece)
        timeout = self.timeout_for(size / (100 * MiB))
        seen = [validators(u) for u in urls]
        same = (f"ETag {seen[0][0]} and Last-Modified {seen[0][1]} on all three (HEAD)" if len(set(seen)) == 1
                else "validators (ETag, Last-Modified) differ: " + "; ".join(map(str, seen)))

        def fn(tool, r):
            out_dir = self.out_dir(tool)
            logs = [self.logs[s] for s in names]
            offsets = [log_size(l) for l in logs]
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            res = run_process(metalink_command(tool, self.rg, sc["n"], meta, out_dir, fname), timeout, out_log)
            res["tail"] = last_line(out_log)
            self.check(res, os.path.join(out_dir, fname), size, sha)
            self.served_per_server(res, logs, offsets)
            res["served"] = res["served_bytes"] / size
            res["over_mib"] = (res["served_bytes"] - size) / MiB
            js = json_summary(out_log) if base_tool(tool) == "rangeget" else None
            if js:
                mirrors = {m["url"]: m for m in js.get("mirrors", [])}
                got = [mirrors.get(u, {}) for u in urls]
                res["bad_pieces"] = "/".join(",".join(map(str, m.get("badPieces") or [])) or "-" for m in got)
                dropped = got[0].get("dropped")
                res["other_dropped_ok"] = bool(dropped)
                res["other_dropped"] = (f"yes, after {got[0].get('bytes', 0) / MiB:.1f} MiB from it: "
                                        f"{dropped[:70]}{'...' if len(dropped) > 70 else ''}" if dropped else "no")
                res["fetched_mib"] = (js.get("bytesFetched") or 0) / MiB
            elif base_tool(tool) == "rangeget":
                res["other_dropped_ok"], res["other_dropped"] = False, "no --json summary"
            shutil.rmtree(out_dir, ignore_errors=True)
            return res

        for path in (src, other, flipped):
            warm_page_cache(path)
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        return dict(results=results, notes=notes, ideal=None, size=size, timeout=timeout,
                    extra=f"byte {flip_piece * piece + piece // 2} (piece {flip_piece}) flipped on the second mirror, "
                          f"{same}")

    def metalink_resume(self, name, sc):
        """`rangeget -o NAME URL` stopped by SIGINT about halfway; one byte of a
        piece inside a done range of NAME.part flipped; then `rangeget --metalink
        F -o NAME` resumes.  Per run: what the resume was served against the bytes
        missing, and which pieces of the done ranges it fetched again."""
        size, piece = self.pick(sc["size"]), sc["piece"]
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        server = sc["server"]
        url = f"http://127.0.0.1:{self.ports[server]}/{fname}"
        access = self.logs[server]
        meta = write_metalink(os.path.join(WORK, f"{name}.meta4"), src, sha, [url], piece=piece)
        tools, notes = self.tools_for(sc)
        estimate = sc["estimate"](size)
        after = sc["stop_at"] * estimate
        timeout = self.timeout_for(estimate)

        def fn(tool, r):
            out_dir = self.out_dir(tool)
            try:
                return attempt(tool, r, out_dir)
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)

        def attempt(tool, r, out_dir):
            out = os.path.join(out_dir, fname)
            log_a = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}a.log")
            log_b = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}b.log")
            first = run_process(command(tool, self.rg, sc["n"], [url], out_dir, fname), after + 15, log_a,
                                interrupt_after=after, interrupt=signal.SIGINT, rss=False)
            res = dict(ok=False, why="", wall=0, cpu=0, rss=None, rc=first["rc"], timeout=first["timeout"],
                       first_wall=first["wall"])
            try:
                done = json.load(open(out + ".part.json"))["done"]
            except (OSError, ValueError, KeyError):
                done = []
            if not first["interrupted"] or first["rc"] != 130 or not done:
                res["why"] = (f"first run exit {first['rc']}" + ("" if first["interrupted"] else " before the signal")
                              + ("" if done else ", no .part.json with done ranges"))
                return res
            done_bytes = sum(b - a for a, b in done)
            whole = sorted(pieces_in(done, piece))
            if not whole:
                res["why"] = "no whole piece inside a done range"
                return res
            flip = whole[len(whole) // 2]
            with open(out + ".part", "r+b") as f:
                f.seek(flip * piece + piece // 2)
                b = f.read(1)
                f.seek(flip * piece + piece // 2)
                f.write(bytes([b[0] ^ 0xFF]))
            time.sleep(0.3)  # the interrupted requests logged
            offset = log_size(access)
            res = run_process(metalink_command(tool, self.rg, sc["n"], meta, out_dir, fname), timeout, log_b)
            res["tail"] = last_line(log_b)
            self.check(res, out, size, sha)
            time.sleep(0.3)
            entries = log_entries(access, offset)
            ranges = requested_ranges(access, offset, size)
            served = sum(e[2] for e in entries)
            missing = size - done_bytes
            refetched = sorted(pieces_in(done, piece) & {k for a, b in ranges
                                                          for k in range(a // piece, -(-b // piece))})
            js = json_summary(log_b) or {}
            if js.get("bytesFetched") is not None:
                res["fetched_extra_pieces"] = (js["bytesFetched"] - missing) / piece
            bad = sorted({k for m in js.get("mirrors", []) for k in m.get("badPieces") or []})
            res.update(first_wall=first["wall"], done_frac=done_bytes / size, missing_mib=missing / MiB,
                       resume_mib=served / MiB, extra_pieces=(served - missing) / piece, flipped=str(flip),
                       refetched=",".join(map(str, refetched)) or "none", bad_pieces=",".join(map(str, bad)) or "none",
                       conns=len({e[0] for e in entries}), protocols=sorted({e[1] for e in entries}),
                       one_piece=res["ok"] and refetched == [flip])
            return res

        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        return dict(results=results, notes=notes, ideal=None, size=size, timeout=timeout,
                    extra=f"SIGINT {after:.2f} s after the first run's start")

    def digest_headers(self, name, sc):
        """An nginx of the scenario's own (the headers name the data file's port and
        SHA-256): an origin whose responses carry `Link: <MIRROR>; rel=duplicate;
        pri=1` and `Digest: SHA-256=...`, one whose Digest is wrong, and the mirror.
        The tools get only an origin's URL."""
        size = self.pick(sc["size"])
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        tools, notes = self.tools_for(sc)
        origin, mirror = sc["server"]
        ports = {mirror: free_port()}
        link = f"<http://127.0.0.1:{ports[mirror]}/{fname}>; rel=duplicate; pri=1"
        right = base64.b64encode(bytes.fromhex(sha)).decode()
        wrong = base64.b64encode(hashlib.sha256(b"not " + sha.encode()).digest()).decode()
        servers = {origin: dict(rate="0", headers=[("Link", link), ("Digest", f"SHA-256={right}")]),
                   sc["wrong_origin"]: dict(rate="0", headers=[("Link", link), ("Digest", f"SHA-256={wrong}")]),
                   mirror: dict(rate="0")}
        proc, ports, logs = start_nginx(servers=servers, tag="nginx-digest", ports=ports)
        timeout = self.timeout_for(size / (100 * MiB))

        def fn(tool, r):
            wrong_row = "(wrong Digest)" in tool
            first = sc["wrong_origin"] if wrong_row else origin
            out_dir = self.out_dir(tool)
            out = os.path.join(out_dir, fname)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            offsets = [log_size(logs[first]), log_size(logs[mirror])]
            cmd = command(tool if tool in TOOLS or tool == "rangeget (baseline)" else base_tool(tool), self.rg,
                          sc["n"], [f"http://127.0.0.1:{ports[first]}/{fname}"], out_dir, fname)
            res = run_process(with_json(cmd) if base_tool(tool) == "rangeget" else cmd, timeout, out_log)
            res["tail"] = last_line(out_log)
            res["part_kept"] = "yes" if os.path.exists(out + ".part") else "no"
            res["rcs"] = str(res["rc"])
            if wrong_row:  # ok: the file refused (a non-zero exit), nothing under its name
                why = ("timed out" if res["timeout"] else "" if res["rc"] != 0 else
                       "exit 0: the wrong Digest not noticed")
                if not why and base_tool(tool) == "rangeget" and os.path.exists(out):
                    why = f"exit {res['rc']} but a file under its name"
                res["ok"], res["why"] = not why, why
                res["exit3_part"] = res["rc"] == 3 and os.path.exists(out + ".part") and not os.path.exists(out)
            else:
                self.check(res, out, size, sha)
            self.served_per_server(res, [logs[first], logs[mirror]], offsets)
            res["both_used"] = res["ok"] and all(b > 0 for _, b in res["per_server"])
            js = json_summary(out_log) if base_tool(tool) == "rangeget" else None
            if js and js.get("outcome") != "complete":
                res["discovered"] = f"{js.get('outcome')}: {(js.get('error') or '')[:70]}"
            elif js:
                found = [m for m in js.get("mirrors", []) if m.get("discoveredIn")]
                res["discovered"] = (f"{len(found)} discovered, " + ", ".join(
                    f"{m['bytes'] / MiB:.1f} MiB" + (f" (dropped: {m['dropped'][:60]})" if m.get("dropped") else "")
                    for m in found)) if found else "none discovered"
            shutil.rmtree(out_dir, ignore_errors=True)
            return res

        try:
            warm_page_cache(src)
            make_room(os.path.join(WORK, "out"), size)
            results, gave_up = self.rounds(tools, fn, name)
        finally:
            stop_group(proc)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        return dict(results=results, notes=notes, ideal=None, size=size, timeout=timeout)

    def piece_hash_cost(self, name, sc):
        """The same loopback download by plain URL and from a Metalink with 1 MiB
        piece hashes (rows "(Metalink)"), in the same rounds; openssl's SHA-256
        speed on this machine is the yardstick of the CPU the hashes add.  The
        server is the scenario's: unthrottled (piece-hash-cost), or capped so that
        the plain download leaves a core free (piece-hash-cost-capped).  Per run:
        cores (the tool's CPU / its wall) and what nginx delivered per
        connection."""
        setup, skipped = self.scenario_file(sc)
        if skipped:
            return skipped
        size, src, sha, fname, url = (setup[k] for k in ("size", "src", "sha", "name", "url"))
        tools, notes, piece = setup["tools"], setup["notes"], sc["piece"]
        metas = {"pieces": write_metalink(os.path.join(WORK, f"{name}.meta4"), src, sha, [url], piece=piece,
                                          whole=False),
                 "file hash": write_metalink(os.path.join(WORK, f"{name}-file-hash.meta4"), src, sha, [url],
                                             piece=piece)}
        timeout = self.timeout_for(size / (100 * MiB))
        access = self.logs[sc["server"]]

        def fn(tool, r):
            out_dir = self.out_dir(tool)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            if "(Metalink" in tool:
                meta = metas["file hash" if "file hash" in tool else "pieces"]
                cmd = metalink_command(tool, self.rg, sc["n"], meta, out_dir, fname)
            else:
                cmd = command(tool, self.rg, sc["n"], [url], out_dir, fname)
                cmd = with_json(cmd) if base_tool(tool) == "rangeget" else cmd  # as the Metalink rows print it
            offset = log_size(access)
            res = run_process(cmd, timeout, out_log)
            res["tail"] = last_line(out_log)
            self.check(res, os.path.join(out_dir, fname), size, sha)
            entries = log_entries(access, offset)
            res["conns"] = len({e[0] for e in entries})
            res["protocols"] = sorted({e[1] for e in entries})
            res["cores"] = res["cpu"] / res["wall"] if res["wall"] else None  # the tool's CPU / its wall
            rate = delivered_rate(entries)
            res["delivered"], res["delivered_mib"] = rate, rate / MiB if rate else None
            shutil.rmtree(out_dir, ignore_errors=True)
            return res

        speed = sha256_seconds_per_gib(sc["openssl_seconds"])
        warm_page_cache(src)
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        walls = [x["wall"] for x in results.get(sc["ideal_tool"], []) if x["ok"]]
        speed_text = (f"openssl speed sha256 (1 MiB blocks, one core): {speed:.3f} s/GiB ({GiB / speed / 1e6:.0f} MB/s)"
                      if speed else "openssl speed sha256: not measured")
        return dict(results=results, notes=notes, ideal=statistics.median(walls) if walls else None, size=size,
                    timeout=timeout, sha256_s_per_gib=speed, extra=speed_text)

    def verify_repair(self, name, sc):
        """A finished download with one byte flipped in one piece, checked and
        repaired from a Metalink (1 MiB SHA-256 pieces and the file's SHA-256)
        whose one mirror is the harness's unthrottled nginx serving the good
        file.  Every run starts from a fresh copy of the damaged file, synced
        before the clock starts (no writeback of it inside a run; it is read
        from the page cache).  Rows: `rangeget verify --repair`, aria2c -M with
        --check-integrity, and the same copy read once by `sha256sum` and by
        `openssl dgst -sha256` (the yardsticks: coreutils' SHA-256 is software,
        OpenSSL's uses the CPU's SHA instructions).  Per run: what nginx sent, and rangeget's --json."""
        size, piece = self.pick(sc["size"]), sc["piece"]
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        flip_piece = -(-size // piece) * 3 // 8
        flip_at = flip_piece * piece + piece // 2
        damaged, damaged_sha = altered_copy(src, "repair-flip", flip_at=flip_at)
        server = sc["server"]
        why = self.start_servers([server])
        if why:
            return dict(skipped="skipped: " + why, size=size)
        tools, notes = self.tools_for(sc)
        url = f"{self.base_url(server)}/{fname}"
        meta = write_metalink(os.path.join(WORK, f"{name}.meta4"), src, sha, [url], piece=piece)
        access = self.logs[server]
        timeout = self.timeout_for(size / (100 * MiB))
        allowance = sc["allowance"]
        yardstick = sc["ideal_tool"]  # (the ideal: its median wall)

        def fn(tool, r):
            out_dir = self.out_dir(tool)
            path = os.path.join(out_dir, fname)
            shutil.copyfile(damaged, path)
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            offset = log_size(access)
            res = run_process(repair_command(tool, self.rg, sc["n"], meta, path), timeout, out_log)
            res["tail"] = last_line(out_log)
            if tool in READERS:  # ok: it read the damaged copy whole (its digest is the damaged file's)
                digest = open(out_log, errors="replace").read().splitlines()[1:2]
                why = (timed_out(res) if res["timeout"] else f"exit {res['rc']}" if res["rc"] else
                       "" if digest and damaged_sha in digest[0].replace("=", " ").split()
                       else "digest not the damaged file's")
                res["ok"], res["why"] = not why, why
                shutil.rmtree(out_dir, ignore_errors=True)
                return res
            self.check(res, path, size, sha)
            res["flipped"] = str(flip_piece)
            left = sorted(set(os.listdir(out_dir)) - {fname})
            if left:
                res["left"] = ", ".join(left)
            time.sleep(0.3)  # requests the tool cut are logged when nginx sees the close
            entries = log_entries(access, offset)
            served = sum(e[2] for e in entries)
            res.update(conns=len({e[0] for e in entries}), protocols=sorted({e[1] for e in entries}),
                       requests=len(entries), served_kib=served / 1024, served=served / size,
                       one_piece=res["ok"] and served <= piece + allowance)
            js = json_summary(out_log) if base_tool(tool) == "rangeget" else None
            if js:
                res["bad_pieces"] = ",".join(map(str, js.get("badPieces") or [])) or "none"
                if js.get("bytesFetched") is not None:
                    res["fetched_kib"] = js["bytesFetched"] / 1024
            elif base_tool(tool) == "rangeget":
                res["bad_pieces"] = "no --json summary"
            shutil.rmtree(out_dir, ignore_errors=True)
            return res

        warm_page_cache(src)
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        for t, runs in results.items():
            left = "; ".join(dict.fromkeys(x["left"] for x in runs if x.get("left")))
            if left:
                notes[t] = "; ".join(x for x in (notes.get(t), f"left in the directory: {left}") if x)
        walls = [x["wall"] for x in results.get(yardstick, []) if x["ok"]]
        return dict(results=results, notes=notes, ideal=statistics.median(walls) if walls else None, size=size,
                    timeout=timeout,
                    extra=f"byte {flip_at} (piece {flip_piece}) flipped, allowance {allowance // 1024} KiB")
