/* slowflush: an LD_PRELOAD shim that makes every flush of the disk slower,
 * for the benchmark's hard variants of list scenarios (small-slowflush).
 * fsync, fdatasync and syncfs each wait SLOW_FLUSH_US microseconds (default
 * 5000) before doing the real call: a disk whose cache flush takes 5 ms, as a
 * SATA SSD's or a spinning disk's can, where this VM's virtual disk flushes
 * in about 0.1 ms. Tools that never sync are not slowed at all.
 * With SLOW_FLUSH_GATE=PATH, each flush first waits for as long as PATH
 * exists: a test holds every flush until it removes the file (ListEngineTests).
 * With SLOW_FLUSH_SKIP set, each flush returns 0 at once and does nothing: the
 * benchmark's row of what rangeget's durable completion costs (small-freshfs). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

static void wait_for_the_disk(void) {
    const char *gate = getenv("SLOW_FLUSH_GATE");
    while (gate && access(gate, F_OK) == 0) usleep(1000);
    const char *text = getenv("SLOW_FLUSH_US");
    usleep(text ? (useconds_t)atoi(text) : 5000);
}

#define SLOWED(name) \
    int name(int fd) { \
        static int (*real)(int); \
        if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, #name); \
        if (getenv("SLOW_FLUSH_SKIP")) return 0; \
        wait_for_the_disk(); \
        return real(fd); \
    }

SLOWED(fsync)
SLOWED(fdatasync)
SLOWED(syncfs)
