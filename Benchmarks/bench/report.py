"""Reporting: the markdown table and CSV rows of a scenario, its goals checked
(met, MISSED or not checked), the goals missed, and the results files
(Report), named after the binary measured (binary_identity)."""
import csv
import datetime
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys

from . import tools
from .common import GiB, MiB, REPO, RESULTS, which
from .measure import med, sha256_of
from .scenarios import SCENARIOS
from .servers import NGINX_SERVERS, RELAYS
from .tools import TOOLS, base_tool, row_order


def fmt(x, nd=2):
    if x is None:
        return "-"
    return f"{x:.3f}" if nd == 2 and abs(x) < 1 else f"{x:.{nd}f}"


def human(size):
    return f"{size / GiB:g} GiB" if size >= GiB else f"{size / MiB:g} MiB"


def decisive(v, op, target):
    """v with 3 significant digits and at least as many decimals as target, or more
    until the printed number is on the same side of target as v itself (0.945 never
    prints as 0.95 against >= 0.95; 1.006 not as 1.01 against <= 1.005)."""
    met = v >= target if op == ">=" else v <= target
    least = len(f"{target:g}".partition(".")[2]) if "e" not in f"{target:g}" else 0
    for digits in range(3, 10):
        decimals = max(digits - 1 - (int(math.floor(math.log10(abs(v)))) if v else 0), 0, least)
        text = f"{v:.{decimals}f}"
        p = float(text)
        if (p >= target if op == ">=" else p <= target) == met and (met or p != target):
            return text
    return repr(v)


