/* ctrlz's native door: the `ctrlz` command where a C compiler was at hand when ctrlz was
 * installed (see src/ctrlz/door/__init__.py for the design, setup.py for the build).
 *
 * `ctrlz snapshot [--json]` and `ctrlz list [--json]` are handed to the workspace daemon,
 * when one runs, without starting Python: this program finds the store as
 * ctrlz.session.locator.locate does, sends the command, its working directory, whether stdout is a
 * terminal and the environment that decides the settings and the output's encoding (op
 * "door", answered by ctrlz/door/serve.py), then writes the bytes the daemon rendered with
 * the CLI's own functions and exits with its status.
 *
 * Everything else execs the Python CLI with the interpreter ctrlz was installed with: every
 * other command, no workspace, no daemon, a daemon that declines or does not answer. The
 * Python CLI then meets the case with its full handling; the daemon, not this program,
 * decides which workspace is served (it locates it again with the one locator).
 *
 * This file is the program (the request, the socket, the Python CLI); wire.c writes and
 * reads JSON text, locate.c finds the store, trace.c says what happened; protocol.h, written
 * from ctrlz/protocol.py, is what it shares with the daemon and the Python CLI: the
 * forms, the version, the timeouts. Every hand-over to the Python CLI says why under
 * $CTRLZ_DOOR_TRACE. Linux only; C99 and POSIX, libc only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "door.h"
#include "protocol.h"

/* the interpreter ctrlz was installed with (setup.py defines it; see python_path) */
#ifndef CTRLZ_PYTHON
#define CTRLZ_PYTHON ""
#endif

/* A hook waits HOOK_REPLY_TIMEOUT_MS for the daemon, then does its work itself; the daemon
 * starts no hook work after HOOK_START_BY_NS (the request's "start_by_ns", on
 * CLOCK_MONOTONIC, which every process of the machine shares). Why: protocol.py. A reply
 * longer than REPLY_MAX is no answer. */

/* what the Python CLI runs: the console script's three lines, with argv[0] put back */
static const char LAUNCH[] =
    "import sys; del sys.argv[0]; from ctrlz.cli import main; sys.exit(main())";

/* the variables the daemon needs to see the settings and the output as the Python CLI
 * would (ctrlz/door/serve.py), besides every CTRLZ_* one */
static const char *const ENV_NAMES[] = ENV_NAMES_INIT;

extern char **environ;

/* -- the forms --------------------------------------------------------------------------- */

static const door_form FORMS[] = DOOR_FORMS_INIT;

/* the form argv[1:] is, NULL if none (as ctrlz.protocol.form_of) */
static const door_form *form_of(int argc, char **argv) {
    for (const door_form *f = FORMS; argc >= 2 && f->command; f++) {
        if (strcmp(argv[1], f->command) != 0) continue;
        int i = 2;
        if (f->operand && (i >= argc || argv[i++][0] == '-')) return NULL;
        unsigned seen = 0;
        for (; i < argc; i++) {
            unsigned k = 0;
            while (f->options[k] && strcmp(argv[i], f->options[k]) != 0) k++;
            if (!f->options[k] || seen & (1u << k)) return NULL;
            seen |= 1u << k;
        }
        return f;
    }
    return NULL;
}

static struct timeval timeout(long ms) {
    struct timeval tv = {ms / 1000, ms % 1000 * 1000};
    return tv;
}

/* -- the request ------------------------------------------------------------------------ */

static int wanted(const char *name, size_t len) {
    size_t prefix = strlen(ENV_PREFIX);
    if (len > prefix && strncmp(name, ENV_PREFIX, prefix) == 0) return 1;
    for (const char *const *p = ENV_NAMES; *p; p++)
        if (strlen(*p) == len && strncmp(*p, name, len) == 0) return 1;
    return 0;
}

