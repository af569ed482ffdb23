/* The native door's parts (see client.c): byte buffers and JSON text (wire.c), where the
 * store is (locate.c), its trace (trace.c). */
#ifndef CTRLZ_DOOR_H
#define CTRLZ_DOOR_H

#include <stddef.h>

typedef struct {
    char *data;
    size_t len, cap;
} buf;

int buf_reserve(buf *b, size_t more);
int buf_add(buf *b, const void *p, size_t n);
int buf_str(buf *b, const char *s);
int buf_byte(buf *b, unsigned char c);

/* the length of the well-formed UTF-8 sequence at s (n bytes left), 0 if none starts there */
size_t utf8_len(const unsigned char *s, size_t n);
/* bytes as a JSON string whose value is Python's os.fsdecode(bytes) */
int json_bytes(buf *b, const char *p, size_t n);
int json_str(buf *b, const char *s);

/* what this door reads of the daemon's reply */
typedef struct {
    int ok, exit_code, has_exit;
    buf out, err, error;
} reply;

int parse_reply(const char *data, size_t n, reply *r);

/* os.path.join(base, name), malloc'd */
char *join(const char *base, const char *name);
/* the store home (ctrlz.session.locator.home_dir), NULL when the Python CLI must decide */
char *store_home(void);
/* ctrlz.session.locator.locate from the real path `here`: 0 with *root and *store set, else -1 */
int locate(const char *here, const char *home, char **root, char **store);

/* a line on stderr when `tracing` (set from $CTRLZ_DOOR_TRACE) asks for it (trace.c) */
extern int tracing;
void trace(const char *fmt, ...);

#endif
