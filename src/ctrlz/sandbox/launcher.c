/* ctrlz-sandbox: the native twin of `python -m ctrlz.sandbox.launcher` (launcher.py).
 *
 *     ctrlz-sandbox SPEC_FILE -- CMD [ARG...]
 *
 * Why C: the Python launcher spent most of a sandboxed run's start-up starting an
 * interpreter (30-100 ms on a busy machine) to make four system calls. Every decision is
 * Python's (ctrlz/sandbox/spec.py writes SPEC_FILE: the Landlock ruleset's masks, each
 * path and its rights, the TCP ports, the seccomp programs as bytes, where the `sandboxed`
 * record goes); this program only applies them, in the order launcher.py does:
 *
 *   1. write the `sandboxed` record (atomically), while the store can still be written;
 *   2. Landlock: create the ruleset, add the rules, no_new_privs, restrict_self;
 *   3. each seccomp filter, in order (TSYNC);
 *   4. exec CMD (same pid), or, with `wait`, run it as a child and die the way it died
 *      (bwrap, whose pid 1 turns "killed by N" into 128+N).
 *
 * With `log` in the spec it also observes (observe.c): the refused writes are recorded; with
 * `send` it is the part of the observer that runs inside bwrap.
 *
 * SPEC_FILE is a series of NUL-terminated `key=value` items (spec.py lists the keys).
 * Any failure before CMD runs: one line on stderr, exit 126, nothing run unconfined.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"

#define EXIT_REFUSED 126

void refuse(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    dprintf(2, "ctrlz: the sandbox could not be made, nothing was run: %s\n", line);
    _exit(EXIT_REFUSED);
}

/* -- the spec ------------------------------------------------------------------------------ */

static char *slurp(const char *path, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) refuse("%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *data = malloc(cap + 1);
    for (;;) {
        if (!data) refuse("out of memory");
        ssize_t got = read(fd, data + len, cap - len);
        if (got < 0) {
            if (errno == EINTR) continue;
            refuse("%s: %s", path, strerror(errno));
        }
        if (got == 0) break;
        len += (size_t)got;
        if (len == cap) data = realloc(data, (cap *= 2) + 1);
    }
    close(fd);
    data[len] = 0;
    *n = len;
    return data;
}

static uint64_t number(const char *text, const char *key) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || (*end && *end != ':')) refuse("bad %s in the spec: %s", key, text);
    return v;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* a hex string as bytes (a sock_filter array) */
static struct sock_fprog *program(const char *hex) {
    size_t n = strlen(hex);
    if (n == 0 || n % 16) refuse("bad seccomp program in the spec");
    unsigned char *code = malloc(n / 2);
    struct sock_fprog *prog = malloc(sizeof *prog);
    if (!code || !prog) refuse("out of memory");
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) refuse("bad seccomp program in the spec");
        code[i] = (unsigned char)(hi << 4 | lo);
    }
    prog->len = (unsigned short)(n / 16);
    prog->filter = (struct sock_filter *)code;
    return prog;
}

static void parse(char *data, size_t len, spec *s) {
    memset(s, 0, sizeof *s);
    for (char *item = data, *next; item < data + len; item = next) {
        next = item + strlen(item) + 1;
        char *value = strchr(item, '=');
        if (!value) refuse("bad item in the spec: %.40s", item);
        *value++ = 0;
        if (!strcmp(item, "record")) s->record = value;
        else if (!strcmp(item, "extra")) s->extra = value;
        else if (!strcmp(item, "self")) s->self = (int)number(value, item);
        else if (!strcmp(item, "attr")) s->attr_size = (int)number(value, item);
        else if (!strcmp(item, "fs")) s->fs = number(value, item);
        else if (!strcmp(item, "net")) s->net = number(value, item);
        else if (!strcmp(item, "scoped")) s->scoped = number(value, item);
        else if (!strcmp(item, "filemask")) s->filemask = number(value, item);
        else if (!strcmp(item, "wait")) s->wait = (int)number(value, item);
        else if (!strcmp(item, "log")) s->log = value;
        else if (!strcmp(item, "max")) s->max = (long)number(value, item);
        else if (!strcmp(item, "send")) s->send = (int)number(value, item);
        else if (!strcmp(item, "path") || !strcmp(item, "port") || !strcmp(item, "seccomp")
                 || !strcmp(item, "notify") || !strcmp(item, "writable")
                 || !strcmp(item, "call")) {
            if (s->nitems == MAX_ITEMS) refuse("too many items in the spec");
            s->items[s->nitems].key = item;
            s->items[s->nitems++].value = value;
        } else refuse("unknown item in the spec: %s", item);
    }
}

/* -- the record ---------------------------------------------------------------------------- */

/* field 22 of /proc/PID/stat (start time in clock ticks since boot), -1 if unknown */
static long long start_time(long pid) {
    char path[64], data[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, data, sizeof data - 1);
    close(fd);
    if (n <= 0) return -1;
    data[n] = 0;
    char *p = strrchr(data, ')');
    if (!p) return -1;
    p += 2;
    for (int field = 0; field < 19 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    return p ? atoll(p) : -1;
}

static long tracer_of(long pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    long tracer = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "TracerPid:", 10)) tracer = atol(line + 10);
    fclose(f);
    return tracer;
}

