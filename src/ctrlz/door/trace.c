/* The native door's trace: what it did and why, on stderr, when $CTRLZ_DOOR_TRACE asks. */
#include <stdarg.h>
#include <stdio.h>

#include "door.h"
#include "protocol.h"

int tracing;

void trace(const char *fmt, ...) {
    if (!tracing) return;
    va_list ap;
    va_start(ap, fmt);
    fputs(TRACE_PREFIX, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
