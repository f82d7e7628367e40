"""Issue 41's scenarios, mixed into Bench: the connection count rangeget learns
(`-n auto`) against every fixed count in the same rounds (auto_count), and a
download from expiring signed URLs refreshed by `--refresh-cmd`
(expiring_urls).  Each returns what Bench's other kinds return (the runs per
tool, notes, ideal, size), plus `derived`: the numbers its goals need that
span several rows (the best fixed count, the fewest within 3% of it)."""
import os
import re
import shutil
import statistics
import time
import urllib.request

from .common import HERE, LOGS, MiB, WORK
from .measure import last_line, make_room, run_process, warm_page_cache
from .servers import data_file, start_serve, stop_group
from .tools import FIXED_COUNTS, base_tool, slug
from .verified import json_summary

REFRESH_SCRIPT = os.path.join(HERE, "refresh-url.sh")
# A fixed count within this fraction of the best fixed count's median wall
# counts as as good as the best (goal (b): the fewest such count, F).
WITHIN = 0.03


def count_of(tool):
    """The -n argument of an auto_count row: "auto" for rangeget, N for `rangeget -n N`."""
    m = re.fullmatch(r"rangeget -n (\d+)", tool)
    return m.group(1) if m else "auto"


def serve_reports(path):
    """[(seconds since the first request, {key: int})] from `rangeget serve
    --report-every`'s lines `report t=S bytes=N signed=N forbidden=N over-limit=N`."""
    reports = []
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return reports
    for line in lines:
        if not line.startswith("report "):
            continue
        fields = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
        try:
            reports.append((float(fields.pop("t")), {k: int(v) for k, v in fields.items()}))
        except (KeyError, ValueError):
            continue
    return reports


def bytes_at(reports, t):
    """Body bytes the server had sent t seconds after the first request,
    interpolated between its reports."""
    before = [(s, r["bytes"]) for s, r in reports if s <= t]
    after = [(s, r["bytes"]) for s, r in reports if s > t]
    if not before:
        return 0
    if not after:
        return before[-1][1]
    (s0, b0), (s1, b1) = before[-1], after[0]
    return b0 + (b1 - b0) * (t - s0) / (s1 - s0)


def rate_after(reports, start):
    """(rate in bytes/s from `start` seconds after the first request to the
    last byte, the time of the last byte) from the server's reports; (None,
    end) when the last byte went before `start`.  The last byte's time is the
    first report with the final count (within one report interval)."""
    if not reports:
        return None, None
    final = reports[-1][1]["bytes"]
    end = next(s for s, r in reports if r["bytes"] >= final)
    if end <= start:
        return None, end
    return (final - bytes_at(reports, start)) / (end - start), end


def connection_count(summary):
    """rangeget's --json `connectionCount` ({mode, settled, peak, reason}), or {}."""
    value = (summary or {}).get("connectionCount")
    return value if isinstance(value, dict) else {}


