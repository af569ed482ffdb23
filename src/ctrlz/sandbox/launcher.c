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
 * Any failure before CMD runs: its cause in the spec's `refusal` file (ctrlz run then says it
 * and exits 2) or, without one, one line on stderr; exit 126, nothing run unconfined.
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

#include "confine.h"
#include "observe.h"

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
        else if (!strcmp(item, "refusal")) s->refusal = value;
        else if (!strcmp(item, "exec")) s->exec = value;
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

/* -- running ------------------------------------------------------------------------------- */

static int run_child(char **argv) {
    for (size_t i = 0; i < NPASSED; i++)
        signal(PASSED[i], SIG_IGN); /* they reach the command through the process group */
    pid_t pid = fork();
    if (pid < 0) refuse("fork: %s", strerror(errno));
    if (pid == 0) {
        for (size_t i = 0; i < NPASSED; i++) signal(PASSED[i], SIG_DFL);
        exec_command(NULL, argv);
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
    if (s.refusal) {
        refusal_fd = open(s.refusal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (refusal_fd < 0) refuse("%s: %s", s.refusal, strerror(errno));
    }
    if (s.send) return send_listener(&s, argv + 3);
    if (s.record) write_record(&s);
    if (s.log) return observe(&s, argv + 3);
    confine(&s);
    if (s.wait) return run_child(argv + 3);
    exec_command(s.exec, argv + 3);
    return EXIT_REFUSED;
}
