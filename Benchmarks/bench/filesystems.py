"""The file systems the list scenarios write into, instead of the work
directory's: a fresh ext4 per run (small-freshfs), slowfs.py's slow-metadata
FUSE mount (small-slowmeta), and the slow-flush LD_PRELOAD shim, slowflush.c
(small-slowflush, rangeget (no flush))."""
import os
import shutil
import subprocess
import sys
import time

from .common import GiB, HERE, WORK, which


class FreshFileSystem:
    """An ext4 made anew on a loop device and mounted, for one run (small-freshfs):
    no inode on it was ever freed.  Each one has an image and a mount point of its
    own (an image still mounted is never written over), all removed on exit."""
    IMAGE_SIZE = 1 * GiB
    made = 0
    _why_not = False  # False: not tried yet

    def __enter__(self):
        FreshFileSystem.made += 1
        name = f"freshfs-{os.getpid()}-{FreshFileSystem.made}"
        self.image = os.path.join(WORK, name + ".img")
        self.mount = os.path.join(WORK, name)
        self.device = None
        self.mounted = False
        try:
            os.makedirs(self.mount, exist_ok=True)
            with open(self.image, "wb") as f:
                f.truncate(self.IMAGE_SIZE)
            # Inode tables and journal written now, not by a kernel thread during the run.
            self._run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.image)
            # Direct I/O: the loop device writes to the disk, not through a second page cache.
            self.device = self._run("losetup", "--direct-io=on", "--show", "-f", self.image)
            self._run("mount", self.device, self.mount)
            self.mounted = True
            os.sync()
        except (OSError, RuntimeError):
            self.__exit__()
            raise
        return self.mount

    def __exit__(self, *exc):
        # A mount still busy (a tool's process not yet gone) is detached lazily.
        if self.mounted and subprocess.run(["umount", self.mount], capture_output=True).returncode:
            subprocess.run(["umount", "-l", self.mount], capture_output=True)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
        for remove in (lambda: os.unlink(self.image), lambda: os.rmdir(self.mount)):
            try:
                remove()
            except OSError:
                pass
        return False

    @staticmethod
    def _run(*cmd):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd[:2])}: {r.stderr.strip() or r.returncode}")
        return r.stdout.strip()

    @staticmethod
    def usable():
        """Why a fresh file system cannot be made here, or None (tried once: a
        container may have root but no loop device, or no right to mount)."""
        if FreshFileSystem._why_not is False:
            why = None
            if os.geteuid() != 0:
                why = "needs root (mount)"
            for tool in ("mkfs.ext4", "losetup"):
                if not why and not shutil.which(tool):
                    why = f"{tool} not found"
            if not why:
                try:
                    with FreshFileSystem():
                        pass
                except (OSError, RuntimeError) as error:
                    why = f"cannot be made here ({error})"
            FreshFileSystem._why_not = why
        return FreshFileSystem._why_not


class SlowMetadataFileSystem:
    """Benchmarks/slowfs.py mounted at WORK/slowmeta-PID (its files in
    WORK/slowmeta-PID.root), every metadata call delayed `delay_us`, for one
    scenario (small-slowmeta); unmounted and removed on exit."""
    _why_not = False  # False: not tried yet

    def __init__(self, delay_us):
        self.delay_us = delay_us

    def __enter__(self):
        self.mount = os.path.join(WORK, f"slowmeta-{os.getpid()}")
        self.root = self.mount + ".root"
        for d in (self.mount, self.root):
            os.makedirs(d, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "slowfs.py"), self.root, self.mount, str(self.delay_us)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not os.path.ismount(self.mount):
            if self.process.poll() is not None or time.monotonic() > deadline:
                error = self.process.stderr.read().decode(errors="replace").strip().splitlines()
                self.__exit__()
                raise RuntimeError(error[-1] if error else "slowfs.py did not mount")
            time.sleep(0.05)
        return self.mount

    def __exit__(self, *exc):
        subprocess.run(["fusermount", "-u", self.mount], capture_output=True)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(self.mount)
        except OSError:
            pass
        return False

    @staticmethod
    def usable():
        """Why the file system cannot be mounted here, or None (tried once)."""
        if SlowMetadataFileSystem._why_not is False:
            why = None
            if not os.path.exists("/dev/fuse"):
                why = "needs /dev/fuse"
            elif not shutil.which("fusermount"):
                why = "fusermount not found (apt-get install fuse)"
            elif subprocess.run([sys.executable, "-c", "import fuse"], capture_output=True).returncode:
                why = "Python's fusepy not found (pip install fusepy)"
            if not why:
                try:
                    with SlowMetadataFileSystem(0):
                        pass
                except (OSError, RuntimeError) as error:
                    why = f"cannot be mounted here ({error})"
            SlowMetadataFileSystem._why_not = why
        return SlowMetadataFileSystem._why_not


def slow_flush_library():
    """Benchmarks/slowflush.c built as a shared library in WORK (once)."""
    library = os.path.join(WORK, "slowflush.so")
    source = os.path.join(HERE, "slowflush.c")
    if not os.path.exists(library) or os.path.getmtime(library) < os.path.getmtime(source):
        compiler = which("cc") or which("gcc") or which("clang")
        if not compiler:
            raise RuntimeError("no C compiler for Benchmarks/slowflush.c (apt-get install gcc)")
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"], check=True)
    return library
