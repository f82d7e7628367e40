# slowfs.py ROOT MOUNT DELAY_US: a passthrough FUSE file system whose metadata
# calls (lookups, creates, renames, links, attributes) each wait DELAY_US, as a
# network file system's round trip does; reads and writes do not wait. The
# scenario `small-slowmeta` of `run` mounts it (needs /dev/fuse, `apt install
# fuse`, `pip install fusepy`); by hand, as root: `python3 slowfs.py /tmp/root
# /mnt/slow 300 &`, then `fusermount -u /mnt/slow`. Like NFS it has no
# O_TMPFILE, no extended attributes, no renameat2(RENAME_NOREPLACE) and no
# syncfs that reports writeback errors, so rangeget takes its named `.part`,
# mark-file, link and per-file fdatasync paths there.
import os, sys, time, errno
from fuse import FUSE, FuseOSError, Operations

class Slow(Operations):
    def __init__(self, root, delay):
        self.root, self.delay = root, delay
    def _p(self, path): return os.path.join(self.root, path.lstrip('/'))
    def _wait(self): time.sleep(self.delay)
    def getattr(self, path, fh=None):
        self._wait()
        try: st = os.lstat(self._p(path))
        except OSError as e: raise FuseOSError(e.errno)
        return {k: getattr(st, k) for k in ('st_atime','st_ctime','st_gid','st_mode','st_mtime','st_nlink','st_size','st_uid')}
    def access(self, path, mode):
        self._wait()
        if not os.access(self._p(path), mode): raise FuseOSError(errno.EACCES)
    def readdir(self, path, fh): return ['.', '..'] + os.listdir(self._p(path))
    def mkdir(self, path, mode): self._wait(); os.mkdir(self._p(path), mode)
    def rmdir(self, path): self._wait(); os.rmdir(self._p(path))
    def unlink(self, path): self._wait(); os.unlink(self._p(path))
    def rename(self, old, new): self._wait(); os.rename(self._p(old), self._p(new))
    def link(self, target, source): self._wait(); os.link(self._p(source), self._p(target))
    def chmod(self, path, mode): self._wait(); os.chmod(self._p(path), mode)
    def truncate(self, path, length, fh=None):
        with open(self._p(path), 'r+') as f: f.truncate(length)
    def utimens(self, path, times=None): os.utime(self._p(path), times)
    def open(self, path, flags): self._wait(); return os.open(self._p(path), flags)
    def create(self, path, mode, fi=None):
        self._wait(); return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    def read(self, path, size, offset, fh): return os.pread(fh, size, offset)
    def write(self, path, data, offset, fh): return os.pwrite(fh, data, offset)
    def flush(self, path, fh): return 0
    def release(self, path, fh): os.close(fh); return 0
    def fsync(self, path, datasync, fh): os.fdatasync(fh) if datasync else os.fsync(fh); return 0
    def statfs(self, path):
        st = os.statvfs(self._p(path))
        return {k: getattr(st, k) for k in ('f_bavail','f_bfree','f_blocks','f_bsize','f_favail','f_ffree','f_files','f_flag','f_frsize','f_namemax')}

if __name__ == '__main__':
    FUSE(Slow(sys.argv[1], int(sys.argv[3]) / 1e6), sys.argv[2], foreground=True, nothreads=False)
