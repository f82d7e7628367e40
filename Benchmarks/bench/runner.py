"""Bench: runs each kind of scenario (a download, a resume, a list of files,
memory, and the verified downloads of verified.py) with every tool, in
shuffled rounds, and checks every output."""
import os
import random
import shutil
import statistics
import time

from .common import DATA, LOGS, MiB, WORK, log, which
from .filesystems import FreshFileSystem, SlowMetadataFileSystem, slow_flush_library
from .measure import last_line, make_room, med, run_process, sha256_of, timed_out, warm_page_cache
from .report import fmt, server_label
from .scenarios import SCENARIOS
from .servers import (NGINX_SERVERS, RELAYS, data_file, delivered_rate, file_set, log_entries, log_size,
                      served_bytes, start_relay, start_serve, stop_group)
from .tools import AXEL_TLS_NOTE, BULK_NOTES, STREAMS, base_tool, bulk_command, command, row_order, slug
from .adaptive import AdaptiveDownloads
from .traced import TracedDownloads
from .verified import VerifiedDownloads


class Bench(VerifiedDownloads, AdaptiveDownloads, TracedDownloads):
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.runs = args.runs
        self.rg = None
        self.rg_why = ""
        self.rg_help = ""
        self.serve_why = None  # None = not probed yet; "" = available
        self.nginx = None
        self.ports = {}
        self.logs = {}
        self.loopback_rss = {}  # tool -> median RSS of the loopback run (for memory)
        self.ca = None  # the self-signed certificate of the TLS servers (make_certificate)
        self.no_tls_why = ""
        self.raw = []
        self.built = False  # this run built the binary (from git state self.git: (short HEAD, dirty))
        self.git = ("", False)

    def nginx_server(self, server):
        return RELAYS[server]["backend"] if server in RELAYS else server

    def base_url(self, server):
        scheme = "https" if NGINX_SERVERS[self.nginx_server(server)].get("tls") else "http"
        return f"{scheme}://127.0.0.1:{self.ports[server]}"

    def start_servers(self, names):
        """Starts the relays among names (once; they run to the end).  Returns why
        a server is missing, or ""."""
        for s in names:
            backend = self.nginx_server(s)
            if backend not in self.ports:
                return f"no server {backend} ({self.no_tls_why or 'not started'})"
            if s in RELAYS and s not in self.ports:
                proc, port = start_relay(s, self.ports[backend])
                if not proc:
                    return port
                self.ports[s] = port
                log(f"relay {s} ({RELAYS[s]['label']}) on 127.0.0.1:{port} -> {backend}")
        return ""

    def pick(self, pair):
        return pair[1] if self.quick else pair[0]

    def tools_for(self, sc):
        """(tools that run, {tool: note for the table})."""
        wanted = [t for t in row_order(sc)
                  if not self.args.tools or t in self.args.tools or base_tool(t) in self.args.tools]
        notes, run = {}, []
        for t in wanted:
            if t in sc.get("skip", {}):
                notes[t] = "skipped: " + sc["skip"][t]
            elif base_tool(t) == "rangeget" and not self.rg:
                notes[t] = "not ok: " + self.rg_why
            elif base_tool(t) != "rangeget" and not which(base_tool(t)):
                notes[t] = f"skipped: {base_tool(t)} not installed"
            else:
                run.append(t)
        return run, notes

    def timeout_for(self, ideal):
        return 3 * ideal + (15 if self.quick else 30)

    def rounds(self, tools, fn, label, runs=None):
        """Runs fn(tool, round) for every round, the tools in another order each
        round: shuffled, seeded by the scenario and the round (the same order in
        every set).  A rotation kept each tool after the same one in every round,
        and in `small` a run's wall depends on the files the run before it
        deleted: the build under test always followed wget2, its baseline always
        followed it (4 sets in a row: +4% to +27% against its baseline, with the
        same code on that path, the same CPU on tmpfs over 30 runs, and -4% on a
        fresh file system).  In --quick a tool that timed out is not repeated.
        runs: rounds, when the scenario needs more than --runs (pairs)."""
        results = {t: [] for t in tools}
        gave_up = set()
        runs = runs or self.runs
        for r in range(runs):
            order = list(tools)
            random.Random(f"{label} {r}").shuffle(order)
            for t in order:
                if t in gave_up:
                    continue
                res = fn(t, r)
                results[t].append(res)
                self.raw.append(dict(scenario=label, tool=t, round=r + 1, **res))
                log(f"  [{label} {r + 1}/{runs}] {t:8s} {'ok' if res['ok'] else 'NOT OK':6s} "
                    f"{res['wall']:7.2f} s  cpu {res['cpu']:6.2f} s  rss {fmt(res['rss'], 1):>7s} MiB"
                    + (f"  served {res['served']:.3f}x" if res.get("served") is not None else "")
                    + (f"  ({res['why']})" if res["why"] else ""))
                if self.quick and res.get("timeout"):
                    gave_up.add(t)
        return results, gave_up

    def out_dir(self, tool):
        d = os.path.join(WORK, "out", slug(tool))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def check(self, res, path, size, sha):
        """Sets res['ok'] and res['why'] from the exit, the timeout and the output's hash."""
        why = ""
        if res["timeout"]:
            why = timed_out(res)
        elif res["rc"] != 0:
            why = f"exit {res['rc']}" + (f": {res['tail']}" if res.get("tail") else "")
        elif not os.path.exists(path):
            why = "no output file"
        elif os.path.getsize(path) != size:
            why = f"size {os.path.getsize(path)} != {size}"
        elif sha256_of(path) != sha:
            why = "SHA-256 mismatch"
        res["ok"], res["why"] = not why, why
        return res

    def check_digest(self, res, path, sha):
        """A stream's check: the exit, the timeout and the SHA-256 its reader computed."""
        why = ""
        if res["timeout"]:
            why = timed_out(res)
        elif res["rc"] != 0:
            why = f"exit {res['rc']}" + (f": {res['tail']}" if res.get("tail") else "")
        elif not os.path.exists(path) or open(path).read().split()[:1] != [sha]:
            why = "SHA-256 of the stream mismatch"
        res["ok"], res["why"] = not why, why
        return res

    def one_download(self, tool, n, urls, src, sha, size, timeout, label, r):
        out_dir = self.out_dir(tool)
        name = os.path.basename(src)
        out_log = os.path.join(LOGS, f"{label}-{slug(tool)}-{r + 1}.log")
        res = run_process(command(tool, self.rg, n, urls, out_dir, name, ca=self.ca), timeout, out_log)
        res["tail"] = last_line(out_log)
        if tool in STREAMS:
            self.check_digest(res, os.path.join(out_dir, name + ".sha256"), sha)
        else:
            self.check(res, os.path.join(out_dir, name), size, sha)
        shutil.rmtree(out_dir, ignore_errors=True)
        return res

    # -- the scenario kinds --
    def download(self, name, sc, size=None, label=None):
        size = size or self.pick(sc["size"])
        label = label or name
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        tools, notes = self.tools_for(sc)
        ideal = sc["ideal"](size) if sc["ideal"] else None
        timeout = self.timeout_for(ideal if ideal else size / (100 * MiB))
        server = sc["server"]
        one_url = sc.get("one_url", ())
        names = server if isinstance(server, list) else [server]
        if server != "serve":
            why = self.start_servers(names)
            if why:
                return dict(skipped="skipped: " + why, size=size)
            if "axel" in tools and any(self.base_url(s).startswith("https:") for s in names):
                notes["axel"] = AXEL_TLS_NOTE
        for t in tools:
            if base_tool(t) in one_url and server != "serve":
                notes[t] = f"one URL only: the fastest mirror ({server_label(names[-1])})"
        for t, note in sc.get("notes", {}).items():
            if t in tools:
                notes[t] = "; ".join(x for x in (notes.get(t), note) if x)
        if server == "serve":
            if self.serve_why is None:
                proc, why = start_serve(self.rg, [])
                self.serve_why = "" if proc else why
                stop_group(proc)
            if self.serve_why:
                return dict(skipped="skipped: rangeget serve unavailable (" + self.serve_why + ")",
                            size=size)

        def fn(tool, r):
            serve = None
            try:
                if server == "serve":  # fresh server per run: fault counters start at zero
                    serve, port = start_serve(self.rg, sc["serve"])
                    if not serve:
                        return dict(ok=False, why=port, wall=0, cpu=0, rss=None)
                    urls = [f"http://127.0.0.1:{port}/{fname}"]
                    return self.one_download(tool, sc["n"], urls, src, sha, size, timeout, label, r)
                urls = [f"{self.base_url(s)}/{fname}" for s in names]
                if base_tool(tool) in one_url:
                    urls = urls[-1:]
                logs = [self.logs[self.nginx_server(s)] for s in names]
                offsets = [log_size(l) for l in logs]
                res = self.one_download(tool, sc["n"], urls, src, sha, size, timeout, label, r)
                # (read after the hash check: by then nginx has logged the last requests)
                entries = [log_entries(l, o) for l, o in zip(logs, offsets)]
                res["conns"] = sum(len({e[0] for e in es}) for es in entries)
                res["protocols"] = sorted({e[1] for es in entries for e in es})
                res["per_server"] = [(len({e[0] for e in es}), sum(e[2] for e in es)) for es in entries]
                res["delivered"] = delivered_rate([e for es in entries for e in es])
                return res
            finally:
                stop_group(serve)

        # The first round's first tool read the file from the disk, every
        # later run from the page cache (loopback's 1 GiB: 4.65 s against
        # about 1.2, the same tool first in every run, so its median moved).
        warm_page_cache(src)
        # It also had to reclaim the page cache it wrote into (loopback:
        # 3.0 and 3.2 s of CPU against about 1.1 in two sets, the build
        # under test first each time); the later runs write into the pages
        # the run before them freed by removing its output.
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, label)
        if ideal is None and results.get(sc.get("ideal_tool", "curl")):
            walls = [x["wall"] for x in results[sc.get("ideal_tool", "curl")] if x["ok"]]
            ideal = statistics.median(walls) if walls else None
        for t in gave_up:
            notes[t] = (notes.get(t, "") + "; " if t in notes else "") + "timed out: not repeated (--quick)"
        return dict(results=results, notes=notes, ideal=ideal, size=size, timeout=timeout)

    def resume(self, name, sc):
        """sc["kills"] runs (default 1), each sent sc["interrupt"] kill_after s after
        it started, then the same command run to completion.  Bytes served are over
        all the runs; wall and CPU are those of all the runs together."""
        size = self.pick(sc["size"])
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        tools, notes = self.tools_for(sc)
        ideal = sc["ideal"](size)
        timeout = self.timeout_for(ideal)
        after = sc["kill_after"] * size / sc["size"][0]
        kills = sc.get("kills", 1)
        url = f"http://127.0.0.1:{self.ports[sc['server']]}/{fname}"
        access = self.logs[sc["server"]]
        sig = sc["interrupt"]

        def fn(tool, r):
            out_dir = self.out_dir(tool)
            if tool == "lftp":
                notes["lftp"] = "reruns with `pget -c`"
            offset = os.path.getsize(access) if os.path.exists(access) else 0
            # lftp's `pget -c` without a status file corrupts the output, so lftp's
            # first run is without -c (as a user would type it) and only the reruns have it.
            # The interrupted runs are our direct children, without GNU time (rss=False):
            # the SIGKILL to the group would kill time and lose the killed run's CPU.
            # Their peak RSS is not measured; the RSS column is the last run's.
            interrupted, whys, done = [], [], False
            for k in range(kills):
                which_run = "first run" if kills == 1 else f"interrupted run {k + 1}/{kills}"
                logk = os.path.join(LOGS, f"{name}-{tool}-{r + 1}{'abcdefghij'[k]}.log")
                run = run_process(command(tool, self.rg, sc["n"], [url], out_dir, fname, resume=k > 0),
                                  after + 15, logk, interrupt_after=after, interrupt=sig, rss=False)
                run["log"] = logk
                interrupted.append(run)
                if run["timeout"]:
                    whys.append(f"{which_run} " + timed_out(run))
                elif not run["interrupted"]:
                    whys.append(f"{which_run} ended before the signal (exit {run['rc']})")
                    if run["rc"] == 0:  # it finished: nothing left to interrupt or resume
                        done = True
                        break
                elif run["forced"]:
                    whys.append(f"{which_run} ignored SIGINT for 10 s")
            if done:
                last = interrupted[-1]
                last["tail"] = last_line(last["log"])
            else:
                logz = os.path.join(LOGS, f"{name}-{tool}-{r + 1}{'abcdefghij'[kills]}.log")
                last = run_process(command(tool, self.rg, sc["n"], [url], out_dir, fname, resume=True),
                                   timeout, logz)
                last["tail"] = last_line(logz)
            self.check(last, os.path.join(out_dir, fname), size, sha)
            time.sleep(0.3)  # let nginx log the interrupted requests
            body, requests = served_bytes(access, offset)
            shutil.rmtree(out_dir, ignore_errors=True)
            runs = interrupted + ([] if done else [last])
            ok = last["ok"] and len(interrupted) == kills and all(x["interrupted"] for x in interrupted)
            return dict(ok=ok, why="; ".join(([last["why"]] if last["why"] else []) + whys),
                        wall=sum(x["wall"] for x in runs), cpu=sum(x["cpu"] for x in runs),
                        rss=None if done else last["rss"],
                        cpu_interrupted=sum(x["cpu"] for x in interrupted),
                        walls=[round(x["wall"], 3) for x in runs], served=body / size,
                        requests=requests, interrupted_rc=[x["rc"] for x in interrupted], rc=last["rc"],
                        timeout=any(x["timeout"] for x in runs))

        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        what = f"signal after {after:.2f} s" if kills == 1 else f"signal {after:.3g} s after each start"
        return dict(results=results, notes=notes, ideal=ideal, size=size, timeout=timeout, extra=what)

    def bulk(self, name, sc):
        """A list of files (bulk, bulk-distant, bulk-mixed, small, list-20k): every tool fetches
        the whole list into a fresh directory; every file is checked."""
        if "set" in sc:
            files = file_set(sc["set"], self.pick(sc["files"]), sc["file_size"])
        else:
            files = [data_file(f"bulk/f{i:03d}.bin", sc["file_size"]) for i in range(self.pick(sc["files"]))]
        if "large" in sc:  # bulk-mixed: one large file heads the list
            large = self.pick(sc["large"])
            files.insert(0, data_file(f"rand-{large // MiB}M.bin", large))
        count = len(files)
        sizes = {p: os.path.getsize(p) for p, _ in files}
        total = sum(sizes.values())
        if sc.get("fresh_fs") and FreshFileSystem.usable():
            return dict(skipped="skipped: a fresh file system " + FreshFileSystem.usable(), size=total)
        if "slow_meta_us" in sc and SlowMetadataFileSystem.usable():
            return dict(skipped="skipped: a slow-metadata file system " + SlowMetadataFileSystem.usable(), size=total)
        tools, notes = self.tools_for(sc)
        if "rangeget" in tools and "--input-file" not in self.rg_help:
            tools.remove("rangeget")
            notes["rangeget"] = "skipped: `rangeget --help` does not mention --input-file"
        ideal = sc["ideal"](total) if sc["ideal"] else None  # None: a peer's median wall (below)
        timeout = self.timeout_for(ideal if ideal else sc["est"](count))
        serve = None
        if sc["server"] == "serve":  # one RangeServer for every run (bulk-distant)
            serve, port = start_serve(self.rg, sc["serve"])
            if not serve:
                return dict(skipped=f"skipped: rangeget serve unavailable ({port})", size=total)
            access = None
        else:
            port = self.ports[sc["server"]]
            access = self.logs[sc["server"]]
        urls = [f"http://127.0.0.1:{port}/{os.path.relpath(p, DATA)}" for p, _ in files]
        names = {os.path.basename(p) for p, _ in files}
        list_file = os.path.join(WORK, f"{name}-list.txt")
        open(list_file, "w").write("\n".join(urls) + "\n")

        def fn(tool, r):
            if sc.get("fresh_fs"):
                with FreshFileSystem() as mount:
                    return run_into(tool, r, os.path.join(mount, "out"))
            if slow_mount:
                return run_into(tool, r, os.path.join(slow_mount, "out"))
            return run_into(tool, r, self.out_dir(tool))

        def run_into(tool, r, out_dir):
            os.makedirs(out_dir, exist_ok=True)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            offset = log_size(access) if access else 0
            cmd = bulk_command(tool, self.rg, list_file, urls, out_dir)
            if "slow_flush_us" in sc:
                cmd = ["env", f"LD_PRELOAD={slow_flush_library()}", f"SLOW_FLUSH_US={sc['slow_flush_us']}"] + cmd
            if cmd[:2] == ["lftp", "-f"]:
                notes["lftp"] = "`lftp -f SCRIPT` (the same commands): the URLs exceed Linux's 128 KiB " \
                                "cap on one argument (MAX_ARG_STRLEN), so not `-c`"
            # Nothing the last tool left unwritten (its files, their removal) is
            # flushed inside this one's time: a list's durable commit is a
            # syncfs, which writes back the whole file system, and wget2,
            # aria2c, curl and lftp sync nothing before they exit.
            os.sync()
            res = run_process(cmd, timeout, out_log)
            res["tail"] = last_line(out_log)
            bad = 0
            for p, sha in files:
                out = os.path.join(out_dir, os.path.basename(p))
                if not os.path.exists(out) or os.path.getsize(out) != sizes[p] or sha256_of(out) != sha:
                    bad += 1
            why = timed_out(res) if res["timeout"] else (f"exit {res['rc']}: {res['tail']}" if res["rc"] else "")
            if bad:
                why = (why + "; " if why else "") + f"{bad} of {count} files missing or wrong"
            # anything else the tool left in the directory (a note, not a failure)
            res["leftover"] = len(set(os.listdir(out_dir)) - names)
            res["ok"], res["why"] = not why, why
            shutil.rmtree(out_dir, ignore_errors=True)
            if access:  # (read after the checks: by then nginx has logged the last requests)
                entries = log_entries(access, offset)
                res["conns"] = len({e[0] for e in entries})
                res["protocols"] = sorted({e[1] for e in entries})
                res["requests"] = len(entries)
                res["delivered"] = delivered_rate(entries)
            return res

        slow_mount = None
        try:
            if "slow_meta_us" in sc:
                with SlowMetadataFileSystem(sc["slow_meta_us"]) as slow_mount:
                    results, gave_up = self.rounds(tools, fn, name)
            else:
                results, gave_up = self.rounds(tools, fn, name)
        finally:
            stop_group(serve)
        for t in results:
            if base_tool(t) in BULK_NOTES:
                notes[t] = "; ".join(x for x in (notes.get(t), BULK_NOTES[base_tool(t)]) if x)
        for t in gave_up:
            notes[t] = notes.get(t, "") + "; timed out: not repeated (--quick)"
        for t, runs in results.items():
            left = max([x.get("leftover", 0) for x in runs] or [0])
            if left:
                notes[t] = "; ".join(x for x in (notes.get(t), f"left up to {left} other entries in the directory") if x)
        if ideal is None and results.get(sc.get("ideal_tool")):
            walls = [x["wall"] for x in results[sc["ideal_tool"]] if x["ok"]]
            ideal = statistics.median(walls) if walls else None
        return dict(results=results, notes=notes, ideal=ideal, size=total, timeout=timeout,
                    extra=f"{count} files", count=count)

    def memory(self, name, sc, done):
        size = self.pick(sc["size"])
        small = {}
        if "loopback" in done:
            small = self.loopback_rss
        else:
            r = self.download("loopback", dict(SCENARIOS["loopback"], variants=()), size=size, label="memory-1x")
            small = {t: med([x["rss"] for x in v if x["ok"] and x["rss"] is not None])
                     for t, v in r.get("results", {}).items()}
        big = self.download(name, dict(sc, ideal=None), size=size * sc["factor"], label="memory-4x")
        big["small_rss"] = small
        big["small_size"] = size
        return big