/* the request for argv[1:]; for a hook, ["hook", argv[1:]...] and its payload `stdin` */
static int build_request(buf *b, int argc, char **argv, const buf *stdin_data, const char *cwd,
                         const char *root, const char *store) {
    char version[32];
    snprintf(version, sizeof version, "%d", DOOR_VERSION);
    if (buf_str(b, "{\"op\": \"" DOOR_OP "\", \"version\": ") || buf_str(b, version) ||
        buf_str(b, ", \"argv\": [") || (stdin_data && buf_str(b, "\"" HOOK "\"")))
        return -1;
    for (int i = 1; i < argc; i++)
        if (((i > 1 || stdin_data) && buf_str(b, ", ")) || json_str(b, argv[i])) return -1;
    if (buf_str(b, "]")) return -1;
    if (stdin_data && (buf_str(b, ", \"stdin\": ") ||
                       json_bytes(b, stdin_data->data ? stdin_data->data : "", stdin_data->len)))
        return -1;
    if (stdin_data) {
        struct timespec now;
        char start_by[48];
        if (clock_gettime(CLOCK_MONOTONIC, &now)) return -1;
        snprintf(start_by, sizeof start_by, ", \"start_by_ns\": %lld",
                 (long long)now.tv_sec * 1000000000LL + now.tv_nsec + HOOK_START_BY_NS);
        if (buf_str(b, start_by)) return -1;
    }
    if (buf_str(b, ", \"tty\": ") || buf_str(b, isatty(1) ? "true" : "false") ||
        buf_str(b, ", \"tty_err\": ") || buf_str(b, isatty(2) ? "true" : "false") ||
        buf_str(b, ", \"cwd\": ") || json_str(b, cwd) || buf_str(b, ", \"root\": ") ||
        json_str(b, root) || buf_str(b, ", \"store\": ") || json_str(b, store) ||
        buf_str(b, ", \"env\": {"))
        return -1;
    int first = 1;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !wanted(*e, (size_t)(eq - *e))) continue;
        if ((!first && buf_str(b, ", ")) || json_bytes(b, *e, (size_t)(eq - *e)) ||
            buf_str(b, ": ") || json_str(b, eq + 1))
            return -1;
        first = 0;
    }
    return buf_str(b, "}}\n");
}

/* -- talking to the daemon --------------------------------------------------------------- */

/* what Ctrl+C prints and exits with, as the Python CLI would at that point */
static const char *interrupt_msg = "ctrlz: interrupted\n";
static int interrupt_status = 130;

/* a rollback, from the moment it is asked for (ctrlz.session.served.ask_restore's words) */
static const char ROLLBACK_INTERRUPTED[] =
    "ctrlz: error: interrupted; the workspace daemon goes on with the rollback if it had "
    "received it: run `ctrlz list` in a moment for its safety snapshot, which `ctrlz undo` "
    "returns to\n";

static void on_interrupt(int sig) {
    (void)sig;
    ssize_t ignored = write(2, interrupt_msg, strlen(interrupt_msg));
    (void)ignored;
    _exit(interrupt_status);
}

/* A rollback the daemon received whole and did not answer: it may have run, so it is never
 * run again; the words and status are ctrlz.session.served.ask_restore's. */
static int rollback_lost(const char *why) {
    fprintf(stderr, "ctrlz: error: the workspace daemon stopped during the rollback without "
                    "answering (%s); it may have been applied in part. The next ctrlz command "
                    "cleans up after it from its journal and records its undo entry: run "
                    "`ctrlz status`, then `ctrlz undo` to return to the state before it\n",
            why);
    return RESTORE_FAILED;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* connect to <store>/daemon.sock (by /proc/self/fd/N/daemon.sock when the path is too long
 * for a socket address, as ctrlz.session.daemon_client.unix_address does); -1 if none */
static int connect_daemon(const char *store) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int dirfd = -1;
    char *path = join(store, SOCKET_NAME);
    if (!path) return -1;
    struct stat st;
    if (stat(path, &st) != 0) {
        trace("no daemon: %s is not there", path);
        free(path);
        return -1;
    }
    if (strlen(path) < 100) snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    else {
        dirfd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) return free(path), -1;
        snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/" SOCKET_NAME, dirfd);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = timeout(CONNECT_TIMEOUT_MS);
    int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0 &&
             connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    if (!ok) trace("no daemon answered at %s: %s", path, strerror(errno));
    if (dirfd >= 0) close(dirfd);
    free(path);
    if (!ok && fd >= 0) close(fd);
    return ok ? fd : -1;
}