/* policy.sandboxed_record as JSON, written whole or not at all */
static void write_record(const spec *s) {
    long pid = getpid(), tracer = tracer_of(pid);
    long long tracer_start = tracer ? start_time(tracer) : -1;
    char tmp[4096], ts[32] = "null";
    if (tracer_start >= 0) snprintf(ts, sizeof ts, "%lld", tracer_start);
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", s->record, pid) >= (int)sizeof tmp)
        refuse("record path too long");
    FILE *f = fopen(tmp, "we");
    if (!f) refuse("%s: %s", tmp, strerror(errno));
    fprintf(f, "{\"pid\": %ld, \"start\": %lld, \"self\": %s, \"tracer\": %ld, "
               "\"tracer_start\": %s%s%s}", pid, start_time(pid), s->self ? "true" : "false",
            tracer, ts, s->extra && *s->extra ? ", " : "", s->extra ? s->extra : "");
    if (fclose(f) != 0 || rename(tmp, s->record) != 0)
        refuse("%s: %s", s->record, strerror(errno));
}

/* -- confining ----------------------------------------------------------------------------- */

struct ruleset_attr { uint64_t fs, net, scoped; };
struct path_beneath { uint64_t allowed; int32_t parent_fd; } __attribute__((packed));
struct net_port { uint64_t allowed, port; };

#define LL_CREATE 444
#define LL_ADD_RULE 445
#define LL_RESTRICT 446

static void landlock(const spec *s) {
    if (!s->attr_size) return;
    struct ruleset_attr attr = {s->fs, s->net, s->scoped};
    int rs = (int)syscall(LL_CREATE, &attr, (size_t)s->attr_size, 0U);
    if (rs < 0) refuse("landlock create_ruleset: %s", strerror(errno));
    for (int i = 0; i < s->nitems; i++) {
        const char *key = s->items[i].key, *value = s->items[i].value;
        if (!strcmp(key, "port")) {
            struct net_port rule = {2 /* CONNECT_TCP */, number(value, key)};
            if (syscall(LL_ADD_RULE, rs, 2 /* NET_PORT */, &rule, 0U) < 0)
                refuse("landlock add_rule port %s: %s", value, strerror(errno));
        } else if (!strcmp(key, "path")) {
            uint64_t rights = number(value, key);
            const char *path = strchr(value, ':');
            if (!path) refuse("bad path in the spec");
            int fd = open(++path, O_PATH | O_CLOEXEC);
            if (fd < 0) continue; /* gone since the plan: nothing to grant (launcher.py too) */
            struct stat st;
            if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= s->filemask;
            rights &= s->fs;
            struct path_beneath rule = {rights, fd};
            if (rights && syscall(LL_ADD_RULE, rs, 1 /* PATH_BENEATH */, &rule, 0U) < 0)
                refuse("landlock add_rule %s: %s", path, strerror(errno));
            close(fd);
        }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        refuse("prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    if (syscall(LL_RESTRICT, rs, 0U) < 0) refuse("landlock restrict_self: %s", strerror(errno));
    close(rs);
}

/* install a seccomp program; returns the listener fd with SECCOMP_FILTER_FLAG_NEW_LISTENER */
int load_filter(const char *hex, unsigned flags) {
    struct sock_fprog *prog = program(hex);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        refuse("seccomp: prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog);
    if (fd < 0) refuse("seccomp: the kernel refused the filter: %s", strerror(errno));
    free(prog->filter);
    free(prog);
    return (int)fd;
}

void confine(const spec *s) {
    landlock(s);
    for (int i = 0; i < s->nitems; i++)
        if (!strcmp(s->items[i].key, "seccomp"))
            load_filter(s->items[i].value, SECCOMP_FILTER_FLAG_TSYNC);
}

/* -- running ------------------------------------------------------------------------------- */

const int PASSED[NPASSED] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};

void exec_command(char **argv) {
    execvp(argv[0], argv);
    int err = errno;
    dprintf(2, "ctrlz: %s: %s\n", argv[0], strerror(err));
    _exit(err == ENOENT ? 127 : EXIT_REFUSED);
}

/* end as a command that ended with `status` did: its exit status, or the same signal;
 * `bwrap`: an exit status 128+N is bwrap's pid 1 reporting signal N */
int ended_as(int status, int bwrap) {
    int number = 0;
    if (WIFSIGNALED(status)) number = WTERMSIG(status);
    else if (bwrap && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + NSIG)
        number = WEXITSTATUS(status) - 128;
    if (!number) return WEXITSTATUS(status);
    if (number != SIGKILL && number != SIGSTOP) signal(number, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, number);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), number);
    return 128 + number;
}

static int run_child(char **argv) {
    for (size_t i = 0; i < NPASSED; i++)
        signal(PASSED[i], SIG_IGN); /* they reach the command through the process group */
    pid_t pid = fork();
    if (pid < 0) refuse("fork: %s", strerror(errno));
    if (pid == 0) {
        for (size_t i = 0; i < NPASSED; i++) signal(PASSED[i], SIG_DFL);
        exec_command(argv);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) refuse("waitpid: %s", strerror(errno));
    return ended_as(status, 1);
}

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        dprintf(2, "usage: ctrlz-sandbox SPEC_FILE -- CMD [ARG...]\n");
        return 2;
    }
    size_t len;
    char *data = slurp(argv[1], &len);
    static spec s;
    parse(data, len, &s);
    if (s.send) return send_listener(&s, argv + 3);
    if (s.record) write_record(&s);
    if (s.log) return observe(&s, argv + 3);
    confine(&s);
    if (s.wait) return run_child(argv + 3);
    exec_command(argv + 3);
    return EXIT_REFUSED;
}