def check_goals(name, sc, out):
    """Every goal of the scenario, checked: a list of dicts with goal (its text),
    value (as printed), outcome ("met", "MISSED" or "not checked") and why."""
    goals = [dict(kind="ok", label="rangeget ok in every run", op="", target=None)] + sc.get("goals", [])
    results = []

    def add(g, outcome, value=None, why="", shown=None, target_shown=None):
        """value: the measured number (shown with decisive digits); shown: a text instead."""
        target = target_shown or (goal_number(g["target"]) if g["target"] is not None else g.get("target_text", ""))
        if value is not None:
            shown = decisive(value, g["op"], g["target"])
        results.append(dict(goal=g["label"] + (f" {g['op']} {target}" if g["op"] else ""), label=g["label"],
                            op=g["op"], target=target, value=shown or "", numeric=value is not None,
                            outcome=outcome, why=why))

    if out.get("skipped"):
        for g in goals:
            add(g, "not checked", why=out["skipped"])
        return results
    res, notes = out["results"], out["notes"]
    runs = res.get("rangeget")
    if runs is None:
        for g in goals:
            if "rangeget" in notes:  # skipped by the harness or not built: rangeget cannot
                add(g, "MISSED", why=notes["rangeget"], shown="not run")
            else:
                add(g, "not checked", why="rangeget not run (--tools)")
        return results
    good = [x for x in runs if x["ok"]]

    def median(tool, key):
        return med([x[key] for x in res.get(tool, []) if x["ok"] and x.get(key) is not None])

    for g in goals:
        kind = g["kind"]
        if kind == "ok":
            timeouts = sum(1 for x in runs if x.get("timeout"))
            shown = f"{len(good)}/{len(runs)}" + (f" ({timeouts} timed out)" if timeouts else "")
            add(g, "met" if runs and len(good) == len(runs) else "MISSED", shown=shown)
            continue
        if kind == "every":  # a per-run flag, over every run (ok or not) of its tool
            mine = res.get(g["tool"], [])
            if not mine:
                add(g, "MISSED", why=f"{g['tool']} not run", shown="not run")
                continue
            n = sum(1 for x in mine if x.get(g["key"]))
            add(g, "met" if n == len(mine) else "MISSED", shown=f"{n}/{len(mine)}")
            continue
        if not good:
            add(g, "MISSED", why="rangeget had no ok run", shown="no ok run")
            continue
        if kind == "derived":  # a number the scenario's kind computed across its rows (out["derived"])
            d = out.get("derived", {}).get(g["key"]) or dict(value=None, why="not computed")
            if d["value"] is None:
                add(g, "MISSED", why=d.get("why", ""), shown="none")
                continue
            if d.get("target") is not None:
                g = dict(g, target=d["target"])
            value = d["value"]
            met = value >= g["target"] if g["op"] == ">=" else value <= g["target"]
            add(g, "met" if met else "MISSED", value, target_shown=d.get("target_text"))
            continue
        if kind == "value":
            value = median(g["tool"], g["key"])
            if value is None:
                add(g, "MISSED", why=f"{g['tool']} had no ok run with a value", shown="none")
                continue
        elif kind == "added_cpu":  # per GiB, against openssl's SHA-256 on this machine
            speed = out.get("sha256_s_per_gib")
            mine, ref = median(g["tool"], "cpu"), median(g["other"], "cpu")
            if not speed or mine is None or ref is None:
                add(g, "not checked" if speed is None or ref is None else "MISSED", shown="none",
                    target_shown=f"{g['factor']:g} x openssl sha256 s/GiB",
                    why="openssl speed not measured" if not speed else "a row without an ok run")
                continue
            value = (mine - ref) / (out["size"] / GiB)
            limit = round(g["factor"] * speed, 3)
            g = dict(g, target=limit)
            add(g, "met" if value <= limit else "MISSED", value,
                target_shown=f"{g['factor']:g} x openssl sha256 {speed:.3f} = {limit:.3f}")
            continue
        elif kind == "fraction":
            wall = median("rangeget", "wall")
            if out["ideal"] is None:
                add(g, "not checked", why="no ideal (its yardstick has no ok run)")
                continue
            value = out["ideal"] / wall
        elif kind == "ratio":
            other = g["other"]
            if other not in res:
                add(g, "not checked", why=f"{other} not run" + (f" ({notes[other]})" if other in notes else ""))
                continue
            ref = median(other, g["key"])
            if not ref:
                add(g, "not checked", why=f"{other} had no ok run")
                continue
            mine = median(g["tool"], g["key"])
            if mine is None:
                add(g, "MISSED", why=f"{g['tool']} had no ok run", shown="no ok run")
                continue
            value = mine / ref
        elif kind == "rss_over":
            mine, ref = median(g["tool"], "rss"), median(g["other"], "rss")
            if mine is None or ref is None:
                add(g, "MISSED" if mine is None else "not checked", why="no peak RSS measured", shown="none")
                continue
            value = mine - ref
        elif kind == "files_rate":  # the same list: files/s ratio = the other's wall / rangeget's
            other = g["other"]
            if other not in res:
                add(g, "not checked", why=f"{other} not run" + (f" ({notes[other]})" if other in notes else ""))
                continue
            ref = median(other, "wall")
            if not ref:
                add(g, "not checked", why=f"{other} had no ok run")
                continue
            value = ref / median("rangeget", "wall")
        elif kind == "peak":
            value = median("rangeget", "rss")
            if value is None:
                add(g, "MISSED", why="no peak RSS measured", shown="none")
                continue
        elif kind == "served":
            value = median("rangeget", "served")
        elif kind in ("rss", "flat"):
            small = out.get("small_rss", {}).get("rangeget")
            big = median("rangeget", "rss")
            value = small if kind == "rss" and g["at"] == "1x" else big
            at = out["small_size"] if kind == "rss" and g["at"] == "1x" else out["size"]
            g = dict(g, label=f"peak RSS (MiB) at {human(at)}" + (" (flat)" if kind == "flat" else ""))
            if kind == "flat":
                if small is None or big is None:
                    add(g, "MISSED" if big is None else "not checked", target_shown="1.2 x RSS(1x) + 2",
                        why="no peak RSS " + ("at 4x" if big is None else f"at {human(out['small_size'])}"))
                    continue
                limit = 1.2 * small + 2  # printed with the digits that put it on its side of big
                g = dict(g, target=limit)
                add(g, "met" if big <= limit else "MISSED", big,
                    target_shown=f"1.2 x {small:.1f} + 2 = {decisive(limit, '>=', big)}")
                continue
            if value is None:
                add(g, "MISSED", why="no peak RSS measured", shown="none")
                continue
        else:
            raise ValueError(kind)
        met = value >= g["target"] if g["op"] == ">=" else value <= g["target"]
        add(g, "met" if met else "MISSED", value)
    return results


