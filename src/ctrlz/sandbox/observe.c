/* The observer of refused writes (ctrlz/sandbox/observer.py says why and what it records).
 *
 * The launcher forks. The child confines itself, installs the spec's notify filter with a
 * listener and passes the listener to the parent over a socket (under bwrap, a second
 * ctrlz-sandbox inside does that part, `send` in its spec), then execs the command. The
 * parent answers every notification SECCOMP_USER_NOTIF_FLAG_CONTINUE, after reading the
 * call's path, and writes a record for a write outside the writable set that the kernel's
 * own checks would let reach the sandbox's. When the child ends, the parent ends the same
 * way; processes the command left behind keep their observer (a forked copy), because a
 * trapped call without one would fail with ENOSYS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "observe.h"

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define LISTENER_ENV "CTRLZ_SANDBOX_LISTENER"
#define O_WRITE_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | 020000000)

typedef struct {
    int nr;
    char name[32], kind[16];
    int path, dir, src, srcdir, flags;
} call;

static call calls[64];
static int ncalls, log_fd = -1;
static const char *writable[4096];
static int nwritable;
static long records, dropped, max_records;

/* -- passing the listener ------------------------------------------------------------------ */

static void send_fd(int sock, int fd) {
    char data = 'L';
    struct iovec iov = {&data, 1};
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(sock, &msg, 0) < 0) refuse("passing the observer its listener: %s",
                                           strerror(errno));
}

static int recv_fd(int sock) {
    char data;
    struct iovec iov = {&data, 1};
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof u.buf};
    ssize_t n;
    while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
    struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1; /* the child ended before (refused) */
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static const char *item_value(const spec *s, const char *key) {
    for (int i = 0; i < s->nitems; i++)
        if (!strcmp(s->items[i].key, key)) return s->items[i].value;
    return NULL;
}

/* inside bwrap: filter this process, hand the listener to the observer outside (the sign
 * that the sandbox was made), give the command the run's stderr back, exec */
int send_listener(const spec *s, char **argv) {
    const char *env = getenv(LISTENER_ENV), *notify = item_value(s, "notify");
    int sock = -1, err = -1, refusal = -1;
    if (!env || sscanf(env, "%d:%d:%d", &sock, &err, &refusal) != 3 || sock < 0 || err < 0)
        refuse("no observer to hand the listener to");
    if (refusal >= 0) {
        refusal_fd = refusal;
        fcntl(refusal, F_SETFD, FD_CLOEXEC);
    }
    unsetenv(LISTENER_ENV);
    if (!notify) refuse("no notify filter in the spec");
    int listener = load_filter(notify, SECCOMP_FILTER_FLAG_NEW_LISTENER);
    if (dup2(err, 2) < 0) refuse("giving the command its stderr: %s", strerror(errno));
    close(err);
    send_fd(sock, listener);
    close(listener);
    close(sock);
    exec_command(s->exec, argv);
}

/* -- reading a call ------------------------------------------------------------------------ */

/* the NUL-terminated string at `addr` in process `pid`, page by page */
static int read_string(pid_t pid, uint64_t addr, char *out, size_t size) {
    size_t got = 0;
    while (got < size - 1) {
        size_t page = 4096 - ((addr + got) & 4095), want = size - 1 - got;
        if (want > page) want = page;
        struct iovec local = {out + got, want}, remote = {(void *)(uintptr_t)(addr + got), want};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n <= 0) return -1;
        char *nul = memchr(out + got, 0, (size_t)n);
        if (nul) return 0;
        got += (size_t)n;
    }
    return -1; /* longer than PATH_MAX: the kernel refuses it itself (ENAMETOOLONG) */
}

static int link_target(const char *link, char *out, size_t size) {
    ssize_t n = readlink(link, out, size - 1);
    if (n <= 0) return -1;
    out[n] = 0;
    return out[0] == '/' ? 0 : -1; /* "pipe:[...]", "anon_inode:...": not a directory */
}

/* the absolute path `rel` names in process `pid`, relative to its dirfd `dirfd` */
static int absolute(pid_t pid, int dirfd, const char *rel, char *out, size_t size) {
    char base[PATH_MAX], link[64];
    if (rel[0] == '/') {
        snprintf(out, size, "%s", rel);
        return 0;
    }
    if (dirfd == AT_FDCWD) snprintf(link, sizeof link, "/proc/%d/cwd", pid);
    else snprintf(link, sizeof link, "/proc/%d/fd/%d", pid, dirfd);
    if (link_target(link, base, sizeof base) < 0) return -1;
    if (!*rel) snprintf(out, size, "%s", base);
    else if (snprintf(out, size, "%s/%s", strcmp(base, "/") ? base : "", rel) >= (int)size)
        return -1;
    return 0;
}

