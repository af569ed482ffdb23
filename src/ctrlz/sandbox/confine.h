/* What ctrlz-sandbox's parts share: the spec, and confining (confine.c). The launcher
 * (launcher.c) and the observer (observe.c) use it; it uses neither. */
#ifndef CTRLZ_CONFINE_H
#define CTRLZ_CONFINE_H

#include <stdint.h>
#include <sys/types.h>

#define MAX_ITEMS 65536

typedef struct {
    const char *key, *value;
} item;

/* what SPEC_FILE says (ctrlz/sandbox/spec.py) */
typedef struct {
    const char *record, *extra, *log, *refusal, *exec;
    int self, attr_size, wait, send;
    uint64_t fs, net, scoped, filemask;
    long max;
    int nitems;
    item items[MAX_ITEMS]; /* path, port, seccomp, notify, writable, call: in order */
} spec;

/* the signals a launcher that waits ignores: they reach the command through its group */
#define NPASSED 4
extern const int PASSED[NPASSED];

#define EXIT_REFUSED 126

/* where refuse() writes its cause for ctrlz run (the spec's `refusal` file, opened by main,
 * or an fd handed into bwrap); -1: on stderr */
extern int refusal_fd;
/* the cause in the refusal file, else one line on stderr; exit 126 */
void refuse(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* the cause written to the refusal file unless one is there already, without exiting */
void report_refusal(const char *cause);
/* a number item of the spec (up to a ':'), or refuse */
uint64_t number(const char *text, const char *key);
void confine(const spec *s);
int load_filter(const char *hex, unsigned flags);
/* exec `argv`: the file `path` when given (the spec's `exec`, which ctrlz run resolved on the
 * agent's PATH), else argv[0] searched on PATH */
void exec_command(const char *path, char **argv) __attribute__((noreturn));
int ended_as(int status, int bwrap);

#endif