def goal_number(x):
    """A goal's threshold as written in BENCHMARKS.md: 1.0, 0.95, 1.005, 20."""
    text = f"{x:g}"
    return text + ".0" if x < 10 and "." not in text else text


def split_goal(text):
    """'label <= 1.0' -> ('label', '<= 1.0'); ('label', '') without an operator."""
    m = re.match(r"(.*?) ((?:<=|>=) .*)$", text)
    return (m.group(1), m.group(2)) if m else (text, "")


def goals_line(checked):
    """'Goals: met: ...; MISSED: ...' (and what could not be checked, with why)."""
    def item(c):
        if c["outcome"] == "not checked":
            return f"{c['goal']} ({c['why']})"
        if not c["op"] and re.match(r"\d+/\d+", c["value"]):  # rangeget ok in every run: k/n
            return f"{c['label']} {c['value']}"
        if c["numeric"]:
            return f"{c['label']} {c['value']} (goal {c['op']} {c['target']})"
        return f"{c['goal']} ({c['why'] or c['value']})"
    parts = [f"met: {', '.join(item(c) for c in checked if c['outcome'] == 'met') or 'none'}",
             f"MISSED: {', '.join(item(c) for c in checked if c['outcome'] == 'MISSED') or 'none'}"]
    unchecked = [item(c) for c in checked if c["outcome"] == "not checked"]
    if unchecked:
        parts.append(f"not checked: {', '.join(unchecked)}")
    return "Goals: " + "; ".join(parts) + "."


def goal_rows(checked):
    return [dict(kind="goal", tool="rangeget", goal=c["goal"], goal_value=c["value"],
                 goal_outcome=c["outcome"], note=c["why"]) for c in checked]