/* `path` without ".", "..", "//" (lexically: the kernel resolves the real walk) */
static void normalize(char *path) {
    char *out = path, *in = path;
    while (*in) {
        while (*in == '/') in++;
        char *end = strchrnul(in, '/');
        size_t n = (size_t)(end - in);
        if (n == 1 && in[0] == '.') {
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > path && *--out != '/') {}
        } else if (n) {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in = end;
    }
    if (out == path) *out++ = '/';
    *out = 0;
}

/* the real path of `path`'s parent joined with its last name; -1 if the parent is missing */
static int real_parent(const char *path, char *out, size_t size) {
    char parent[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    if (!realpath(*parent ? parent : "/", real)) return -1;
    struct stat st;
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) return -1;
    if (snprintf(out, size, "%s/%s", strcmp(real, "/") ? real : "", slash + 1) >= (int)size)
        return -1;
    return 0;
}

/* the process's own names (/proc/self, /dev/fd, /dev/stdout, ...) as /proc/PID/...: resolved
 * here, they would name the observer's */
static void own_names(pid_t pid, char *path, size_t size) {
    static const struct { const char *name; const char *as; } names[] = {
        {"/proc/self", ""}, {"/proc/thread-self", ""}, {"/dev/fd", "/fd"},
        {"/dev/stdin", "/fd/0"}, {"/dev/stdout", "/fd/1"}, {"/dev/stderr", "/fd/2"}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t n = strlen(names[i].name);
        if (strncmp(path, names[i].name, n) || (path[n] && path[n] != '/')) continue;
        char rest[PATH_MAX];
        snprintf(rest, sizeof rest, "%s", path + n);
        if (snprintf(path, size, "/proc/%d%s%s", pid, names[i].as, rest) >= (int)size)
            path[0] = 0; /* too long: the kernel refuses it itself */
        return;
    }
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static int inside(const char *path) {
    for (int i = 0; i < nwritable; i++) {
        size_t n = strlen(writable[i]);
        if (!strncmp(path, writable[i], n)
            && (path[n] == 0 || path[n] == '/' || (n == 1 && writable[i][0] == '/')))
            return 1;
    }
    return 0;
}

/* whether the call in `req` is a write outside that the sandbox will be the one to refuse;
 * its real path in `out` */
static int refused(int listener, const struct seccomp_notif *req, const call *c, char *out,
                   size_t size) {
    const __u64 *args = req->data.args;
    pid_t pid = (pid_t)req->pid;
    char raw[PATH_MAX], path[PATH_MAX], src[PATH_MAX];
    int dirfd = c->dir < 0 ? AT_FDCWD : (int)args[c->dir];
    uint64_t flags = 0;
    if (c->flags == -1 && !strcmp(c->kind, "open")) flags = O_CREAT | O_WRONLY | O_TRUNC;
    else if (c->flags >= 0 && !strcmp(c->kind, "open")) flags = args[c->flags];
    else if (c->flags == -2) { /* openat2: struct open_how's first member */
        struct iovec local = {&flags, sizeof flags},
                     remote = {(void *)(uintptr_t)args[2], sizeof flags};
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof flags) return 0;
        if (!(flags & O_WRITE_FLAGS)) return 0;
    }
    if (args[c->path] == 0) raw[0] = 0; /* utimensat(fd, NULL): the fd's own file */
    else if (read_string(pid, args[c->path], raw, sizeof raw) < 0) return 0;
    if (c->src >= 0 && read_string(pid, args[c->src], src, sizeof src) < 0) return 0;
    /* the memory read belonged to the call still waiting (not a recycled pid) */
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0) return 0;
    if (absolute(pid, dirfd, raw, path, sizeof path) < 0) return 0;
    normalize(path);
    own_names(pid, path, sizeof path);
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, "/proc/%d/fd/", pid);
    if (!strncmp(path, prefix, (size_t)n)) { /* an fd reopened: the file it is, if a file */
        char target[PATH_MAX];
        if (link_target(path, target, sizeof target) < 0) return 0; /* a pipe, a socket */
        memcpy(path, target, strlen(target) + 1);
    }
    if (c->src >= 0) {
        char from[PATH_MAX];
        int srcfd = c->srcdir < 0 ? AT_FDCWD : (int)args[c->srcdir];
        if (absolute(pid, srcfd, src, from, sizeof from) < 0 || !exists(from)) return 0;
    }
    const char *kind = c->kind;
    if (!strcmp(kind, "open")) {
        if (flags & 020000000) { /* O_TMPFILE: a file in the directory named */
            if (!realpath(path, out)) return 0;
        } else if (flags & O_CREAT) {
            if ((flags & O_EXCL) && exists(path)) return 0; /* EEXIST */
            if (!realpath(path, out) && real_parent(path, out, size) < 0) return 0;
        } else if (!realpath(path, out)) return 0; /* ENOENT */
    } else if (!strcmp(kind, "make") || !strcmp(kind, "link")) {
        if (exists(path) || real_parent(path, out, size) < 0) return 0; /* EEXIST, ENOENT */
    } else if (!strcmp(kind, "move") && c->flags >= 0 && (args[c->flags] & 1) && exists(path)) {
        return 0; /* RENAME_NOREPLACE onto an existing name: EEXIST */
    } else if (!strcmp(kind, "move") || !strcmp(kind, "remove")) {
        if ((!strcmp(kind, "remove") && !exists(path)) || real_parent(path, out, size) < 0)
            return 0;
    } else if (!realpath(path, out)) return 0; /* change: the target must exist */
    return !inside(out);
}

