/* clf/clf.h: the Clusterfile application API for C (libclf, pkg-config clf).
 *
 * A file system handle (clf_fs_t) is made from a cluster file; files are
 * opened by absolute path inside the file system ("/dir/file") and read and
 * written at explicit offsets, contiguously (clf_pread/clf_pwrite) or as
 * lists of noncontiguous pieces (clf_readv_list/clf_writev_list, one request
 * per data server). docs/LIBCLF.md has the details and an example.
 *
 * Errors: every call returns a negative errno (-ENOENT, -EACCES, ...) on
 * failure and never sets errno; clf_last_error() gives the calling thread's
 * last error message. Bad arguments (NULL pointers, negative offsets or
 * counts, sums that overflow, lists of different total length) are -EINVAL
 * and change nothing.
 *
 * Semantics as through a clfmount mount (close-to-open): the size a file's
 * writes reach is told to the file's metadata server at clf_close and
 * clf_fsync (and by an O_SYNC/O_DSYNC write), so an open, stat or mount
 * elsewhere sees it after that. Permissions are checked as the mount checks
 * them, for the handle's credentials (clf_set_credentials; by default the
 * process's effective uid, gid and groups at clf_connect). Symbolic links in
 * paths are not followed; ".." is not supported.
 *
 * Thread safety: a clf_fs_t and its files may be used from several threads
 * at once, except that clf_close and clf_disconnect must not race with other
 * calls on the same handle. Every call blocks until the servers answered or
 * the cluster's rpc_timeout_ms passed (a down server: -EIO).
 *
 * Build: cc prog.c $(pkg-config --cflags --libs clf). The library is C++;
 * a C program links it as any shared library.
 */
#ifndef CLF_CLF_H_
#define CLF_CLF_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A connection to one cluster. */
typedef struct clf_fs clf_fs_t;
/* An open file. */
typedef struct clf_file clf_file_t;

/* One piece of a file list: bytes [offset, offset + length) of the file. */
typedef struct clf_segment {
  int64_t offset;
  int64_t length;
} clf_segment_t;

/* Reads the cluster file and the credential it names (the cluster secret, or
 * the client certificate with [tls]); servers are reached on first use, so a
 * down server is not an error here. On success *fs is a new handle: free it
 * with clf_disconnect. */
int clf_connect(const char* cluster_file, clf_fs_t** fs);

/* Frees the handle. Files still open stay usable until their clf_close
 * (each keeps the connection it needs). Returns 0; NULL is a no-op. */
int clf_disconnect(clf_fs_t* fs);

/* The credentials later calls on `fs` act with (files already open keep
 * theirs). Only a process whose effective uid is 0 may set them, as the
 * mount acts for its callers; others get -EPERM. ngroups may be 0 (groups
 * NULL). */
int clf_set_credentials(clf_fs_t* fs, uint32_t uid, uint32_t gid, const uint32_t* groups,
                        size_t ngroups);

/* Sets the mask cleared from the mode of files and directories `fs` creates
 * (initially 022) and returns the previous one (as umask(2)). */
mode_t clf_umask(clf_fs_t* fs, mode_t mask);

/* Opens `path`. flags: O_RDONLY, O_WRONLY or O_RDWR, plus O_CREAT (mode:
 * permission bits, the handle's umask cleared), O_EXCL (with O_CREAT: -EEXIST
 * if the name exists) and O_TRUNC (not with O_RDONLY). O_SYNC/O_DSYNC make
 * each write durable and its size known before it returns. O_CLOEXEC,
 * O_NOCTTY, O_NONBLOCK, O_NOATIME, O_LARGEFILE and O_NOFOLLOW are accepted
 * and mean nothing here; any other flag (O_APPEND, O_DIRECTORY, O_PATH,
 * O_TMPFILE, ...) is -EINVAL. Only regular files open: a directory is
 * -EISDIR, a symbolic link -ELOOP. On success *file is the open file: end it
 * with clf_close. */
int clf_open(clf_fs_t* fs, const char* path, int flags, mode_t mode, clf_file_t** file);

/* Reports the size this open's writes reached to the file's metadata server
 * and ends the open; frees `file` whatever the outcome. */
int clf_close(clf_file_t* file);

/* Reads up to `count` bytes at `offset`: the bytes before the end of file
 * (holes read as zeros). Returns the number read, 0 at or past the end. */
ssize_t clf_pread(clf_file_t* file, void* buf, size_t count, int64_t offset);

/* Writes `count` bytes at `offset`. Returns `count`. */
ssize_t clf_pwrite(clf_file_t* file, const void* buf, size_t count, int64_t offset);

/* Noncontiguous I/O: the bytes of the file pieces `segs[0..nsegs)`, in list
 * order, to or from the memory pieces `iov[0..iovcnt)`, in order. Both lists
 * must hold the same number of bytes (else -EINVAL). Segments may be in any
 * order; in a write the later of overlapping segments wins. Each data server
 * gets one request with all of its pieces. At most 2^20 segments and 1 GiB
 * per call (-E2BIG). */
/* Returns the bytes written (the lists' total). */
ssize_t clf_writev_list(clf_file_t* file, const struct iovec* iov, int iovcnt,
                        const clf_segment_t* segs, int nsegs);
/* Fills every memory piece; bytes at or past the end of file read as zeros.
 * Returns how many of the requested bytes lie before the end of file. */
ssize_t clf_readv_list(clf_file_t* file, const struct iovec* iov, int iovcnt,
                       const clf_segment_t* segs, int nsegs);

/* Reports the size, then makes the file's data and metadata durable on
 * every server holding them. */
int clf_fsync(clf_file_t* file);

/* Attributes of `path` (st_ino: the file's handle; st_size: the size the
 * metadata server knows). */
int clf_stat(clf_fs_t* fs, const char* path, struct stat* st);
/* Attributes of an open file; st_size counts this open's writes too. */
int clf_fstat(clf_file_t* file, struct stat* st);

/* Removes a name (not a directory: -EISDIR). */
int clf_unlink(clf_fs_t* fs, const char* path);
/* Creates a directory (mode: permission bits, the umask cleared). */
int clf_mkdir(clf_fs_t* fs, const char* path, mode_t mode);
/* Removes an empty directory. */
int clf_rmdir(clf_fs_t* fs, const char* path);

/* The message of the calling thread's last failed call ("" if none). Valid
 * until the thread's next clf_ call. */
const char* clf_last_error(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* CLF_CLF_H_ */