def summarize(name, sc, out):
    """Returns (markdown section, csv rows as dicts, checked goals)."""
    head = f"## {name}\n\n"
    checked = check_goals(name, sc, out)
    if out.get("skipped"):
        return head + f"{human(out['size'])}, {sc['what']}.\n\n**{out['skipped']}**\n\n" + \
            goals_line(checked) + "\n", [dict(kind="tool", tool="all", runs=0, ok=0, note=out["skipped"])] + \
            goal_rows(checked), checked
    res, notes, ideal, size = out["results"], out["notes"], out["ideal"], out["size"]
    conns = f", {sc['n']} connections" if "files" not in sc else ""
    lines = [head + f"{human(size)}{', ' + out['extra'] if out.get('extra') else ''}, {sc['what']}"
             f"{conns}; {len(next(iter(res.values()), []))} rounds max, timeout {out['timeout']:.0f} s; "
             f"run {datetime.datetime.now():%H:%M}.\n",
             f"Ideal: {fmt(ideal)} s = {sc['ideal_text']}."]
    if sc.get("note"):
        lines.append(sc["note"])
    if name == "memory":
        lines.append(f"Flat = peak RSS at {human(size)} <= 1.2 x peak RSS at "
                     f"{human(out['small_size'])} + 2 MiB.")
    lines.append("")
    rg_wall = med([x["wall"] for x in res.get("rangeget", []) if x["ok"]])
    extra_cols = (["CPU s/GiB"] if sc.get("cpu_per_gib") else []) + (
        ["files/s"] if sc.get("files_per_s") else []) + (
        [f"peak RSS MiB at {human(out.get('small_size', 0))}", "flat"] if name == "memory" else []) + (
        ["bytes served / size"] if name.startswith("resume") else []) + [t for t, _ in sc.get("columns", ())]
    has_conns = any(x.get("conns") is not None for v in res.values() for x in v)
    cols = ["tool", "ok", "median wall s", "median CPU s", "median peak RSS MiB", "wall / rangeget's",
            "fraction of ideal"] + (["TCP conns"] if has_conns else []) + extra_cols + ["note"]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rows = []
    for tool in row_order(sc):
        if tool not in res and tool not in notes:
            continue
        runs = res.get(tool, [])
        good = [x for x in runs if x["ok"]]
        wall, cpu, rss = (med([x[k] for x in good if x[k] is not None]) for k in ("wall", "cpu", "rss"))
        ratio = wall / rg_wall if wall and rg_wall else None
        frac = ideal / wall if wall and ideal else None
        served = med([x["served"] for x in runs if x.get("served") is not None and x["ok"]])
        note = notes.get(tool, "")
        logged = [x for x in (good or runs) if x.get("conns") is not None]
        tcp = med([x["conns"] for x in logged])
        note = "; ".join(p for p in (note, server_note(sc, logged)) if p)
        fails = [f"run {i + 1}: {x['why']}" for i, x in enumerate(runs) if x["why"]]
        if fails:
            note = "; ".join(([note] if note else []) + fails[:2] + (["..."] if len(fails) > 2 else []))
        if name.startswith("resume") and runs:
            reqs = med([x["requests"] for x in runs])
            note = "; ".join(([note] if note else []) + [f"{reqs:g} requests (median)"])
        timeouts = sum(1 for x in runs if x.get("timeout"))
        if runs:
            ok = f"{len(good)}/{len(runs)}" + (f", {timeouts} timed out" if timeouts else "")
        else:  # never ran: skipped on purpose, or rangeget missing
            ok = "not ok" if note.startswith("not ok") else "skipped"
        extra = [fmt(cpu / (size / GiB)) if cpu is not None else "-"] if sc.get("cpu_per_gib") else []
        files_per_s = out["count"] / wall if sc.get("files_per_s") and wall else None
        if sc.get("files_per_s"):
            extra += [fmt(files_per_s, 0)]
        if name == "memory":
            s = out["small_rss"].get(tool)
            flat = "-" if s is None or rss is None else ("yes" if rss <= 1.2 * s + 2 else "no")
            extra += [fmt(s, 1), flat]
            if s is not None:
                note = "; ".join(([note] if note else []) + [f"{rss / s:.2f}x" if rss else ""]).strip("; ")
        elif name.startswith("resume"):
            extra += [fmt(served, 3)]
        details = [(title, column_cell(good or runs, key)) for title, key in sc.get("columns", ())]
        extra += [cell for _, cell in details]
        lines.append("| " + " | ".join([tool, ok, fmt(wall), fmt(cpu), fmt(rss, 1), fmt(ratio), fmt(frac)]
                                      + ([fmt(tcp, 0)] if has_conns else []) + extra
                                      + [note.replace("|", "/")]) + " |")
        rows.append(dict(kind="tool", tool=tool, runs=len(runs), ok=len(good), wall_median=rnd(wall),
                         cpu_median=rnd(cpu), rss_median_mib=rnd(rss, 1), ratio_to_rangeget=rnd(ratio),
                         fraction_of_ideal=rnd(frac), bytes_served_ratio=rnd(served, 4), tcp_conns=rnd(tcp, 1),
                         timeouts=timeouts if runs else "", files_per_s=rnd(files_per_s, 1),
                         details="; ".join(f"{t}: {c}" for t, c in details),
                         delivered_mib_s=rnd(med([x["delivered"] for x in good if x.get("delivered")]) / MiB
                                             if any(x.get("delivered") for x in good) else None),
                         note=(f"rss at {human(out['small_size'])}: {fmt(out['small_rss'].get(tool), 1)} MiB; "
                               if name == "memory" else "") + note))
    lines.append("")
    if sc.get("nominal"):
        lines.append(delivered_line(sc, res, ideal))
    compared = []
    for label, a, b, key in sc.get("compare", []):
        va, vb = (med([x[key] for x in res.get(t, []) if x["ok"]]) for t in (a, b))
        compared.append(f"{label} {decisive(va / vb, '<=', 1.0) if va and vb else '-'}")
    if compared:
        lines.append(f"Compared (no goal): {', '.join(compared)}.  ")
    lines.append(goals_line(checked))
    return "\n".join(lines) + "\n", rows + goal_rows(checked), checked


