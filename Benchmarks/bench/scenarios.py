"""The scenario table (SCENARIOS): each scenario's file, server, connections,
ideal and goals, with the goal constructors and the notes shared by several
scenarios."""
import signal

from .common import GiB, MiB


# size: bytes (full, quick).  server: an nginx server from NGINX_SERVERS or a
# relay from RELAYS, a list of them (mirrors, in the order given to the tools), or
# "serve" (rangeget's RangeServer started with `serve` args, fresh for every run).
# n: connections.  ideal(size) -> seconds; None = the median wall of ideal_tool
# (default curl) in the run.  skip: tool -> why it does not run this scenario.
# variants: extra rows (VARIANTS).  goals: BENCHMARKS.md's goals for rangeget as
# data (see GOAL KINDS below), each checked and printed met or MISSED under the
# table; every scenario also has the goal "rangeget ok in every run".  compare:
# [(label, tool, other tool, "wall" or "cpu")]: ratios printed without a goal.
# List scenarios (run by Bench.bulk) have files: (count full, count quick) and
# file_size; set: a directory of generated files (file_set) instead of bulk/;
# large: a large file heading the list; est(count): the expected wall in seconds,
# for the timeout when the ideal is a peer's wall; files_per_s: a files/s column.
# cpu_per_gib: a CPU s/GiB column.  columns: [(title, key)]: a column per key
# of the runs (a number: the median over the ok runs; a list of numbers: each
# one's median, joined by /; a flag: k/n; a text: its distinct values), also in
# the CSV's `details`.  kind: the Bench method that
# runs the scenario (bench/verified.py).  notes: tool -> a note for its row.
# note: a paragraph under the ideal.  one_url: tools that take one URL (they get
# the last, fastest, mirror).  Resume scenarios: signal and when; timeouts: see
# Bench.timeout_for.
#
# auto_count scenarios (bench/adaptive.py): rows rangeget (`-n auto`) and
# `rangeget -n N` for N in 1, 2, 4, 8, 16; slowest(size): the seconds the slowest
# row (-n 1) needs, for the timeout; change_after, settle: the server's rate
# change and how long after it the rate is measured.  expiring_urls: lifetime
# (the server's --expiring-urls), in_flight (the bytes one connection may have
# in flight when its URL expires: the bound on bytes served is size + n x it).
#
# GOAL KINDS (constructors below): fraction(X): ideal / rangeget's median wall
# >= X.  ratio(OTHER, KEY, Y): rangeget's median KEY ("wall" or "cpu") / OTHER's
# <= Y (the same file for both, so a CPU ratio is also the CPU s/GiB ratio).
# served(Z): median bytes served / size <= Z.  rss(N, AT): median peak RSS at the
# scenario's size ("1x") or at 4x ("4x") <= N MiB.  flat(): RSS(4x) <= 1.2 x
# RSS(1x) + 2 MiB.  peak(N): rangeget's median peak RSS <= N MiB.
# files_rate(OTHER, Y): rangeget's files/s / OTHER's >= Y (list scenarios).
# value(KEY, OP, X, LABEL, TOOL): the median of the runs' own number KEY over
# TOOL's ok runs OP X.  derived(KEY, OP, X, LABEL): out["derived"][KEY] OP X (or OP the
# target the kind computed for the run).  every(KEY, LABEL, TOOL): the flag KEY set in every run of
# TOOL, ok or not (shown k/n).  added_cpu(TOOL, OTHER, F): (TOOL's median CPU -
# OTHER's) per GiB <= F x openssl's SHA-256 s/GiB measured in the run.  A goal
# about another tool (the peer is not run, or has no ok run) is "not checked";
# rangeget without an ok run misses it.


def fraction(x):
    return dict(kind="fraction", label="fraction of ideal", op=">=", target=x)


def ratio(other, key, y, label=None, tool="rangeget"):
    return dict(kind="ratio", tool=tool, other=other, key=key, op="<=", target=y,
                label=label or f"{tool} / {other} {'CPU' if key == 'cpu' else key}")


def served(z):
    return dict(kind="served", label="bytes served / size", op="<=", target=z)


def rss(mib, at):
    return dict(kind="rss", at=at, label=f"peak RSS MiB at {at}", op="<=", target=mib)


def flat():
    return dict(kind="flat", label="RSS flat: RSS(4x) MiB", op="<=", target=None)


def peak(mib):
    return dict(kind="peak", label="peak RSS MiB", op="<=", target=mib)


def rss_over(other, mib, tool):
    """tool's median peak RSS - other's <= mib (the stream's window over a download to a file)."""
    return dict(kind="rss_over", tool=tool, other=other, label=f"{tool} - {other} peak RSS MiB", op="<=",
                target=mib)


def files_rate(other, y):
    """rangeget's files per second / OTHER's >= y (the same list for both: the
    inverse of the wall ratio)."""
    return dict(kind="files_rate", other=other, label=f"rangeget / {other} files/s", op=">=", target=y)


def value(key, op, target, label, tool="rangeget"):
    """The median over tool's ok runs of the per-run number KEY (a scenario's own
    measure, e.g. the MiB served beyond the size) op target."""
    return dict(kind="value", key=key, tool=tool, label=label, op=op, target=target)


def every(key, label, tool="rangeget"):
    """In every run of tool (ok or not) the per-run flag KEY is true; shown as k/n."""
    return dict(kind="every", key=key, tool=tool, label=label, op="", target=None)


def added_cpu(tool, other, factor):
    """(tool's median CPU - other's) per GiB <= factor x openssl's SHA-256 s/GiB
    measured in the same scenario (out["sha256_s_per_gib"])."""
    return dict(kind="added_cpu", tool=tool, other=other, factor=factor, op="<=", target=None,
                label=f"added CPU s/GiB ({tool} - {other})")


def derived(key, op, target, label, target_text=None):
    """A number the scenario's kind computed across its rows (out["derived"][KEY]:
    its value, and a target that depends on the run, such as 1.5 x F + 1) op
    target; target_text: how the goal names a target known only in the run."""
    return dict(kind="derived", key=key, label=label, op=op, target=target, target_text=target_text)