/* The whole door: the exit status when the daemon served the command, -1 to hand it to the
 * Python CLI (nothing was written then). ``once``: a rollback, which must not run twice: once
 * the request is sent whole, only the daemon's answer or an error ends it. ``hook``: the
 * payload of `ctrlz-hook`, whose work may run twice (see hook_door), never not at all. */
static int door(int argc, char **argv, int once, const buf *hook) {
    const char *off = getenv(OFF_VAR);
    if (off && strcmp(off, "0") == 0) return trace("off: $" OFF_VAR " is 0"), -1;
    char *home = store_home();
    if (!home) return -1;  /* store_home said why */
    char *cwd = getcwd(NULL, 0);
    char *root = NULL, *store = NULL;
    int fd = -1, status = -1, signals_set = 0;
    struct sigaction old_int, old_pipe;
    buf request = {0}, answer = {0};
    reply r = {0};
    if (!cwd) {
        trace("no working directory: %s", strerror(errno));
        goto out;
    }
    if (locate(cwd, home, &root, &store)) {
        trace("%s is not in a workspace under %s", cwd, home);
        goto out;
    }
    if (build_request(&request, argc, argv, hook, cwd, root, store)) {
        trace("no memory for the request");
        goto out;
    }
    /* Ctrl+C ends it as it ends the Python CLI (unless the caller ignores it); a closed pipe
     * is an error to see, not a signal to die of (Python ignores SIGPIPE too). Both are put
     * back before anything is handed to Python. */
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGPIPE, NULL, &old_pipe);
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    if (once) interrupt_msg = ROLLBACK_INTERRUPTED, interrupt_status = RESTORE_FAILED;
    if (old_int.sa_handler != SIG_IGN && !hook) sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    signals_set = 1;
    if (!hook) {  /* a starting daemon declines all but hooks: no connection, no decline */
        char *starting = join(store, STARTING_NAME);
        struct stat st;
        int is_starting = starting && stat(starting, &st) == 0;
        free(starting);
        if (is_starting) {
            trace("the daemon is starting (%s/" STARTING_NAME ")", store);
            goto out;
        }
    }
    fd = connect_daemon(store);
    if (fd < 0) goto out;
    /* a restore takes what it takes; a hook must leave time to do its work itself */
    struct timeval tv = timeout(once ? 0 : hook ? HOOK_REPLY_TIMEOUT_MS : REPLY_TIMEOUT_MS);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write_all(fd, request.data, request.len)) {
        trace("the daemon took no request: %s", strerror(errno));
        goto out;  /* not whole: the daemon reads to the newline and did nothing */
    }
    char lost[128] = "";
    for (;;) {  /* to the newline, or to the end */
        if (buf_reserve(&answer, 65536)) {
            snprintf(lost, sizeof lost, "no memory for the answer");
            trace("%s", lost);
            break;
        }
        ssize_t got = read(fd, answer.data + answer.len, 65536);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int err = errno;
            snprintf(lost, sizeof lost, "[Errno %d] %s", err, strerror(err));
            trace("no answer: %s", lost);
            /* the hook's own process must not wait for this daemon a second time: the agent
             * gives a hook 30 s (ctrlz.toolcalls.shell.workspace_snapshot reads this) */
            if (hook && (err == EAGAIN || err == EWOULDBLOCK))
                setenv("CTRLZ_HOOK_DAEMON_LATE", "1", 1);
            break;
        }
        if (got == 0) break;
        answer.len += (size_t)got;
        answer.data[answer.len] = '\0';
        if (answer.data[answer.len - 1] == '\n') break;
        if (answer.len > REPLY_MAX) {
            snprintf(lost, sizeof lost, "an answer longer than %u bytes", REPLY_MAX);
            trace("%s", lost);
            break;
        }
    }
    if (!*lost && parse_reply(answer.data ? answer.data : "", answer.len, &r))
        snprintf(lost, sizeof lost, "%s", answer.len ? "an answer this door cannot read"
                                                     : "empty message");
    if (*lost) {
        trace("%s: the daemon closed the connection (%s)", once ? "stopping" : "handing over",
              lost);
        if (once) status = rollback_lost(lost);
        goto out;
    }
    if (!r.ok || !r.has_exit) {  /* declined: nothing was done */
        trace("handing over: %s", r.error.data ? r.error.data : "no status in the answer");
        goto out;
    }
    trace("served by the daemon of %s", store);
    status = r.exit_code;
    /* a reader that went away makes a served command fail, as in the Python CLI (ending.py) */
    if (r.out.len && write_all(1, r.out.data, r.out.len) && status == 0) status = 1;
    if (r.err.len && write_all(2, r.err.data, r.err.len) && status == 0) status = 1;