def column_cell(runs, key):
    """A `columns` cell: the median of a number (of each element of a list of
    numbers, joined by /), k/n of a flag, the distinct values of a text."""
    values = [x[key] for x in runs if x.get(key) is not None]
    if not values:
        return "-"
    if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
        return "/".join(f"{med(list(column)):.1f}" for column in zip(*values))
    if all(isinstance(v, bool) for v in values):
        return f"{sum(values)}/{len(values)}"
    if all(isinstance(v, (int, float)) for v in values):
        return fmt(med(values))
    return "; ".join(dict.fromkeys(str(v) for v in values))


def delivered_line(sc, res, ideal):
    """The rate nginx delivered per busy connection in each tool's runs, and
    rangeget's fraction of the ideal at the rate it was served (per run, the
    ideal scaled by nominal / delivered): what separates a slow server from a
    client that left connections idle.  No goal: the goals stay nominal."""
    nominal = sc["nominal"]
    rates = {t: med([x["delivered"] for x in v if x["ok"] and x.get("delivered")]) for t, v in res.items()}
    shown = [f"{t} {r / MiB:.2f}" for t, r in sorted(rates.items(), key=lambda kv: row_rank(kv[0])) if r]
    served = [ideal * nominal / x["delivered"] / x["wall"] for x in res.get("rangeget", [])
              if x["ok"] and x.get("delivered") and x["wall"] and ideal]
    line = (f"nginx delivered per busy connection (body bytes / the responses' $request_time, median; "
            f"nominal {nominal / MiB:g} MiB/s): {', '.join(shown) or '-'} MiB/s.")
    if served:
        line += f"  rangeget's fraction of the ideal at the rate it was served: {med(served):.3f} (no goal)."
    return line + "\n"


def server_note(sc, logged):
    """What nginx's logs say about the runs: the protocols, and for mirrors the
    TCP connections and share of the bytes per mirror (medians, URL order)."""
    if not logged:
        return ""
    parts = [", ".join(sorted({p for x in logged for p in x["protocols"]}))]
    servers = sc["server"] if isinstance(sc["server"], list) else []
    if len(servers) > 1:
        conns = [med([x["per_server"][i][0] for x in logged]) for i in range(len(servers))]
        body = [med([x["per_server"][i][1] for x in logged]) for i in range(len(servers))]
        total = sum(body) or 1
        parts.append(f"per mirror ({'/'.join(server_label(s) for s in servers)}): "
                     f"conns {'/'.join(f'{c:g}' for c in conns)}, "
                     f"bytes {'/'.join(f'{100 * b / total:.0f}' for b in body)}%")
    return "; ".join(p for p in parts if p)


def server_label(name):
    return (RELAYS.get(name) or NGINX_SERVERS.get(name, {})).get("label", name)


def row_rank(tool):
    base = base_tool(tool)
    return (TOOLS.index(base) if base in TOOLS else 9, tool != base, tool)


def rnd(x, nd=3):
    return "" if x is None else round(x, nd)