static void record(const struct seccomp_notif *req, const call *c, const char *path) {
    if (max_records && records >= max_records) {
        dropped++;
        return;
    }
    records++;
    char comm[64] = "", file[64], line[PATH_MAX + 256];
    snprintf(file, sizeof file, "/proc/%d/comm", req->pid);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, comm, sizeof comm - 1);
        comm[n > 0 ? n : 0] = 0;
        if (n > 0 && comm[n - 1] == '\n') comm[n - 1] = 0;
        close(fd);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int n = snprintf(line, sizeof line, "%lld.%06ld%c%u%c%s%c%s%c%s%c", (long long)now.tv_sec,
                     now.tv_nsec / 1000, 0, req->pid, 0, comm, 0, c->name, 0, path, 0);
    if (n > 0 && n < (int)sizeof line && write(log_fd, line, (size_t)n) < 0) {}
}

/* answer one notification; 0 when the listener is done */
static int answer(int listener, struct seccomp_notif *req, struct seccomp_notif_resp *resp,
                  size_t req_size, size_t resp_size) {
    memset(req, 0, req_size);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0)
        return errno == EINTR || errno == ENOENT;
    const call *c = NULL;
    for (int i = 0; i < ncalls; i++)
        if (calls[i].nr == req->data.nr) c = &calls[i];
    char path[PATH_MAX];
    int found = c && refused(listener, req, c, path, sizeof path);
    memset(resp, 0, resp_size);
    resp->id = req->id;
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp); /* ENOENT: the caller is gone */
    if (found) record(req, c, path);
    return 1;
}

/* -- the loop ------------------------------------------------------------------------------ */

static void parse_observer(const spec *s) {
    max_records = s->max;
    for (int i = 0; i < s->nitems; i++) {
        const char *key = s->items[i].key, *value = s->items[i].value;
        if (!strcmp(key, "writable") && nwritable < 4096) writable[nwritable++] = value;
        else if (!strcmp(key, "call") && ncalls < 64) {
            call *c = &calls[ncalls];
            if (sscanf(value, "%d:%31[^:]:%15[^:]:%d:%d:%d:%d:%d", &c->nr, c->name, c->kind,
                       &c->path, &c->dir, &c->src, &c->srcdir, &c->flags) != 8)
                refuse("bad call in the spec: %s", value);
            ncalls++;
        }
    }
}

/* serve `listener` until the command ends (`child` exits: its status in *status) or, with
 * child 0, until no process is left that holds the filter */
static void serve(int listener, pid_t child, int *status) {
    struct seccomp_notif_sizes sizes;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
        sizes = (struct seccomp_notif_sizes){sizeof(struct seccomp_notif),
                                             sizeof(struct seccomp_notif_resp), 0};
    size_t req_size = sizes.seccomp_notif > sizeof(struct seccomp_notif)
                          ? sizes.seccomp_notif : sizeof(struct seccomp_notif);
    size_t resp_size = sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
                           ? sizes.seccomp_notif_resp : sizeof(struct seccomp_notif_resp);
    struct seccomp_notif *req = calloc(1, req_size);
    struct seccomp_notif_resp *resp = calloc(1, resp_size);
    int pidfd = child ? (int)syscall(SYS_pidfd_open, child, 0) : -1, hung_up = 0;
    for (;;) {
        /* once nobody holds the filter, the listener polls as hung up at once: wait for the
         * child alone then (polled again, the loop would spin until bwrap is gone) */
        struct pollfd fds[2] = {{hung_up ? -1 : listener, POLLIN, 0}, {pidfd, POLLIN, 0}};
        int n = poll(fds, pidfd >= 0 ? 2 : 1, child && pidfd < 0 ? 50 : -1);
        if (n < 0 && errno != EINTR) break;
        if (n > 0 && (fds[0].revents & POLLIN)) {
            if (!answer(listener, req, resp, req_size, resp_size)) break;
            continue;
        }
        if (n > 0 && (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))) {
            if (!child) break; /* nobody holds the filter any more */
            hung_up = 1;
        }
        if (child && waitpid(child, status, WNOHANG) == child) break;
    }
    if (pidfd >= 0) close(pidfd);
    free(req);
    free(resp);
}

