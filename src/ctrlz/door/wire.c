/* The native door's wire: growing byte buffers, JSON text written as Python's os.fsdecode
 * reads it, and the daemon's reply read as far as the door needs (see client.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "door.h"

/* -- growing byte buffers -------------------------------------------------------------- */

int buf_reserve(buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    char *data = realloc(b->data, cap);
    if (!data) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

int buf_add(buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_str(buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

int buf_byte(buf *b, unsigned char c) { return buf_add(b, &c, 1); }

/* -- UTF-8 as Python decodes it ----------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at s (n bytes left), 0 if none starts there:
 * what Python's strict decoder accepts (no overlong forms, no surrogates, nothing past
 * U+10FFFF). Each byte outside such a sequence is one character of its own to Python's
 * os.fsdecode (a surrogate escape), so counting and escaping byte by byte agrees with it. */
size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

/* bytes as a JSON string whose value is os.fsdecode(bytes): well-formed UTF-8 as it is,
 * every other byte as the surrogate escape \udcXX */
int json_bytes(buf *b, const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    char esc[8];
    if (buf_byte(b, '"')) return -1;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            if (buf_byte(b, '\\') || buf_byte(b, c)) return -1;
            i++;
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            if (buf_str(b, esc)) return -1;
            i++;
        } else {
            size_t len = utf8_len(s + i, n - i);
            if (len) {
                if (buf_add(b, s + i, len)) return -1;
                i += len;
            } else {
                snprintf(esc, sizeof esc, "\\udc%02x", c);
                if (buf_str(b, esc)) return -1;
                i++;
            }
        }
    }
    return buf_byte(b, '"');
}

int json_str(buf *b, const char *s) { return json_bytes(b, s, strlen(s)); }

/* -- the reply: one JSON object, read as far as this door needs ---------------------------- */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && strchr(" \t\r\n", *c->p) && *c->p) c->p++;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
        else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static int put_utf8(buf *b, unsigned cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (unsigned char)cp, n = 1;
    else if (cp < 0x800) u[0] = 0xC0 | (cp >> 6), u[1] = 0x80 | (cp & 0x3F), n = 2;
    else if (cp < 0x10000)
        u[0] = 0xE0 | (cp >> 12), u[1] = 0x80 | ((cp >> 6) & 0x3F), u[2] = 0x80 | (cp & 0x3F),
        n = 3;
    else
        u[0] = 0xF0 | (cp >> 18), u[1] = 0x80 | ((cp >> 12) & 0x3F),
        u[2] = 0x80 | ((cp >> 6) & 0x3F), u[3] = 0x80 | (cp & 0x3F), n = 4;
    return buf_add(b, u, n);
}

/* A JSON string at c->p into `out` (may be NULL: skip it). latin1: every character must be
 * below U+0100 and becomes one byte (the daemon's "out" and "err"); else UTF-8, with a lone
 * surrogate as "?" (only ever shown by the trace). */
static int read_string(cursor *c, buf *out, int latin1) {
    if (c->p >= c->end || *c->p != '"') return -1;
    c->p++;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        unsigned cp;
        if (ch == '"') {
            c->p++;
            return 0;
        }
        if (ch == '\\') {
            if (c->end - c->p < 2) return -1;
            char e = c->p[1];
            c->p += 2;
            switch (e) {
                case '"': cp = '"'; break;
                case '\\': cp = '\\'; break;
                case '/': cp = '/'; break;
                case 'b': cp = '\b'; break;
                case 'f': cp = '\f'; break;
                case 'n': cp = '\n'; break;
                case 'r': cp = '\r'; break;
                case 't': cp = '\t'; break;
                case 'u':
                    if (c->end - c->p < 4 || hex4(c->p, &cp)) return -1;
                    c->p += 4;
                    if (cp >= 0xD800 && cp <= 0xDBFF && c->end - c->p >= 6 && c->p[0] == '\\' &&
                        c->p[1] == 'u') {
                        unsigned lo;
                        if (!hex4(c->p + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            c->p += 6;
                        }
                    }
                    break;
                default: return -1;
            }
        } else if (ch < 0x80) {
            cp = ch;
            c->p++;
        } else {  /* raw UTF-8 */
            size_t len = utf8_len((const unsigned char *)c->p, (size_t)(c->end - c->p));
            if (!len) return -1;
            const unsigned char *s = (const unsigned char *)c->p;
            cp = len == 2 ? (s[0] & 0x1Fu) << 6 | (s[1] & 0x3Fu)
               : len == 3 ? (s[0] & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu)
                          : (s[0] & 0x07u) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 |
                                (s[3] & 0x3Fu);
            c->p += len;
        }
        if (!out) continue;
        if (latin1) {
            if (cp > 0xFF || buf_byte(out, (unsigned char)cp)) return -1;
        } else if (put_utf8(out, (cp >= 0xD800 && cp <= 0xDFFF) ? '?' : cp)) return -1;
    }
    return -1;
}

static int skip_value(cursor *c, int depth);

static int skip_container(cursor *c, int depth, char close) {
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) return c->p++, 0;
    for (;;) {
        if (close == '}') {
            if (read_string(c, NULL, 0)) return -1;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':') return -1;
            c->p++;
        }
        if (skip_value(c, depth + 1)) return -1;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            skip_ws(c);
            continue;
        }
        if (c->p < c->end && *c->p == close) return c->p++, 0;
        return -1;
    }
}

static int skip_value(cursor *c, int depth) {
    skip_ws(c);
    if (c->p >= c->end || depth > 64) return -1;
    char ch = *c->p;
    if (ch == '"') return read_string(c, NULL, 0);
    if (ch == '{') return skip_container(c, depth, '}');
    if (ch == '[') return skip_container(c, depth, ']');
    const char *start = c->p;
    while (c->p < c->end && (strchr("+-.eE", *c->p) || (*c->p >= '0' && *c->p <= '9') ||
                             (*c->p >= 'a' && *c->p <= 'z')))
        c->p++;
    return c->p > start ? 0 : -1;
}

/* the reply's "ok", "exit", "out", "err" and "error"; anything else is skipped */
int parse_reply(const char *data, size_t n, reply *r) {
    cursor c = {data, data + n};
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{') return -1;
    c.p++;
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}') return 0;
    for (;;) {
        buf key = {0};
        if (read_string(&c, &key, 0)) return free(key.data), -1;
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':') return free(key.data), -1;
        c.p++;
        skip_ws(&c);
        const char *k = key.data ? key.data : "";
        int rc = 0;
        if (strcmp(k, "ok") == 0) {
            r->ok = c.end - c.p >= 4 && strncmp(c.p, "true", 4) == 0;
            rc = skip_value(&c, 0);
        } else if (strcmp(k, "exit") == 0) {
            char *stop;
            long v = strtol(c.p, &stop, 10);
            if (stop == c.p || v < 0 || v > 255) rc = -1;
            else r->exit_code = (int)v, r->has_exit = 1, c.p = stop;
        } else if (strcmp(k, "out") == 0) rc = read_string(&c, &r->out, 1);
        else if (strcmp(k, "err") == 0) rc = read_string(&c, &r->err, 1);
        else if (strcmp(k, "error") == 0 && *c.p == '"') rc = read_string(&c, &r->error, 0);
        else rc = skip_value(&c, 0);
        free(key.data);
        if (rc) return -1;
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            skip_ws(&c);
            continue;
        }
        return c.p < c.end && *c.p == '}' ? 0 : -1;
    }
}
