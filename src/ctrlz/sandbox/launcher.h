/* ctrlz-sandbox's parts: the launcher (launcher.c) and the observer of refused writes
 * (observe.c). */
#ifndef CTRLZ_LAUNCHER_H
#define CTRLZ_LAUNCHER_H

#include <stdint.h>
#include <sys/types.h>

#define MAX_ITEMS 65536

typedef struct {
    const char *key, *value;
} item;

/* what SPEC_FILE says (ctrlz/sandbox/spec.py) */
typedef struct {
    const char *record, *extra, *log;
    int self, attr_size, wait, send;
    uint64_t fs, net, scoped, filemask;
    long max;
    int nitems;
    item items[MAX_ITEMS]; /* path, port, seccomp, notify, writable, call: in order */
} spec;

/* the signals a launcher that waits ignores: they reach the command through its group */
#define NPASSED 4
extern const int PASSED[NPASSED];

/* one line on stderr, exit 126 */
void refuse(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void confine(const spec *s);
int load_filter(const char *hex, unsigned flags);
void exec_command(char **argv) __attribute__((noreturn));
int ended_as(int status, int bwrap);
int observe(const spec *s, char **argv);
int send_listener(const spec *s, char **argv) __attribute__((noreturn));

#endif