out:
    if (fd >= 0) close(fd);
    if (signals_set) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGPIPE, &old_pipe, NULL);
    }
    free(home), free(cwd), free(root), free(store);
    free(request.data), free(answer.data), free(r.out.data), free(r.err.data), free(r.error.data);
    return status;
}

/* -- the Python CLI ------------------------------------------------------------------------ */

/* Exec Python running `launch` with argv: with the interpreter ctrlz was installed with;
 * failing that (a wheel built elsewhere, a venv moved), with the python3 or python beside
 * this program. In a venv (a pyvenv.cfg above this program's directory) the venv's own
 * python comes first: a wheel built for another venv and reused from pip's cache names that
 * other venv's interpreter, which may still be there, with another ctrlz in it. Each is
 * tried by exec itself, not by access(), which a process with capabilities (setpriv as
 * root) sees differently. Returns only when none could run: 1, or 0 for a hook, which never
 * fails the agent (it says why on stderr, as the installed hook command does when
 * ctrlz-hook is missing). */
static int run_python(int argc, char **argv, const char *launch, int hook) {
    char **args = calloc((size_t)argc + 5, sizeof *args);
    if (!args) return perror("ctrlz"), !hook;
    args[1] = "-P";  /* no working directory on sys.path: a workspace's ctrlz.py is no module */
    args[2] = "-c";
    args[3] = (char *)launch;
    for (int i = 0; i < argc; i++) args[4 + i] = argv[i];
    char *candidates[3] = {NULL, NULL, NULL};
    int n = 0;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = len > 0 ? (self[len] = '\0', strrchr(self, '/')) : NULL;
    int venv = 0;
    if (slash) {
        *slash = '\0';
        char *cfg = join(self, "../pyvenv.cfg");
        struct stat st;
        venv = cfg && stat(cfg, &st) == 0 && S_ISREG(st.st_mode);
        free(cfg);
    }
    if (*CTRLZ_PYTHON && !venv) candidates[n++] = strdup(CTRLZ_PYTHON);
    if (slash) {
        candidates[n++] = join(self, "python3");
        candidates[n++] = join(self, "python");
    }
    if (*CTRLZ_PYTHON && venv) candidates[n++] = strdup(CTRLZ_PYTHON);
    const char *first = NULL;
    int first_errno = ENOENT;
    for (int i = 0; i < n; i++) {
        if (!candidates[i]) continue;
        args[0] = candidates[i];
        trace("running %s for ctrlz", candidates[i]);
        execv(candidates[i], args);
        if (!first) first = candidates[i], first_errno = errno;
    }
    const char *what = hook ? "; this session is not protected" : "";
    if (first_errno == ENOENT)
        fprintf(stderr, "ctrlz: error: the Python interpreter ctrlz was installed with (%s) is "
                        "gone; reinstall ctrlz (pip install ctrlz)%s\n",
                *CTRLZ_PYTHON ? CTRLZ_PYTHON : "unknown", what);
    else
        fprintf(stderr, "ctrlz: error: cannot run %s: %s; reinstall ctrlz (pip install ctrlz)%s\n",
                first, strerror(first_errno), what);
    return !hook;
}