CSV_COLS = ["date", "commit", "scenario", "tool", "runs", "ok", "wall_median", "cpu_median",
            "rss_median_mib", "ratio_to_rangeget", "fraction_of_ideal", "bytes_served_ratio", "note",
            "tcp_conns", "timeouts", "kind", "goal", "goal_value", "goal_outcome", "label", "binary_sha256",
            "rangeget_version", "cpu_model", "kernel", "files_per_s", "delivered_mib_s", "details"]


def git(*a):
    r = subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def machine():
    """(CPU model, kernel release, the rest of the machine line)."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) // (1 << 20) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return cpu, platform.release(), f"{os.cpu_count()} cores, {mem} GiB RAM, {platform.platform()}"


def peers():
    vers = []
    for tool, flag in (("aria2c", "--version"), ("axel", "--version"), ("lftp", "--version"),
                       ("curl", "--version"), ("wget2", "--version"), ("nginx", "-v")):
        if which(tool):
            r = subprocess.run([which(tool), flag], capture_output=True, text=True)
            first = (r.stdout or r.stderr).splitlines()[:1]
            vers.append(first[0][:60] if first else tool)
    if tools.BASELINE:
        r = subprocess.run([tools.BASELINE, "--version"], capture_output=True, text=True)
        first = (r.stdout or r.stderr).strip().splitlines()[:1]
        vers.append(f"rangeget (baseline): {first[0] if first else '?'}, {tools.BASELINE}, "
                    f"sha256 {sha256_of(tools.BASELINE)[:12]}")
    return "; ".join(vers)


def git_state():
    """(short HEAD or "", dirty): dirty = tracked changes anywhere, or untracked files
    (not ignored) under Sources/ or Package.swift / Package.resolved, which `swift
    build` compiles or reads although git status --untracked-files=no hides them."""
    head = git("rev-parse", "--short=7", "HEAD")
    tracked = git("status", "--porcelain", "--untracked-files=no")
    untracked = [l for l in git("status", "--porcelain", "--untracked-files=all", "--",
                                "Sources", "Package.swift", "Package.resolved").splitlines() if l.startswith("??")]
    return head, bool(tracked or untracked)


def version_commit(line):
    """(commit, dirty) as `rangeget --version`'s first line reports them, e.g.
    "rangeget 0.2.0 (1a2b3c4)", "rangeget 0.2.0 1a2b3c4-dirty", "... v0.2.0-3-g1a2b3c4";
    (None, False) for "rangeget 0.1.0".  A commit: 7 to 40 hex digits, one a letter."""
    dirty = bool(re.search(r"dirty|modified|uncommitted", line, re.I))
    for h in re.findall(r"(?:(?<=-g)|(?<![0-9A-Za-z.]))([0-9a-f]{7,40})(?![0-9A-Za-z])", line):
        if re.search("[a-f]", h):
            return h, dirty
    return None, dirty


def binary_identity(bench):
    """What the results are named after and attributed to: the binary itself.
    label: the commit `rangeget --version` reports, if it reports one and no dirty
    flag; else, when this run built the binary, git's short HEAD (+ "-dirty"); else
    "bin" + the first 12 hex digits of the binary's SHA-256."""
    ident = dict(sha256="", version="", path=bench.rg or "", commit="")
    if bench.rg:
        ident["sha256"] = sha256_of(bench.rg)
        try:
            r = subprocess.run([bench.rg, "--version"], capture_output=True, text=True, timeout=10)
            ident["version"] = ((r.stdout or r.stderr).strip().splitlines() or ["?"])[0]
        except (OSError, subprocess.SubprocessError) as e:
            ident["version"] = f"? (--version failed: {e})"
    commit, vdirty = version_commit(ident["version"])
    if commit and not vdirty:
        ident.update(label=commit, commit=commit, why=f"the commit `rangeget --version` reports")
    elif bench.built:
        head, dirty = bench.git
        ident["commit"] = (head or "nocommit") + ("-dirty" if dirty or not head else "")
        ident.update(label=ident["commit"], why="built by this run from git HEAD " + (head or "(none)") + (
            " with uncommitted changes (tracked files, or untracked ones under Sources/ or Package.*)"
            if dirty else ", no uncommitted changes") + (
            f"; `--version` reports {commit}, dirty" if commit else ""))
    elif ident["sha256"]:
        ident.update(label="bin" + ident["sha256"][:12],
                     why="the binary's SHA-256: not built by this run (--no-build / --rangeget) and "
                         "`--version` reports no clean commit")
    else:
        ident.update(label="nobinary", why=bench.rg_why)
    ident["label"] = re.sub(r"[^0-9A-Za-z._+-]+", "-", ident["label"])
    return ident