/* bwrap ended before the one inside sent the listener: the sandbox could not be made. Its
 * cause is the first line bwrap wrote, unless the one inside refused (its own cause stands) */
static void bwrap_failed(int complaints, int status) {
    char text[1024] = "", cause[1100];
    ssize_t n = pread(complaints, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = 0;
    char *line = text;
    while (*line == '\n' || *line == ' ') line++;
    line[strcspn(line, "\n")] = 0;
    if (*line) snprintf(cause, sizeof cause, "%s", line);
    else if (WIFSIGNALED(status))
        snprintf(cause, sizeof cause, "bwrap was killed by signal %d", WTERMSIG(status));
    else snprintf(cause, sizeof cause, "bwrap exited with %d", WEXITSTATUS(status));
    report_refusal(cause);
}

/* what bwrap wrote to `fd` after the sandbox was made, onto stderr (nothing is hidden) */
static void pass_on(int fd) {
    char buf[4096];
    ssize_t n;
    for (off_t at = 0; (n = pread(fd, buf, sizeof buf, at)) > 0; at += n)
        if (write(2, buf, (size_t)n) < 0) break;
    close(fd);
}

int observe(const spec *s, char **argv) {
    parse_observer(s);
    const char *notify = item_value(s, "notify");
    if (!notify) refuse("no notify filter in the spec");
    log_fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) refuse("%s: %s", s->log, strerror(errno));
    int sock[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0)
        refuse("socketpair: %s", strerror(errno));
    /* bwrap's stderr until the sandbox is made: its first line is the cause when bwrap dies
     * before the listener comes (no user namespaces, a mount refused): no probe beforehand */
    int complaints = -1;
    if (s->wait && (complaints = (int)memfd_create("bwrap-stderr", MFD_CLOEXEC)) < 0)
        refuse("memfd_create: %s", strerror(errno));
    for (size_t i = 0; i < NPASSED; i++) signal(PASSED[i], SIG_IGN); /* they reach the group */
    pid_t child = fork();
    if (child < 0) refuse("fork: %s", strerror(errno));
    if (child == 0) {
        for (size_t i = 0; i < NPASSED; i++) signal(PASSED[i], SIG_DFL);
        close(sock[0]);
        close(log_fd);
        confine(s);
        if (s->wait) { /* bwrap: the ctrlz-sandbox inside filters itself and sends */
            char value[48];
            int err = dup(2); /* the command's stderr, which the one inside gives back */
            if (err < 0 || fcntl(sock[1], F_SETFD, 0) < 0
                || (refusal_fd >= 0 && fcntl(refusal_fd, F_SETFD, 0) < 0))
                refuse("handing the listener's socket to bwrap: %s", strerror(errno));
            snprintf(value, sizeof value, "%d:%d:%d", sock[1], err, refusal_fd);
            if (setenv(LISTENER_ENV, value, 1) < 0 || dup2(complaints, 2) < 0)
                refuse("handing the listener's socket to bwrap: %s", strerror(errno));
            exec_command(NULL, argv);
        }
        int listener = load_filter(notify, SECCOMP_FILTER_FLAG_NEW_LISTENER);
        send_fd(sock[1], listener);
        close(listener);
        close(sock[1]);
        exec_command(s->exec, argv);
    }
    close(sock[1]);
    int listener = recv_fd(sock[0]);
    close(sock[0]);
    int status = 0;
    if (listener < 0) {
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        if (s->wait) {
            bwrap_failed(complaints, status);
            return EXIT_REFUSED;
        }
    } else {
        serve(listener, child, &status);
        if (fcntl(listener, F_GETFD) >= 0) {
            struct pollfd p = {listener, POLLIN, 0};
            if (poll(&p, 1, 0) == 0 || (p.revents & POLLIN)) {
                /* processes the command left behind still hold the filter: keep answering
                 * them, from a copy with no terminal or pipe of the run's */
                if (fork() == 0) {
                    int null = open("/dev/null", O_RDWR);
                    for (int fd = 0; fd < 3; fd++) dup2(null, fd);
                    serve(listener, 0, NULL);
                    _exit(0);
                }
            }
            close(listener);
        }
    }
    if (complaints >= 0) pass_on(complaints); /* what bwrap said after the start */
    if (dropped) {
        char line[64];
        int n = snprintf(line, sizeof line, "0%c0%c%c%c%ld%c", 0, 0, 0, 0, dropped, 0);
        if (write(log_fd, line, (size_t)n) < 0) {}
    }
    return ended_as(status, s->wait);
}
