"""What every module of the harness uses: units, the directories (data, work,
results, logs), the process groups to kill on exit, log() and which()."""
import os
import shutil
import sys


MiB = 1 << 20
GiB = 1 << 30


# Benchmarks/ (this package's parent directory)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
WORK = os.path.join(HERE, "work")
RESULTS = os.path.join(HERE, "results")
LOGS = os.path.join(WORK, "logs")
LIVE = set()  # process groups to kill on exit


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def which(name):
    if name.startswith("/"):
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None)