def missed_summary(goals, title="Goals missed in this run"):
    """A markdown list of every goal missed (and a line on those not checked).
    goals: dicts with scenario, goal, value, outcome, why (check_goals' or CSV rows')."""
    missed = [g for g in goals if g["outcome"] == "MISSED"]
    unchecked = [g for g in goals if g["outcome"] == "not checked"]
    met = sum(1 for g in goals if g["outcome"] == "met")
    lines = [f"{title}: {len(missed) or 'none'} (met {met} of {len(goals)}"
             f"{f', {len(unchecked)} not checked' if unchecked else ''})."]
    for g in missed:
        label, bound = split_goal(g["goal"])
        bound = f" (goal {bound})" if bound else ""
        if re.match(r"\d", g["value"] or ""):  # a measured value (or k/n runs ok)
            lines.append(f"- {g['scenario']}: {label} {g['value']}{bound}" + (f" ({g['why']})" if g.get("why") else ""))
        else:
            lines.append(f"- {g['scenario']}: {label}{bound}: {g.get('why') or g['value'] or '-'}")
    if unchecked:
        lines.append("")
        lines.append("Not checked: " + "; ".join(f"{g['scenario']}: {g['goal']} ({g['why']})" for g in unchecked)
                     + ".")
    return "\n".join(lines) + "\n"