/* -- the hook: `ctrlz-hook AGENT [EVENT]` ---------------------------------------------------- */

/* what the Python hook runs: the ctrlz-hook console script's lines, with argv[0] put back */
static const char HOOK_LAUNCH[] =
    "import sys; del sys.argv[0]; from ctrlz.hooks.runner import main; main()";

/* stdin to its end, or its first HOOK_INPUT_MAX bytes, as the Python hook reads it */
static int read_payload(buf *b) {
    while (b->len < HOOK_INPUT_MAX) {
        if (buf_reserve(b, 65536)) return trace("no memory for the payload"), -1;
        size_t want = HOOK_INPUT_MAX - b->len < 65536 ? HOOK_INPUT_MAX - b->len : 65536;
        ssize_t got = read(0, b->data + b->len, want);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return trace("stdin: %s", strerror(errno)), -1;
        if (got == 0) break;
        b->len += (size_t)got;
    }
    return 0;
}

/* a file holding `b`, read from its start, as stdin: what the Python hook reads when the
 * door has read the agent's stdin already */
static int payload_as_stdin(const buf *b) {
    int fd = -1;
#ifdef SYS_memfd_create
    fd = (int)syscall(SYS_memfd_create, "ctrlz-hook-stdin", 0);
#endif
    if (fd < 0) fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
    if (fd < 0) return trace("no file for the payload: %s", strerror(errno)), -1;
    int ok = (!b->len || write_all(fd, b->data, b->len) == 0) && lseek(fd, 0, SEEK_SET) == 0 &&
             (fd == 0 || dup2(fd, 0) == 0);
    if (fd != 0) close(fd);
    return ok ? 0 : -1;
}

/* The hook: the agent's payload handed to the workspace daemon with the caller's directory
 * and environment (ctrlz/door/serve.py runs the same Python as the hook's own process would,
 * in the daemon, with everything loaded). Anything else, and a daemon that took the payload
 * but gave no answer, runs the Python hook on the same payload: a hook's work is done at
 * least once, never lost (done twice, a capture or a shell snapshot is the same one; see
 * ctrlz/door/__init__.py). Always exits 0, as the Python hook does. */
static int hook_door(int argc, char **argv) {
    const char *off = getenv(OFF_VAR);
    int form = argc - 1 >= HOOK_MIN_ARGS && argc - 1 <= HOOK_MAX_ARGS;
    if ((off && strcmp(off, "0") == 0) || !form) {
        trace("the Python hook: %s", !form ? "not AGENT [EVENT]" : "$" OFF_VAR " is 0");
        return run_python(argc, argv, HOOK_LAUNCH, 1);
    }
    buf payload = {0};
    if (read_payload(&payload) == 0) {
        int status = door(argc, argv, 0, &payload);
        if (status >= 0) return free(payload.data), 0;
    }
    if (payload_as_stdin(&payload)) trace("the Python hook reads what is left of stdin");
    free(payload.data);
    return run_python(argc, argv, HOOK_LAUNCH, 1);
}

int main(int argc, char **argv) {
    const char *t = getenv(TRACE_VAR);
    tracing = t && *t && strcmp(t, "0") != 0;
    const char *name = argc > 0 ? strrchr(argv[0], '/') : NULL;
    name = name ? name + 1 : argc > 0 ? argv[0] : "";
    if (strcmp(name, "ctrlz-hook") == 0) return hook_door(argc, argv);
    const door_form *form = form_of(argc, argv);
    if (form) {
        int status = door(argc, argv, form->once, NULL);
        if (status >= 0) return status;
    } else trace("not a form the door serves: the Python CLI runs it");
    return run_python(argc, argv, LAUNCH, 0);
}
