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
    int self, attr_size, wait;
    uint64_t fs, net, scoped, filemask;
    long max;
    int nitems;
    item items[MAX_ITEMS]; /* path, port, seccomp, notify, writable: in the spec's order */
} spec;

/* one line on stderr, exit 126 */
void refuse(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void confine(const spec *s);
int load_filter(const char *hex, unsigned flags);
void exec_command(char **argv) __attribute__((noreturn));
int pass_through(pid_t child);
int observe(const spec *s, char **argv);

#endif