ONE_STREAM = "one stream: not a segmented downloader"
NO_METALINK = "reads no Metalink"
# The resume scenarios' notes (smoothed and bursty alike).
KILL_NOTE = ("The peers save their resume state periodically, by default later than the kill: aria2c "
             "its control file every 60 s (`--auto-save-interval`), axel every 10 s (`save_state_interval`), "
             "lftp's pget every 10 s (`pget:save-status`).  Killed at 1.5 s (--quick: earlier) they have "
             "saved nothing yet and re-fetch by design.  CPU includes the killed run's (os.wait4 of the "
             "tool itself); peak RSS is the rerun's.")
KILL4_NOTE = ("Each run is killed 0.7 s after its start (--quick: 0.175 s, the same fraction of the file), "
              "before the peers' first periodic save (aria2c 60 s, axel and lftp 10 s): they re-fetch by "
              "design, up to five times.  Wall and CPU are those of all five runs (the "
              "killed runs' CPU from os.wait4 of the tool itself); peak RSS is the last run's.  A run that "
              "finishes before its kill ends the sequence and makes the round not ok.")
INT_NOTE = ("The peers' periodic state saves (aria2c every 60 s, `--auto-save-interval`; axel every 10 s, "
            "`save_state_interval`; lftp's pget every 10 s, `pget:save-status`) come after the signal at "
            "1.5 s: what they keep is what they save when they stop on SIGINT.  CPU includes the "
            "interrupted run's; peak RSS is the rerun's.")
# small, list-20k: what the walls include.
LIST_NOTE = ("rangeget's completion is durable (it syncs what it wrote before it exits); the peers' "
             "(wget2, aria2c, lftp, curl) is not: their walls include no sync.  TCP conns shows connection "
             "reuse across the files (distinct nginx `$connection`s).")
# stream, stream-bursty: what the rows are.
NO_STDOUT = "writes no file to stdout"
STREAM_NOTE = ("`rangeget -o - | sha256sum` against `rangeget -o FILE` in the same run: the stream's rate "
               "(size / wall) must be at least 0.9 of the file's, and its peak RSS at most the window "
               "(64 MiB, the default) + 10 MiB above it.  sha256sum is the reader (its digest is checked); on "
               "this machine it needs about 1.2 s of CPU for 256 MiB, so on two cores it competes with the "
               "download.  curl streams one connection: 1/8 of the ideal by construction.")
# The auto_count scenarios' shared parts: rows, columns, goals, ideal.
NO_LEARNING = "no peer learns its connection count: the rows are rangeget's own fixed counts"
AUTO = dict(
    n="auto", variants=[f"rangeget -n {n}" for n in (1, 2, 4, 8, 16)], ideal=None,
    ideal_text="the best fixed count's median wall in this run",
    columns=[("wall / best fixed", "to_best"), ("settled (--json)", "settled"), ("peak (--json)", "peak")],
    goals=[derived("to_best", "<=", 1.10, "auto / best fixed count wall"),
           derived("settled", "<=", None, "auto's settled count (median)", "1.5 x F + 1"),
           derived("peak", "<=", 16, "auto's peak count, every run (max; --max-per-host)")],
    skip={t: NO_LEARNING for t in ("aria2c", "axel", "lftp", "curl")})
AUTO_NOTE = ("The row `rangeget` is `rangeget -n auto`; every row prints --json, whose `connectionCount` "
             "({mode, settled, peak, reason}) gives the settled and peak columns (\"-\" without it).  F: the "
             "fewest fixed count whose median wall is within 3% of the best's; goal: auto's settled count "
             "<= 1.5 x F + 1.  The peak goal is over every run (its maximum), against --max-per-host 16.")