class AdaptiveDownloads:
    """Mixed into Bench (runner.py): self.rounds, self.check, self.out_dir, ..."""

    def scenario_url(self, sc, fname):
        """For a scenario on nginx or a relay: (url, "") once the server runs, or
        (None, why).  A `serve` scenario starts its server per run instead."""
        if sc["server"] == "serve":
            return None, ""
        why = self.start_servers([sc["server"]])
        return (None, why) if why else (f"{self.base_url(sc['server'])}/{fname}", "")

    def scenario_file(self, sc):
        """A one-file scenario's setup: (dict(size, src, sha, name, url, tools,
        notes), None) with its server running, or (None, the result that says
        why it is skipped)."""
        size = self.pick(sc["size"])
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        url, why = self.scenario_url(sc, fname)
        if why:
            return None, dict(skipped="skipped: " + why, size=size)
        tools, notes = self.tools_for(sc)
        return dict(size=size, src=src, sha=sha, name=fname, url=url, tools=tools, notes=notes), None

    def auto_count(self, name, sc):
        """`rangeget -n auto` (the row `rangeget`) and `rangeget -n N` for every N
        of FIXED_COUNTS, in the same shuffled rounds, every output checked;
        --json read for `connectionCount`.  The ideal is the best fixed count's
        median wall.  A `serve` server runs with `--report-every 0.1`: bytes
        served and 503s per run from its last report, and with
        sc["change_after"] each run's rate after the change + settle seconds
        (rate_after)."""
        setup, skipped = self.scenario_file(sc)
        if skipped:
            return skipped
        size, src, sha, fname, url = (setup[k] for k in ("size", "src", "sha", "name", "url"))
        tools, notes = setup["tools"], setup["notes"]
        timeout = self.timeout_for(sc["slowest"](size))
        change = sc.get("change_after")

        def fn(tool, r):
            serve, serve_log = None, os.path.join(LOGS, f"{name}-serve-{slug(tool)}-{r + 1}.log")
            out_dir = self.out_dir(tool)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            try:
                target = url
                if sc["server"] == "serve":  # fresh per run: the change's clock starts at its first request
                    serve, port = start_serve(self.rg, sc["serve"] + ["--report-every", "0.1"],
                                              log_name=os.path.basename(serve_log))
                    if not serve:
                        return dict(ok=False, why=port, wall=0, cpu=0, rss=None)
                    target = f"http://127.0.0.1:{port}/{fname}"
                tls = self.ca is not None and target.startswith("https:")
                cmd = [self.rg, "-q", "--json", "-n", count_of(tool), "-o", os.path.join(out_dir, fname),
                       *(["--cacert", self.ca] if tls else []), target]
                res = run_process(cmd, timeout, out_log)
                res["tail"] = last_line(out_log)
                self.check(res, os.path.join(out_dir, fname), size, sha)
                count = connection_count(json_summary(out_log))
                res["mode"] = count.get("mode")
                res["settled"], res["peak"] = count.get("settled"), count.get("peak")
                res["count_reason"] = count.get("reason")
            finally:
                stop_group(serve)  # (its last report line is written as it stops)
                shutil.rmtree(out_dir, ignore_errors=True)
            reports = serve_reports(serve_log) if serve else []
            if reports:
                res["served"] = reports[-1][1]["bytes"] / size
                res["over_limit"] = reports[-1][1].get("over-limit")
            if change:
                rate, end = rate_after(reports, change + sc["settle"])
                res["rate_after"] = rate / 1e6 if rate else None
                res["last_byte_s"] = end
            return res

        warm_page_cache(src)
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        for t, runs in results.items():
            if t == "rangeget" and runs and all(x.get("settled") is None for x in runs):
                notes[t] = "; ".join(x for x in (notes.get(t), "no `connectionCount` in --json") if x)
        derived, best = self.count_goals(sc, results)
        for runs in results.values():  # the column "wall / best fixed"
            for x in runs:
                x["to_best"] = x["wall"] / best if best and x["ok"] else None
        extra = f"best fixed count: {derived['best_text']}" if best else "no fixed count had an ok run"
        derived.pop("best_text", None)
        return dict(results=results, notes=notes, ideal=best, size=size, timeout=timeout, derived=derived,
                    extra=extra)

    def count_goals(self, sc, results):
        """The numbers auto_count's goals need: (derived, the best fixed median
        wall or None).  derived[key] = dict(value, target, target_text, why)."""
        def median(tool, key):
            values = [x[key] for x in results.get(tool, []) if x["ok"] and x.get(key) is not None]
            return statistics.median(values) if values else None

        fixed = {n: median(f"rangeget -n {n}", "wall") for n in FIXED_COUNTS}
        fixed = {n: w for n, w in fixed.items() if w is not None}
        auto_runs = results.get("rangeget", [])
        derived = {}
        if not fixed:
            why = "no fixed count had an ok run"
            return {k: dict(value=None, why=why) for k in ("to_best", "settled", "peak", "rate_after")}, None
        best_n = min(fixed, key=fixed.get)
        best = fixed[best_n]
        few = min(n for n, w in fixed.items() if w <= (1 + WITHIN) * best)
        derived["best_text"] = (f"-n {best_n}, {best:.2f} s; the fewest within {WITHIN:.0%} of it: -n {few} "
                                f"({fixed[few]:.2f} s)")
        auto_wall = median("rangeget", "wall")
        derived["to_best"] = dict(value=auto_wall / best if auto_wall else None, why="rangeget had no ok run")
        settled = median("rangeget", "settled")
        derived["settled"] = dict(value=settled, target=1.5 * few + 1, target_text=f"1.5 x {few} + 1 = {1.5 * few + 1:g}",
                                  why="no `connectionCount.settled` in rangeget's --json")
        peaks = [x["peak"] for x in auto_runs if x.get("peak") is not None]
        derived["peak"] = dict(value=max(peaks) if peaks else None, target=sc.get("max_per_host", 16),
                               why="no `connectionCount.peak` in rangeget's --json")
        if sc.get("change_after"):
            rates = {n: median(f"rangeget -n {n}", "rate_after") for n in FIXED_COUNTS}
            rates = {n: v for n, v in rates.items() if v}
            mine = median("rangeget", "rate_after")
            if rates and mine:
                top = max(rates, key=rates.get)
                derived["rate_after"] = dict(value=mine / rates[top], why="")
                derived["best_text"] += f"; best rate after the change + {sc['settle']:g} s: -n {top}, " \
                                        f"{rates[top]:.1f} MB/s"
            else:
                derived["rate_after"] = dict(value=None, why="no rate after the change (no ok run, or every "
                                                              "run ended before change + settle)")
        return derived, best

    def expiring_urls(self, name, sc):
        """rangeget from an expiring signed URL, refreshing it with
        `--refresh-cmd "Benchmarks/refresh-url.sh SIGN_URL"` (rangeget appends
        the old URL).  A fresh `rangeget serve --expiring-urls` per run, whose
        report lines (--report-every) give the signed URLs issued (less the
        harness's own first one: the refresh invocations), the 403s and the
        body bytes served."""
        size = self.pick(sc["size"])
        src, sha = data_file(f"rand-{size // MiB}M.bin", size)
        fname = os.path.basename(src)
        tools, notes = self.tools_for(sc)
        timeout = self.timeout_for(sc["ideal"](size))

        def fn(tool, r):
            serve_log = os.path.join(LOGS, f"{name}-serve-{slug(tool)}-{r + 1}.log")
            out_dir = self.out_dir(tool)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            serve, port = start_serve(self.rg, sc["serve"] + ["--report-every", "0.2"],
                                      log_name=os.path.basename(serve_log))
            if not serve:
                return dict(ok=False, why=port, wall=0, cpu=0, rss=None)
            try:
                sign = f"http://127.0.0.1:{port}/sign/{fname}"
                first = urllib.request.urlopen(sign, timeout=10).read().decode().strip()
                cmd = [self.rg, "-q", "--json", "-n", str(sc["n"]), "--refresh-cmd", f"{REFRESH_SCRIPT} {sign}",
                       "-o", os.path.join(out_dir, fname), first]
                res = run_process(cmd, timeout, out_log)
                res["tail"] = last_line(out_log)
                self.check(res, os.path.join(out_dir, fname), size, sha)
            finally:
                stop_group(serve)  # (its last report line is written as it stops)
                shutil.rmtree(out_dir, ignore_errors=True)
            reports = serve_reports(serve_log)
            last = reports[-1][1] if reports else {}
            if base_tool(tool) == "rangeget" and "signed" in last:
                res["refreshes"] = last["signed"] - 1
                res["forbidden"] = last["forbidden"]
                res["served"] = last["bytes"] / size
            res["expiries"] = res["wall"] / sc["lifetime"]
            bound = size + sc["n"] * sc["in_flight"]
            res["bytes_ok"] = res["ok"] and "bytes" in last and last["bytes"] <= bound
            res["refresh_ok"] = res["ok"] and "signed" in last and res["refreshes"] <= res["expiries"] + 1
            return res

        warm_page_cache(src)
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, name)
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        return dict(results=results, notes=notes, ideal=sc["ideal"](size), size=size, timeout=timeout)
