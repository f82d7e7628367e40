#define _GNU_SOURCE /* sync_file_range, renameat2, syncfs, O_TMPFILE */
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include "CCurlShim.h"
/* The commit the binary was built from: scripts/build-info writes this
   header before `make build` and `make test`; a plain `swift build` of a
   tree without it reports "unknown". */
#if __has_include("build_info.h")
#include "build_info.h"
#endif
#ifndef RG_BUILD_COMMIT
#define RG_BUILD_COMMIT "unknown"
#define RG_BUILD_DIRTY 0
#endif

CURLcode rg_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode rg_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode rg_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode rg_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLcode rg_easy_setopt_data_callback(CURL *easy, CURLoption option, rg_data_callback value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode rg_easy_setopt_xferinfo_callback(CURL *easy, rg_xferinfo_callback value) {
    return curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, value);
}

CURLcode rg_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode rg_easy_getinfo_double(CURL *easy, CURLINFO info, double *value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode rg_easy_getinfo_string(CURL *easy, CURLINFO info, char **value) {
    return curl_easy_getinfo(easy, info, value);
}
CURLcode rg_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLMcode rg_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

int rg_start_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

int rg_sync_file_system(int fd) {
    return syncfs(fd);
}

long long rg_file_system_type(int fd) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (long long)(unsigned long)info.f_type;
}

const char *rg_build_commit(void) {
    return RG_BUILD_COMMIT;
}

int rg_build_dirty(void) {
    return RG_BUILD_DIRTY;
}

int rg_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int rg_open_unnamed(const char *directory) {
    return open(directory, O_RDWR | O_TMPFILE | O_CLOEXEC, 0644);
}

int rg_link_open_file(int fd, const char *to) {
    /* Through /proc, which needs no privilege (AT_EMPTY_PATH asks for
       CAP_DAC_READ_SEARCH); without /proc, AT_EMPTY_PATH. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, path, AT_FDCWD, to, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0) return -1;
    return linkat(fd, "", AT_FDCWD, to, AT_EMPTY_PATH);
}

int rg_set_attribute(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}
long rg_get_attribute(int fd, const char *name, void *value, size_t size) {
    return (long)fgetxattr(fd, name, value, size);
}
int rg_remove_attribute(int fd, const char *name) {
    return fremovexattr(fd, name);
}

void rg_store_release(int64_t *word, int64_t value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

void rg_tune_malloc(int arenas, int largest_kept) {
    mallopt(M_ARENA_MAX, arenas);
    mallopt(M_MMAP_THRESHOLD, largest_kept);
    mallopt(M_TRIM_THRESHOLD, 8 * largest_kept);
}