class Report:
    """The results files of one binary: DATE-LABEL[-quick].{md,csv} (binary_identity).
    An existing file of that name is merged with (its scenarios not run again are
    kept) only if it records the same binary SHA-256; otherwise the next free name
    DATE-LABEL[-quick]-2, -3, ... is used, and the older file stays as it was."""
    META = re.compile(r"^<!-- bench-meta (.*) -->$", re.M)

    def __init__(self, bench):
        self.bench = bench
        self.date = datetime.date.today().isoformat()
        self.ident = binary_identity(bench)
        self.cpu, self.kernel, self.rest = machine()
        self.invocation = dict(started=f"{datetime.datetime.now():%Y-%m-%d %H:%M}",
                               command="Benchmarks/run " + shlex.join(sys.argv[1:]), runs=bench.runs,
                               machine=f"{self.cpu}, {self.rest}", kernel=self.kernel, peers=peers(),
                               scenarios=[])
        base = f"{self.date}-{self.ident['label']}{'-quick' if bench.quick else ''}"
        self.sections, self.rows, self.invocations = {}, [], []
        for k in range(1, 1000):
            stem = os.path.join(RESULTS, base if k == 1 else f"{base}-{k}")
            self.md_path, self.csv_path = stem + ".md", stem + ".csv"
            if not os.path.exists(self.md_path) and not os.path.exists(self.csv_path):
                break
            if self.ident["sha256"] and self.recorded_sha() == self.ident["sha256"]:
                self.load()
                break
        self.invocations.append(self.invocation)

    def recorded_sha(self):
        """The binary SHA-256 an existing results file records ("" if none)."""
        if os.path.exists(self.md_path):
            m = self.META.search(open(self.md_path).read())
            if m:
                try:
                    return json.loads(m.group(1)).get("binary_sha256", "")
                except ValueError:
                    pass
        if os.path.exists(self.csv_path):
            first = next(csv.DictReader(open(self.csv_path)), None)
            return (first or {}).get("binary_sha256") or ""
        return ""

    def load(self):
        if os.path.exists(self.md_path):
            text = open(self.md_path).read()
            m = self.META.search(text)
            if m:
                self.invocations = json.loads(m.group(1)).get("invocations", [])
            for part in text.split("\n## ")[1:]:
                self.sections[part.split("\n", 1)[0].strip()] = "## " + part.rstrip() + "\n"
        if os.path.exists(self.csv_path):
            self.rows = list(csv.DictReader(open(self.csv_path)))

    def header(self, summary):
        i = self.ident
        if i["sha256"]:
            path = i["path"] if os.path.relpath(i["path"], REPO).startswith("..") else os.path.relpath(i["path"], REPO)
            binary = (f"Binary: `{i['version']}` (first line of `rangeget --version`), SHA-256 "
                      f"`{i['sha256'][:12]}` ({i['sha256']}), {path}.  \n")
        else:
            binary = f"Binary: none ({self.bench.rg_why}).  \n"
        runs = []
        for v in self.invocations:
            if not v["scenarios"]:
                continue
            other = "" if v["machine"] == self.invocation["machine"] and v["kernel"] == self.kernel \
                and v["peers"] == self.invocation["peers"] else \
                f" (machine: {v['machine']}, kernel {v['kernel']}; peers: {v['peers']})"
            runs.append(f"- {v['started']} `{v['command']}`, {v['runs']} run{'s' if v['runs'] != 1 else ''} per tool: "
                        f"{', '.join(v['scenarios'])}{other}")
        meta = dict(binary_sha256=i["sha256"], label=i["label"], version=i["version"],
                    invocations=self.invocations)
        return (f"# rangeget benchmarks, {self.date}, {i['label']}{', --quick' if self.bench.quick else ''}\n\n"
                + binary + f"Named {i['label']}: {i['why']}.  \n"
                f"Machine: {self.cpu}, {self.rest}; kernel {self.kernel}.  \n"
                f"Peers: {self.invocation['peers']}.\n\n"
                "Runs in this file (every section is from this binary; tools shuffled within each "
                "round; medians over ok runs):\n\n" + "\n".join(runs) + "\n\n" + summary + "\n"
                f"<!-- bench-meta {json.dumps(meta)} -->\n")

    def add(self, name, md, rows):
        self.sections[name] = md
        for v in self.invocations:  # the section now comes from this invocation
            v["scenarios"] = [s for s in v["scenarios"] if s != name]
        self.invocation["scenarios"].append(name)
        i = self.ident
        self.rows = [r for r in self.rows if r["scenario"] != name] + [
            dict(date=self.date, commit=i["commit"], scenario=name, **r, label=i["label"],
                 binary_sha256=i["sha256"], rangeget_version=i["version"], cpu_model=self.cpu,
                 kernel=self.kernel) for r in rows]
        order = {s: i for i, s in enumerate(SCENARIOS)}
        os.makedirs(RESULTS, exist_ok=True)
        goals = [dict(r, goal=r.get("goal", ""), value=r.get("goal_value", ""), outcome=r.get("goal_outcome"),
                      why=r.get("note", "")) for r in self.rows if r.get("kind") == "goal"]
        title = "Goals missed in this run" if len([v for v in self.invocations if v["scenarios"]]) < 2 else \
            "Goals missed in these runs (every section below)"
        summary = missed_summary(sorted(goals, key=lambda g: order.get(g["scenario"], 99)), title)
        with open(self.md_path, "w") as f:
            f.write(self.header(summary) + "\n" + "\n".join(
                self.sections[s] for s in sorted(self.sections, key=lambda s: order.get(s, 99))))
        self.rows.sort(key=lambda r: (order.get(r["scenario"], 99), r.get("kind") == "goal", row_rank(r["tool"])))
        with open(self.csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, CSV_COLS)
            w.writeheader()
            w.writerows(self.rows)
