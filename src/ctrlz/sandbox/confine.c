/* Confining this process as the spec says: Landlock, then each seccomp filter; and how a
 * confined command is run and ended. Shared by the launcher (launcher.c) and the observer
 * (observe.c), which confines the child it forks; it calls neither of them.
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

int refusal_fd = -1;

void report_refusal(const char *cause) {
    struct stat st;
    if (refusal_fd < 0) {
        dprintf(2, "ctrlz: the sandbox could not be made, nothing was run: %s\n", cause);
        return;
    }
    if (fstat(refusal_fd, &st) == 0 && st.st_size > 0) return; /* the first cause stands */
    if (dprintf(refusal_fd, "%s\n", cause) < 0) {}
}

/* Why a file rather than stderr, when ctrlz run gives one: ctrlz says it in its own words
 * (one line, exit 2), and an exit status alone cannot tell a refusal from a command's 126. */
void refuse(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    report_refusal(line);
    _exit(EXIT_REFUSED);
}

uint64_t number(const char *text, const char *key) {
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

const int PASSED[NPASSED] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};

/* Why a resolved path: execvp tries each PATH entry in turn, and under the tracer every
 * failed execve is a stop of its own (eight of them for `true` on a PATH of nine) */
void exec_command(const char *path, char **argv) {
    if (path) execv(path, argv);
    else execvp(argv[0], argv);
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
