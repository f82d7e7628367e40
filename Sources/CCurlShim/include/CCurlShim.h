// Typed, non-variadic entry points for libcurl's variadic setters and getters.
// Swift cannot call C variadic functions; each wrapper below fixes one
// argument type, and passes `long` exactly where libcurl wants `long`.
// Also the few Linux calls Glibc's module map hides (sync_file_range and
// renameat2 need _GNU_SOURCE; the extended attribute calls are in <sys/xattr.h>),
// and the build's identity (scripts/build-info).
#ifndef RANGEGET_CCURLSHIM_H
#define RANGEGET_CCURLSHIM_H

#include <curl/curl.h>
#include <stdint.h>

/// The signature of CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
typedef size_t (*rg_data_callback)(char *data, size_t size, size_t count, void *user);

CURLcode rg_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode rg_easy_setopt_string(CURL *easy, CURLoption option, const char *value);
CURLcode rg_easy_setopt_pointer(CURL *easy, CURLoption option, void *value);
CURLcode rg_easy_setopt_slist(CURL *easy, CURLoption option, struct curl_slist *value);
CURLcode rg_easy_setopt_data_callback(CURL *easy, CURLoption option, rg_data_callback value);
/// `CURLOPT_XFERINFOFUNCTION`: a non-zero return aborts the transfer (CURLE_ABORTED_BY_CALLBACK).
typedef int (*rg_xferinfo_callback)(void *user, curl_off_t download_total, curl_off_t downloaded,
                                    curl_off_t upload_total, curl_off_t uploaded);
CURLcode rg_easy_setopt_xferinfo_callback(CURL *easy, rg_xferinfo_callback value);

CURLcode rg_easy_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode rg_easy_getinfo_double(CURL *easy, CURLINFO info, double *value);
CURLcode rg_easy_getinfo_string(CURL *easy, CURLINFO info, char **value);
CURLcode rg_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value);

CURLMcode rg_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// `sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`: starts writing the
/// file's dirty pages to disk and returns at once; no durability promise.
int rg_start_writeback(int fd);

/// syncfs(2): writes back every dirty file of `fd`'s file system and waits.
int rg_sync_file_system(int fd);

/// fstatfs(2)'s `f_type` for `fd` (the file system's magic number), or -1.
long long rg_file_system_type(int fd);

/// The commit the binary was built from ("unknown" outside `make`), and
/// whether the tree differed from it.
const char *rg_build_commit(void);
int rg_build_dirty(void);

/// `renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE)`: renames, or
/// fails with EEXIST when `to` exists; EINVAL where the file system cannot.
int rg_rename_noreplace(const char *from, const char *to);

/// A file with no name in `directory` (`O_TMPFILE`), open for reading and
/// writing: a descriptor, or -1 (EOPNOTSUPP, EISDIR or EINVAL where the file
/// system or kernel has none).
int rg_open_unnamed(const char *directory);
/// Gives the open file `fd` (one `rg_open_unnamed` made) the name `to`
/// (`linkat`); never replaces anything there (EEXIST). 0 or -1.
int rg_link_open_file(int fd, const char *to);
/// glibc's `mallopt`: at most `arenas` malloc arenas; blocks up to
/// `largest_kept` bytes come from them (not mmap), and up to 8 times that
/// stays free at an arena's top before it is given back to the kernel.
void rg_tune_malloc(int arenas, int largest_kept);

/// `fsetxattr(fd, name, value, size, 0)`: 0 or -1 with errno (ENOTSUP where
/// the file system has no extended attributes).
int rg_set_attribute(int fd, const char *name, const void *value, size_t size);
/// `fgetxattr(fd, name, value, size)`: the value's length, or -1 with errno (ENODATA: not set).
long rg_get_attribute(int fd, const char *name, void *value, size_t size);
/// `fremovexattr(fd, name)`: 0 or -1 with errno.
int rg_remove_attribute(int fd, const char *name);

/// Stores `value` at `word` in one piece, after every store before it (the
/// write journal's order: a kill between two stores leaves a valid file).
void rg_store_release(int64_t *word, int64_t value);

#endif
