"""What `--trace` costs (TracedDownloads.trace_overhead): the same loopback
download with and without `--trace FILE`, as interleaved pairs (both in every
round, in a shuffled order), judged by the median of the pairs' wall ratios
(a pair shares the machine's state of that moment), and the trace's size."""
import os
import statistics

from .common import LOGS, MiB, WORK
from .measure import last_line, make_room, run_process, warm_page_cache
from .tools import command, slug

TRACED = "rangeget (--trace)"


class TracedDownloads:
    def trace_overhead(self, name, sc):
        setup, skipped = self.scenario_file(sc)
        if skipped:
            return skipped
        size, src, sha, fname, url = (setup[k] for k in ("size", "src", "sha", "name", "url"))
        tools, notes = setup["tools"], setup["notes"]
        timeout = self.timeout_for(size / (100 * MiB))
        trace = os.path.join(WORK, f"{name}.trace.json")

        def fn(tool, r):
            out_dir = self.out_dir(tool)
            out_log = os.path.join(LOGS, f"{name}-{slug(tool)}-{r + 1}.log")
            cmd = command("rangeget", self.rg, sc["n"], [url], out_dir, fname)
            if tool == TRACED:
                if os.path.exists(trace):
                    os.unlink(trace)
                cmd = cmd[:1] + ["--trace", trace] + cmd[1:]
            res = run_process(cmd, timeout, out_log)
            res["tail"] = last_line(out_log)
            self.check(res, os.path.join(out_dir, fname), size, sha)
            if tool == TRACED:
                res["trace_mb"] = os.path.getsize(trace) / 1e6 if os.path.exists(trace) else None
                if res["ok"] and res["trace_mb"] is None:
                    res["ok"], res["why"] = False, "no trace written"
            res["pair"] = r
            return res

        warm_page_cache(src)
        make_room(os.path.join(WORK, "out"), size)
        results, gave_up = self.rounds(tools, fn, name, runs=max(self.runs, sc["pairs"]))
        for t in gave_up:
            notes[t] = "timed out: not repeated (--quick)"
        plain = {x["pair"]: x["wall"] for x in results.get("rangeget", []) if x["ok"]}
        traced = {x["pair"]: x["wall"] for x in results.get(TRACED, []) if x["ok"]}
        ratios = [traced[r] / plain[r] for r in sorted(plain) if r in traced and plain[r] > 0]
        sizes = [x["trace_mb"] for x in results.get(TRACED, []) if x.get("trace_mb") is not None]
        derived = {
            "pair_ratio": dict(value=round(statistics.median(ratios), 3) if ratios else None,
                               why="no round with both rows ok"),
            "trace_mb": dict(value=round(max(sizes), 2) if sizes else None, why="no trace written")}
        extra = (f"{len(ratios)} pairs; wall ratios (traced / plain), in round order: "
                 + ", ".join(f"{x:.3f}" for x in ratios)) if ratios else "no pair"
        plain_walls = list(plain.values())
        return dict(results=results, notes=notes, ideal=statistics.median(plain_walls) if plain_walls else None,
                    size=size, timeout=timeout, derived=derived, extra=extra)