SCENARIOS = {
    "loopback": dict(
        size=(1 * GiB, 256 * MiB), server="open", n=8,
        what="unthrottled nginx", ideal=None, ideal_tool="curl+sync", variants=["curl+sync"],
        ideal_text="median wall of one curl stream followed by `sync` of its output file, in this run",
        goals=[ratio("curl+sync", "wall", 1.0), ratio("curl", "wall", 1.1), ratio("aria2c", "wall", 0.6),
               ratio("curl", "cpu", 1.0, "rangeget / curl CPU s/GiB")],
        cpu_per_gib=True),
    "trace-overhead": dict(
        kind="trace_overhead", size=(1 * GiB, 256 * MiB), server="open", n=8, pairs=20,
        variants=["rangeget (--trace)"],
        what=("unthrottled nginx: rangeget and `rangeget --trace FILE`, interleaved pairs (both in every "
              "round, shuffled), at least 20 rounds whatever --runs says"),
        ideal=None, ideal_tool="rangeget", ideal_text="median wall of rangeget without --trace in this run",
        note=("Overhead: each round's traced wall / its plain wall, the median over the rounds (a pair shares "
              "the machine's state of its moment: the page cache, the other core's load).  The issue asks for "
              "10 pairs; on this VM single walls swing from 1 to 3 s for both rows alike, and the median of 10 "
              "ratios was 1.05 in one run and 0.80 over the first 10 of the next, of one binary, so 20 are taken.  Trace MB: the "
              "largest trace file written."),
        goals=[derived("pair_ratio", "<=", 1.03, "median pair wall ratio (--trace / plain)"),
               derived("trace_mb", "<=", 5, "trace file MB (largest)")],
        skip={"aria2c": "writes no trace: the rows are rangeget with and without --trace",
              "axel": "writes no trace: the rows are rangeget with and without --trace",
              "lftp": "writes no trace: the rows are rangeget with and without --trace",
              "curl": "writes no trace: the rows are rangeget with and without --trace"}),
    "https": dict(
        size=(1 * GiB, 256 * MiB), server="tls", n=8,
        what="nginx `ssl http2`, no limit (self-signed certificate, given to every tool as the CA)",
        ideal=None, ideal_tool="curl+sync", variants=["curl+sync"],
        ideal_text="median wall of one curl stream (HTTP/2) followed by `sync` of its output file, in this run",
        goals=[ratio("curl+sync", "wall", 1.0), ratio("curl", "cpu", 1.1, "rangeget / curl CPU s/GiB")],
        cpu_per_gib=True),
    "h2-cap": dict(
        size=(64 * MiB, 32 * MiB), server="h2cap", n=8,
        what="nginx `ssl http2` behind relay.py at 5 MiB/s per TCP connection (smooth: 10 ms slices)",
        ideal=lambda s: s / (8 * 5 * MiB), ideal_text="size / (8 x 5 MiB/s)",
        goals=[fraction(0.9), ratio("aria2c", "wall", 1.0)],
        notes={"curl": "one stream on one TCP connection: 1/8 of the ideal by construction"}),
    "cap": dict(
        size=(256 * MiB, 64 * MiB), server="cap20", n=16,
        what="nginx limit_rate 20m per connection",
        nominal=20 * MiB,
        ideal=lambda s: s / (16 * 20 * MiB), ideal_text="size / (16 x 20 MiB/s)",
        goals=[fraction(0.95)],
        skip={"curl": ONE_STREAM + " (1/16 of the ideal by construction)"}),
    "cap-bursty": dict(
        size=(256 * MiB, 64 * MiB), server="cap20b", n=16,
        what="nginx limit_rate 20m per connection with nginx's default pacing (2 MiB per connection at a "
             "time, then a sleep)",
        ideal=lambda s: s / (16 * 20 * MiB), ideal_text="size / (16 x 20 MiB/s), as `cap`",
        note=("No fraction goal: BENCHMARKS.md's (>= 0.95) is for smoothed pacing, and nginx's free first "
              "burst of every response (2 MiB) lets a tool beat the nominal ideal, so it gates nothing here; "
              "compared with the peers in the same run."),
        compare=[("rangeget / aria2c wall", "rangeget", "aria2c", "wall"),
                 ("rangeget / axel wall", "rangeget", "axel", "wall"),
                 ("rangeget / lftp wall", "rangeget", "lftp", "wall")],
        skip={"curl": ONE_STREAM + " (1/16 of the ideal by construction)"}),
    "stream": dict(
        size=(256 * MiB, 64 * MiB), server="cap20", n=8,
        what="nginx limit_rate 20m per connection (smoothed); `-o -` into sha256sum, and `-o FILE`",
        ideal=lambda s: s / (8 * 20 * MiB), ideal_text="size / (8 x 20 MiB/s)",
        variants=["rangeget -o - | sha256sum", "curl | sha256sum"], note=STREAM_NOTE,
        goals=[ratio("rangeget", "wall", 1.11, "stream / file wall (rate >= 0.9 x -o FILE's)",
                     tool="rangeget -o - | sha256sum"),
               rss_over("rangeget", 74, tool="rangeget -o - | sha256sum")],
        skip={"aria2c": NO_STDOUT, "axel": NO_STDOUT, "lftp": NO_STDOUT, "curl": "its stream is the row below"}),
    "stream-bursty": dict(
        size=(256 * MiB, 64 * MiB), server="cap20b", n=8,
        what="nginx limit_rate 20m per connection with nginx's default pacing (2 MiB at a time, then a sleep); "
             "`-o -` into sha256sum, and `-o FILE`",
        ideal=lambda s: s / (8 * 20 * MiB), ideal_text="size / (8 x 20 MiB/s), as `stream`",
        variants=["rangeget -o - | sha256sum", "curl | sha256sum"], note=STREAM_NOTE,
        goals=[ratio("rangeget", "wall", 1.11, "stream / file wall (rate >= 0.9 x -o FILE's)",
                     tool="rangeget -o - | sha256sum"),
               rss_over("rangeget", 74, tool="rangeget -o - | sha256sum")],
        skip={"aria2c": NO_STDOUT, "axel": NO_STDOUT, "lftp": NO_STDOUT, "curl": "its stream is the row below"}),
    "stream-h2-cap": dict(
        size=(64 * MiB, 32 * MiB), server="h2cap", n=8,
        what="nginx `ssl http2` behind relay.py at 5 MiB/s per TCP connection (as `h2-cap`); `-o -` into "
             "sha256sum, and `-o FILE`",
        ideal=lambda s: s / (8 * 5 * MiB), ideal_text="size / (8 x 5 MiB/s)",
        variants=["rangeget -o - | sha256sum", "curl | sha256sum"], note=STREAM_NOTE,
        goals=[ratio("rangeget", "wall", 1.11, "stream / file wall (rate >= 0.9 x -o FILE's)",
                     tool="rangeget -o - | sha256sum"),
               rss_over("rangeget", 74, tool="rangeget -o - | sha256sum")],
        skip={"aria2c": NO_STDOUT, "axel": NO_STDOUT, "lftp": NO_STDOUT, "curl": "its stream is the row below"}),
    "mirrors": dict(
        size=(1 * GiB, 256 * MiB), server=["m2", "m8", "m32"], n=12,
        what="3 nginx mirrors at 2, 8 and 32 MiB/s per connection, smoothed (URLs in that order)",
        ideal=lambda s: s / (12 * 32 * MiB),
        ideal_text="size / (12 x 32 MiB/s): the best allocation, all 12 connections on the fastest mirror",
        goals=[fraction(0.85)],
        one_url=("lftp", "curl")),
    "mirrors-bursty": dict(
        size=(1 * GiB, 256 * MiB), server=["m2b", "m8b", "m32b"], n=12,
        what="the same mirrors with nginx's default pacing (2 MiB per connection at a time, then a sleep)",
        ideal=lambda s: s / (12 * 32 * MiB),
        ideal_text="size / (12 x 32 MiB/s), as `mirrors`",
        note=("BENCHMARKS.md's 0.85 holds for the bursty variant too (issue 41).  nginx sends each response's "
              "first 2 MiB at once, so a single mirror's connections can beat the nominal ideal (lftp, one URL: "
              "the fastest)."),
        goals=[fraction(0.85)],
        compare=[("rangeget / aria2c wall", "rangeget", "aria2c", "wall"),
                 ("rangeget / axel wall", "rangeget", "axel", "wall")],
        one_url=("lftp", "curl")),
    "mirrors-bursty-mixed": dict(
        size=(1 * GiB, 256 * MiB), server=["m2b", "m32b", "m8b"], n=12,
        what="`mirrors-bursty` with the URLs in the order 2, 32, 8 MiB/s per connection",
        ideal=lambda s: s / (12 * 32 * MiB),
        ideal_text="size / (12 x 32 MiB/s), as `mirrors`",
        note="As `mirrors-bursty`: the fastest mirror is not the last URL (lftp and curl get the last, 8m).",
        goals=[fraction(0.85)],
        compare=[("rangeget / aria2c wall", "rangeget", "aria2c", "wall"),
                 ("rangeget / axel wall", "rangeget", "axel", "wall")],
        one_url=("lftp", "curl")),
    "mirrors-uplink": dict(
        size=(64 * MiB, 64 * MiB), server=["up10", "up20", "up40"], n=12,
        what="3 mirrors whose whole uplink is capped at 10, 20 and 40 MB/s (relay.py --total "
             "in front of unthrottled nginx; URLs in that order)",
        ideal=lambda s: s / (70 * 10 ** 6), ideal_text="size / (10 + 20 + 40 MB/s)",
        goals=[fraction(0.9)],
        notes={"lftp": "at most 40/70 = 0.57 of the ideal from one mirror",
               "curl": "at most 40/70 = 0.57 of the ideal from one mirror"},
        one_url=("lftp", "curl")),
    "mirrors-pair": dict(
        size=(1 * GiB, 256 * MiB), server=["m2", "m8"], n=8, variants=["rangeget (fast only)"],
        what="a slow mirror (2 MiB/s per connection) and a fast one (8 MiB/s), smoothed (URLs in that order)",
        ideal=lambda s: s / (8 * 8 * MiB),
        ideal_text="size / (8 x 8 MiB/s): all 8 connections on the fast mirror",
        goals=[ratio("rangeget (fast only)", "wall", 1.05, "pair / fast only wall")],
        skip={"curl": "one stream at 8 MiB/s: 1/8 of the ideal by construction, longer than the timeout"},
        one_url=("lftp", "curl")),
    "stall": dict(
        size=(256 * MiB, 64 * MiB), server="serve", n=8,
        serve=["--rate-per-connection", "10M", "--fault", "stall:1048576@request=3"],
        what="RangeServer 10 MiB/s per connection; the 3rd request sends 1 MiB then stalls forever",
        ideal=lambda s: s / (8 * 10 * MiB), ideal_text="size / (8 x 10 MiB/s)",
        goals=[fraction(0.75)],
        skip={"curl": ONE_STREAM}),
    "flaky": dict(
        size=(256 * MiB, 64 * MiB), server="serve", n=8,
        serve=["--rate-per-connection", "20M", "--fault", "cut-random:1@p=0.3,seed=1"],
        what="RangeServer 20 MiB/s per connection, 30% of responses cut at a random point",
        ideal=lambda s: s / (8 * 20 * MiB), ideal_text="size / (8 x 20 MiB/s)",
        goals=[fraction(0.9)],
        skip={"curl": ONE_STREAM}),
    "latency": dict(
        size=(64 * MiB, 64 * MiB), server="serve", n=8,
        serve=["--latency", "300", "--rate-per-connection", "5M"],
        what="RangeServer 300 ms before every response, 5 MiB/s per connection",
        ideal=lambda s: 0.3 + s / (8 * 5 * MiB), ideal_text="0.3 s + size / (8 x 5 MiB/s)",
        goals=[fraction(0.95)],
        skip={"curl": ONE_STREAM}),
    "resume-kill": dict(
        size=(256 * MiB, 64 * MiB), server="r10", n=8, interrupt=signal.SIGKILL,
        kill_after=1.5,  # seconds at full size; --quick scales it with the size
        what="nginx 10 MiB/s per connection, smoothed; SIGKILL to the process group, then the same command again",
        note=KILL_NOTE,
        ideal=lambda s: s / (8 * 10 * MiB),
        ideal_text="size / (8 x 10 MiB/s) for the time (wall = both runs); bytes served = size",
        goals=[served(1.01)],
        skip={"curl": ONE_STREAM}),
    "resume-kill-bursty": dict(
        size=(256 * MiB, 64 * MiB), server="r10b", n=8, interrupt=signal.SIGKILL,
        kill_after=1.5,
        what=("nginx 10 MiB/s per connection with nginx's default pacing (2 MiB per connection at a time, "
              "then a sleep); SIGKILL to the process group, then the same command again"),
        note=KILL_NOTE,
        ideal=lambda s: s / (8 * 10 * MiB),
        ideal_text="size / (8 x 10 MiB/s) for the time (wall = both runs); bytes served = size",
        goals=[served(1.01)],
        skip={"curl": ONE_STREAM}),
    "resume-kill4": dict(
        size=(256 * MiB, 64 * MiB), server="r10", n=8, interrupt=signal.SIGKILL, kills=4,
        kill_after=0.7,  # after each start; --quick scales it with the size
        what=("nginx 10 MiB/s per connection, smoothed; four runs each SIGKILLed (process group), then "
              "the same command to completion"),
        note=KILL4_NOTE,
        ideal=lambda s: s / (8 * 10 * MiB),
        ideal_text="size / (8 x 10 MiB/s) for the time (wall = all five runs); bytes served = size",
        goals=[served(1.03)],
        skip={"curl": ONE_STREAM}),
    "resume-kill4-bursty": dict(
        size=(256 * MiB, 64 * MiB), server="r10b", n=8, interrupt=signal.SIGKILL, kills=4,
        kill_after=0.7,
        what=("nginx 10 MiB/s per connection with nginx's default pacing (2 MiB per connection at a time, "
              "then a sleep); four runs each SIGKILLed (process group), then the same command to "
              "completion"),
        note=KILL4_NOTE,
        ideal=lambda s: s / (8 * 10 * MiB),
        ideal_text="size / (8 x 10 MiB/s) for the time (wall = all five runs); bytes served = size",
        goals=[served(1.03)],
        skip={"curl": ONE_STREAM}),
    "resume-int": dict(
        size=(256 * MiB, 64 * MiB), server="r10", n=8, interrupt=signal.SIGINT,
        kill_after=1.5,
        what="nginx 10 MiB/s per connection, smoothed; SIGINT (Ctrl-C) to the process group, then the same "
             "command again",
        note=INT_NOTE,
        ideal=lambda s: s / (8 * 10 * MiB),
        ideal_text="size / (8 x 10 MiB/s) for the time (wall = both runs); bytes served = size",
        goals=[served(1.005)],
        skip={"curl": ONE_STREAM}),
    "resume-int-bursty": dict(
        size=(256 * MiB, 64 * MiB), server="r10b", n=8, interrupt=signal.SIGINT,
        kill_after=1.5,
        what=("nginx 10 MiB/s per connection with nginx's default pacing (2 MiB per connection at a time, "
              "then a sleep); SIGINT (Ctrl-C) to the process group, then the same command again"),
        note=INT_NOTE,
        ideal=lambda s: s / (8 * 10 * MiB),
        ideal_text="size / (8 x 10 MiB/s) for the time (wall = both runs); bytes served = size",
        goals=[served(1.005)],
        skip={"curl": ONE_STREAM}),
    "bulk": dict(
        files=(100, 32), file_size=2 * MiB, server="b20", n=16,
        nominal=20 * MiB,
        what="list of 2 MiB files, nginx 20 MiB/s per connection, 16 connections in all",
        ideal=lambda total: total / (16 * 20 * MiB), ideal_text="total / (16 x 20 MiB/s)",
        goals=[fraction(0.95)]),
    "bulk-distant": dict(
        files=(64, 32), file_size=2 * MiB, server="serve", n=16,
        serve=["--latency", "100", "--rate-per-connection", "5M"],
        what="list of 2 MiB files from RangeServer, 100 ms before every response and 5 MiB/s per connection, "
             "16 connections in all",
        ideal=lambda total: -(-(total // (2 * MiB)) // 16) * (0.1 + 2 / 5),
        ideal_text="rounds of 16 files x (0.1 s + 2 MiB / 5 MiB/s)",
        note="The hard variant of `bulk`: a distant server, where every request costs a wait (here the server's "
             "100 ms before each response), and RangeServer paces each connection smoothly (no free first chunk "
             "per response, unlike nginx's limit_rate). TCP conns: not counted (RangeServer keeps no access log).",
        goals=[fraction(0.95)]),
    "bulk-mixed": dict(
        files=(31, 15), file_size=2 * MiB, large=(256 * MiB, 64 * MiB), server="b20", n=16,
        nominal=20 * MiB,
        what="list of one large file then 2 MiB files, nginx 20 MiB/s per connection, 16 connections in all",
        ideal=lambda total: total / (16 * 20 * MiB), ideal_text="total / (16 x 20 MiB/s)",
        goals=[fraction(0.95)]),  # issue 15, Done when
    "small": dict(
        files=(1000, 1000), file_size=16 << 10, set="small16k", server="lists", n=16, files_per_s=True,
        what="list of 16 KiB files, unthrottled nginx, 16 at a time",
        ideal=None, ideal_tool="wget2", est=lambda count: count * 0.002,
        ideal_text="median wall of `wget2 --max-threads=16` in this run (BENCHMARKS.md's yardstick; "
                   "curl --parallel can be faster, see its row)",
        note=LIST_NOTE,
        goals=[ratio("wget2", "wall", 1.0)]),
    "small-slowflush": dict(
        files=(1000, 1000), file_size=16 << 10, set="small16k", server="lists", n=16, files_per_s=True,
        slow_flush_us=5000,
        what="`small` on a disk whose flushes take 5 ms (fsync, fdatasync and syncfs each wait 5 ms first: "
             "Benchmarks/slowflush.c, LD_PRELOAD'ed into every tool)",
        ideal=None, ideal_tool="wget2", est=lambda count: count * 0.01,
        ideal_text="median wall of `wget2 --max-threads=16` in this run (it syncs nothing, so the slow "
                   "flush costs it nothing)",
        note=LIST_NOTE + "  The hard variant of `small`: this VM's disk flushes in about 0.1 ms, a SATA SSD "
                         "or a spinning disk in milliseconds, and a durable completion waits for it.",
        goals=[ratio("wget2", "wall", 1.0)]),
    "small-freshfs": dict(
        files=(1000, 1000), file_size=16 << 10, set="small16k", server="lists", n=16, files_per_s=True,
        fresh_fs=True, variants=("rangeget (no flush)",),
        what="`small` into a file system made anew for each run (a 1 GiB ext4 image on a loop device, "
             "with its journal, on a loop device with direct I/O)",
        ideal=None, ideal_tool="wget2", est=lambda count: count * 0.002,
        ideal_text="median wall of `wget2 --max-threads=16` in this run",
        note=LIST_NOTE + "  The tidy variant of `small`: there each run creates its files on the ext4 "
                         "the earlier runs deleted theirs from, and a create right after many deletions "
                         "scans the inodes freed in the last minutes (ext4's recently_deleted), so every "
                         "tool's wall swings with how many runs came just before (0.14 to 0.95 s for "
                         "wget2 in one day).  Here no file was ever deleted, and what decides is the CPU per file and "
                         "the durable completion: the row `rangeget (no flush)` is rangeget with every flush a "
                         "no-op (its files are not durable when it exits, as the peers' are not), not a goal.  "
                         "Needs root and a loop device; skipped without.",
        goals=[ratio("wget2", "wall", 1.0)]),
    "small-slowmeta": dict(
        files=(200, 200), file_size=16 << 10, set="small16k", server="lists", n=16, files_per_s=True,
        slow_meta_us=300,
        what="200 files of `small` into a FUSE file system whose metadata calls (lookups, creates, "
             "renames, links, removals) each take 300 us, as a network file system's round trips do "
             "(Benchmarks/slowfs.py)",
        ideal=None, ideal_tool="wget2", est=lambda count: count * 0.02,
        ideal_text="median wall of `wget2 --max-threads=16` in this run",
        note=LIST_NOTE + "  The hard variant of `small` for a list into NFS or a FUSE mount: no "
                         "unnamed files, no extended attributes, no renameat2(RENAME_NOREPLACE), so rangeget "
                         "writes each file to `NAME.part.new`, links it to its name and removes that name "
                         "(three names changed), where wget2 creates one name and syncs nothing; a "
                         "directory's changes queue one after another.  Needs /dev/fuse, fusermount and "
                         "Python's fusepy (`apt-get install fuse`, `pip install fusepy`); skipped without.",
        goals=[ratio("wget2", "wall", 1.0)]),
    "list-20k": dict(
        files=(20000, 2000), file_size=4 << 10, set="list4k", server="lists", n=16, files_per_s=True,
        what="list of 4 KiB files, unthrottled nginx, 16 at a time",
        ideal=None, ideal_tool="wget2", est=lambda count: count * 0.002,
        ideal_text="median wall of `wget2 --max-threads=16` in this run (BENCHMARKS.md's yardstick; "
                   "curl --parallel can be faster, see its row)",
        note=LIST_NOTE + "  Files/s is the list's length / the median wall.",
        goals=[peak(40), files_rate("wget2", 1.0)],
        skip={"axel": "no list input: one axel process per file (xargs -P 16), 20,000 process starts, "
                      "about 2 min a run at its rate in `small` (~150 files/s)"}),
    "memory": dict(
        size=(1 * GiB, 256 * MiB), server="open", n=8, factor=4,
        what="peak RSS of the loopback run and of a file 4x as large (unthrottled nginx)",
        ideal=None, ideal_text="median wall of one curl stream at 4x the size",
        goals=[rss(20, "1x"), rss(20, "4x"), flat()]),
    "metalink": dict(
        kind="metalink", size=(256 * MiB, 64 * MiB), server=["ml-other", "ml-flip", "ml-good"], n=8, piece=MiB,
        what=("a Metalink 4 with 1 MiB SHA-256 pieces and the file's SHA-256, 3 unthrottled nginx mirrors "
              "(all priority 1, in this order): a different file of the same size, the file with one byte "
              "flipped in one piece, the good file; the same ETag and Last-Modified on all three"),
        ideal=None, ideal_text="none: the goals are about the bytes; aria2c's wall and bytes beside rangeget's",
        note=("Bytes served: nginx's `$body_bytes_sent` summed over the three mirrors (what they sent, read "
              "or not).  The different file and the flipped copy have the good file's size and mtime, so "
              "nginx's validators (ETag: mtime-size, Last-Modified) are the same on every mirror.  Bad pieces "
              "and dropped: rangeget's --json (`badPieces`, `dropped` of each mirror; `after N MiB from it` is "
              "that mirror's `bytes`); MiB fetched: its `bytesFetched`, what it read."),
        columns=[("MiB served (different/flipped/good)", "per_mirror_mib"), ("bytes served / size", "served"),
                 ("MiB fetched (--json)", "fetched_mib"),
                 ("bad pieces (--json, per mirror)", "bad_pieces"), ("different mirror dropped", "other_dropped")],
        goals=[value("over_mib", "<=", 8, "bytes served - size, MiB"),
               every("other_dropped_ok", "the different mirror dropped in every run")],
        compare=[("rangeget / aria2c wall", "rangeget", "aria2c", "wall"),
                 ("rangeget / aria2c bytes served", "rangeget", "aria2c", "served")],
        skip={"axel": NO_METALINK, "lftp": NO_METALINK, "curl": NO_METALINK}),
    "metalink-resume": dict(
        kind="metalink_resume", size=(256 * MiB, 64 * MiB), server="r10", n=8, piece=MiB,
        estimate=lambda s: s / (8 * 10 * MiB), stop_at=0.5,
        what=("nginx 10 MiB/s per connection, smoothed: `rangeget -o NAME URL` stopped by SIGINT halfway "
              "(0.5 x size / (8 x 10 MiB/s) after its start), one byte flipped in the middle of a piece lying "
              "wholly inside a done range of NAME.part, then `rangeget --metalink F -o NAME` (1 MiB SHA-256 "
              "pieces and the file's SHA-256; the same URL)"),
        ideal=None, ideal_text="none: the goals are about the bytes (wall and CPU are the resume's)",
        note=("Missing: the size less the done ranges of NAME.part.json after the SIGINT.  Served: nginx's "
              "`$body_bytes_sent` over the resume's requests; it also counts what nginx had sent of a request "
              "the client cut (a range whose remainder another connection took over at the end), which the "
              "client never read: so the bytes goal is on rangeget's --json `bytesFetched`, and the server's "
              "count is beside it.  Pieces beyond the missing bytes: (bytes - missing) / 1 MiB.  Refetched: "
              "the pieces wholly inside the done ranges that a request of the resume overlapped (nginx's log "
              "of the Range headers), against the flipped one.  No peer: the damaged `.part` and its manifest "
              "are rangeget's."),
        columns=[("done at the SIGINT", "done_frac"), ("MiB missing", "missing_mib"),
                 ("MiB served to the resume", "resume_mib"), ("pieces beyond missing, served", "extra_pieces"),
                 ("pieces beyond missing, --json bytesFetched", "fetched_extra_pieces"),
                 ("flipped piece", "flipped"), ("done pieces refetched (log)", "refetched"),
                 ("bad pieces (--json)", "bad_pieces")],
        goals=[every("one_piece", "the flipped piece, and only it, refetched from the done ranges, file right"),
               value("fetched_extra_pieces", "<=", 1.0, "(bytesFetched - missing) / piece")],
        skip={"aria2c": "resumes its own .aria2 state, not rangeget's .part", "axel": NO_METALINK,
              "lftp": NO_METALINK, "curl": NO_METALINK}),
    "digest-headers": dict(
        kind="digest_headers", size=(256 * MiB, 64 * MiB), server=["dg-origin", "dg-mirror"],
        wrong_origin="dg-wrong", n=8, variants=["rangeget (wrong Digest)", "aria2c (wrong Digest)"],
        what=("an nginx of its own, unthrottled: the origin answers with `Link: <MIRROR/NAME>; rel=duplicate; "
              "pri=1` and `Digest: SHA-256=<base64>`, the mirror is plain; each tool gets only the origin's URL. "
              "Rows (wrong Digest): an origin whose Digest is another file's, the same Link"),
        ideal=None, ideal_text="none: the goals are about the mirror used and the digest checked",
        note=("MiB served: nginx's `$body_bytes_sent` of the origin and of the mirror.  A (wrong Digest) run "
              "is ok when the tool refuses the file: a non-zero exit and, for rangeget, no file under its name. "
              "axel, lftp and curl read neither header."),
        columns=[("MiB served (origin/mirror)", "per_mirror_mib"), ("exit", "rcs"), (".part kept", "part_kept"),
                 ("mirrors in --json", "discovered")],
        goals=[every("both_used", "origin and mirror both sent bytes, file right, in every run"),
               every("exit3_part", "wrong Digest: exit 3, .part kept, no file", tool="rangeget (wrong Digest)")],
        skip={"axel": "reads neither Link: rel=duplicate nor Digest", "lftp": "reads neither Link nor Digest",
              "curl": "reads neither Link nor Digest"}),
    "piece-hash-cost": dict(
        kind="piece_hash_cost", size=(1 * GiB, 256 * MiB), server="open", n=8, piece=MiB, openssl_seconds=3,
        variants=["rangeget (Metalink)", "rangeget (Metalink + file hash)", "aria2c (Metalink)"],
        what=("unthrottled nginx: each tool by plain URL and from a Metalink of the same URL with 1 MiB SHA-256 "
              "pieces and no whole-file hash (`+ file hash`: with it too), in the same rounds"),
        ideal=None, ideal_tool="rangeget",
        ideal_text="median wall of rangeget by plain URL (no hashes) in this run",
        note=("Added CPU: rangeget (Metalink)'s median CPU (user + sys of the process) less rangeget's by plain "
              "URL, per GiB, against what openssl needs to hash a GiB on one core here (`openssl speed "
              "-seconds 3 -bytes 1048576 sha256`, above).  Both rangeget rows print --json."),
        cpu_per_gib=True,
        goals=[ratio("rangeget", "wall", 1.15, "Metalink / plain wall", tool="rangeget (Metalink)"),
               added_cpu("rangeget (Metalink)", "rangeget", 1.1)],
        columns=[("cores (CPU / wall)", "cores")],
        compare=[("aria2c Metalink / plain wall", "aria2c (Metalink)", "aria2c", "wall"),
                 ("rangeget (Metalink + file hash) / plain wall", "rangeget (Metalink + file hash)", "rangeget",
                  "wall")],
        skip={"axel": NO_METALINK, "lftp": NO_METALINK, "curl": NO_METALINK}),
    "piece-hash-cost-capped": dict(
        kind="piece_hash_cost", size=(1 * GiB, 256 * MiB), server="cap50", n=8, piece=MiB, openssl_seconds=3,
        variants=["rangeget (Metalink)", "rangeget (Metalink + file hash)", "aria2c (Metalink)"],
        what=("nginx limit_rate 50m per connection, smoothed (8 x 50 = 400 MiB/s in all): `piece-hash-cost` "
              "with a core free for the hashes"),
        ideal=None, ideal_tool="rangeget",
        ideal_text="median wall of rangeget by plain URL (no hashes) in this run; the cap's own is size / "
                   "(8 x 50 MiB/s)",
        note=("The tidy variant of `piece-hash-cost`, for the issue's \"while a core is free\": unthrottled, "
              "nginx and rangeget's loop thread keep both of this machine's cores busy and the hashes "
              "compete with them; under the cap nginx sends less per second and the plain download uses well "
              "under one core (`cores`: the tool's CPU / its wall, median), so the hashes have a core of "
              "their own.  nginx delivered: body bytes / the responses' $request_time, per connection "
              "(nominal 50).  Added CPU as in `piece-hash-cost`."),
        cpu_per_gib=True,
        columns=[("cores (CPU / wall)", "cores"), ("nginx delivered MiB/s per conn", "delivered_mib")],
        goals=[ratio("rangeget", "wall", 1.15, "Metalink / plain wall", tool="rangeget (Metalink)"),
               added_cpu("rangeget (Metalink)", "rangeget", 1.1)],
        compare=[("aria2c Metalink / plain wall", "aria2c (Metalink)", "aria2c", "wall"),
                 ("rangeget (Metalink + file hash) / plain wall", "rangeget (Metalink + file hash)", "rangeget",
                  "wall")],
        skip={"axel": NO_METALINK, "lftp": NO_METALINK, "curl": NO_METALINK}),
    "verify-repair": dict(
        kind="verify_repair", size=(1 * GiB, 256 * MiB), server="open", n=8, piece=MiB, allowance=64 << 10,
        variants=["sha256sum (read once)", "openssl sha256 (read once)"],
        what=("a finished file with one byte flipped in one piece (the middle byte of piece floor(3/8 x pieces)), "
              "a fresh copy of it for every run; a Metalink 4 with 1 MiB SHA-256 pieces and the file's SHA-256, "
              "its one mirror unthrottled nginx serving the good file"),
        ideal=None, ideal_tool="openssl sha256 (read once)",
        ideal_text="median wall of `openssl dgst -sha256 FILE` (the same damaged copy, read once from the page "
                   "cache, hashed with the CPU's SHA instructions) in this run: the lower bound for reading the "
                   "file once and checking it",
        note=("rangeget: `rangeget verify --repair --json -n 8 -M F FILE`; aria2c: its Metalink command line "
              "with `--check-integrity=true` (-V), the damaged file in the directory.  Each run's copy is "
              "synced before the clock starts.  KiB served: nginx's `$body_bytes_sent` over the run's "
              "requests; one piece = exit 0, the file right and at most 1 MiB + 64 KiB served (the allowance "
              "for probes and samples).  Bad pieces and KiB fetched: rangeget's --json (`badPieces`, "
              "`bytesFetched`).  `sha256sum` (coreutils 9.1 here) hashes in software, several times slower "
              "than OpenSSL's SHA-256 on this CPU (SHA-NI), which rangeget and aria2c use: it is the issue's "
              "yardstick, `openssl dgst -sha256` the true lower bound (the ideal)."),
        columns=[("flipped piece", "flipped"), ("requests", "requests"), ("KiB served", "served_kib"),
                 ("one piece, file right", "one_piece"), ("bad pieces (--json)", "bad_pieces"),
                 ("KiB fetched (--json)", "fetched_kib")],
        goals=[every("one_piece", "one piece served (<= 1 MiB + 64 KiB) and the file right, in every run")],
        compare=[("rangeget / sha256sum wall", "rangeget", "sha256sum (read once)", "wall"),
                 ("rangeget / openssl dgst wall", "rangeget", "openssl sha256 (read once)", "wall"),
                 ("rangeget / aria2c wall", "rangeget", "aria2c", "wall")],
        skip={"axel": NO_METALINK, "lftp": NO_METALINK, "curl": NO_METALINK}),
    # Issue 41: the connection count learned.  Rows: rangeget -n auto (the row `rangeget`) and every
    # fixed count; each sized so that the best fixed count takes >= 3 s (full size).
    "auto-loopback": dict(
        kind="auto_count", size=(4 * GiB, 1 * GiB), server="open", slowest=lambda s: s / (100 * MiB),
        what="unthrottled nginx", note=AUTO_NOTE + "  BENCHMARKS.md names 1 GiB, which takes about 1 s here: "
                                                   "the file is 4 GiB so the best fixed count takes >= 3 s.",
        **AUTO),
    "auto-cap": dict(
        kind="auto_count", size=(1 * GiB, 256 * MiB), server="cap20", slowest=lambda s: s / (20 * MiB),
        what="nginx limit_rate 20m per connection, smoothed", note=AUTO_NOTE, **AUTO),
    "auto-cap-bursty": dict(
        kind="auto_count", size=(1 * GiB, 256 * MiB), server="cap20b", slowest=lambda s: s / (20 * MiB),
        what="nginx limit_rate 20m per connection with nginx's default pacing (2 MiB per connection at a time, "
             "then a sleep)", note=AUTO_NOTE, **AUTO),
    "auto-uplink": dict(
        kind="auto_count", size=(256 * MiB, 64 * MiB), server="serve", serve=["--rate-total", "40000000"],
        slowest=lambda s: s / 40e6,
        what="RangeServer (`rangeget serve --rate-total 40000000`): one uplink of 40 MB/s shared by all "
             "connections, fresh for every run", note=AUTO_NOTE, **AUTO),
    "auto-limit": dict(
        kind="auto_count", size=(64 * MiB, 16 * MiB), server="serve",
        serve=["--rate-per-connection", "5M", "--connection-limit", "4"], slowest=lambda s: s / (5 * MiB),
        what="RangeServer (`rangeget serve --rate-per-connection 5M --connection-limit 4`): 5 MiB/s per "
             "connection, and 503 (Retry-After: 1, connection closed) to a request beyond 4 in progress, as "
             "nginx's limit_conn; fresh for every run",
        note=AUTO_NOTE + "  503s: the server's count (its `--report-every` lines).",
        columns=AUTO["columns"] + [("503s (server)", "over_limit")],
        **{k: v for k, v in AUTO.items() if k != "columns"}),
    "auto-latency": dict(
        kind="auto_count", size=(256 * MiB, 64 * MiB), server="serve",
        serve=["--latency", "300", "--rate-per-connection", "5000000"], slowest=lambda s: 0.3 + s / 5e6,
        what="RangeServer (`rangeget serve --latency 300 --rate-per-connection 5000000`): 300 ms before every "
             "response, 5 MB/s per connection; fresh for every run", note=AUTO_NOTE, **AUTO),
    "auto-h2": dict(
        kind="auto_count", size=(256 * MiB, 64 * MiB), server="h2cap", slowest=lambda s: s / (5 * MiB),
        what="nginx `ssl http2` behind relay.py at 5 MiB/s per TCP connection (as `h2-cap`)", note=AUTO_NOTE,
        **AUTO),
    "auto-change": dict(
        kind="auto_count", size=(2 * GiB, 2 * GiB), server="serve", change_after=5, settle=3,
        serve=["--rate-total", "40000000", "--change-after", "5", "--then-rate-per-connection", "20M"],
        slowest=lambda s: 5 + (s - 5 * 40e6) / (20 * MiB),
        what="RangeServer (`rangeget serve --rate-total 40000000 --change-after 5 --then-rate-per-connection "
             "20M`): a shared 40 MB/s uplink for 5 s after the first request, then 20 MiB/s per connection "
             "and no total cap; fresh for every run",
        note=AUTO_NOTE + "  Rate after the change: from the server's own reports (`--report-every 0.1`: "
                         "seconds since its first request and body bytes sent), (bytes at the end - bytes at "
                         "5 + 3 s) / (the time of the last byte - 8 s), the last byte's time within 0.1 s; "
                         "rangeget has no machine-readable progress.  The file is 2 GiB in --quick too: the "
                         "best fixed count must still be downloading 3 s after the change.",
        columns=AUTO["columns"] + [("MB/s after change + 3 s", "rate_after")],
        goals=AUTO["goals"] + [derived("rate_after", ">=", 0.8,
                                       "auto's rate after change + 3 s / the best fixed count's")],
        **{k: v for k, v in AUTO.items() if k not in ("columns", "goals")}),
    "expiring-urls": dict(
        kind="expiring_urls", size=(128 * MiB, 96 * MiB), server="serve", n=8, lifetime=2, in_flight=MiB,
        serve=["--expiring-urls", "2", "--rate-per-connection", "4M"],
        ideal=lambda s: s / (8 * 4 * MiB), ideal_text="size / (8 x 4 MiB/s)",
        what="RangeServer (`rangeget serve --expiring-urls 2 --rate-per-connection 4M`): the file only at a "
             "signed URL valid 2 s from its issue (`/NAME?token=T`, from `GET /sign/NAME`; 403 otherwise); "
             "`rangeget -n 8 --refresh-cmd \"Benchmarks/refresh-url.sh SIGN_URL\" SIGNED_URL`; fresh for "
             "every run",
        note=("Refresh invocations: the signed URLs the server issued (its `--report-every` lines) less the "
              "one the harness fetched for the first URL.  Expiries: wall / 2 s, the URLs that ran out during "
              "the run.  Bytes served: the server's body bytes; the bound is size + 8 x 1 MiB, what 8 "
              "connections may have in flight (asked for and not yet read) when their URL is refused."),
        columns=[("refresh invocations", "refreshes"), ("expiries (wall / 2 s)", "expiries"),
                 ("403s", "forbidden"), ("bytes served / size", "served")],
        goals=[every("refresh_ok", "refresh invocations <= expiries + 1, in every run"),
               every("bytes_ok", "bytes served <= size + 8 x 1 MiB, in every run")],
        skip={t: "cannot refresh an expiring URL (no --refresh-cmd)" for t in ("aria2c", "axel", "lftp", "curl")}),
}
