/* ctrlz's native door: the `ctrlz` command where a C compiler was at hand when ctrlz was
 * installed (see src/ctrlz/door/__init__.py for the design, setup.py for the build).
 *
 * `ctrlz snapshot` and `ctrlz snapshot --json` are handed to the workspace daemon, when one
 * runs, without starting Python: this program finds the store as ctrlz.locator.locate does,
 * sends the command, its working directory and the environment that decides the settings
 * and the output's encoding (op "door", answered by ctrlz/door/serve.py), then writes the
 * bytes the daemon rendered with the CLI's own functions and exits with its status.
 *
 * Everything else execs the Python CLI with the interpreter ctrlz was installed with: every
 * other command, no workspace, no daemon, a daemon that declines or does not answer. The
 * Python CLI then meets the case with its full handling; the daemon, not this program,
 * decides which workspace is served (it locates it again with the one locator).
 *
 * Linux only; C99 and POSIX, no library beyond libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

/* the interpreter ctrlz was installed with (setup.py defines it; see python_path) */
#ifndef CTRLZ_PYTHON
#define CTRLZ_PYTHON ""
#endif

#define DOOR_VERSION 1
#define CONNECT_TIMEOUT_S 2
#define REPLY_TIMEOUT_S 300       /* as ctrlz.session.daemon_client.REPLY_TIMEOUT_S */
#define REPLY_MAX (256u << 20)    /* a reply longer than this is no answer */
#define SLUG_MAX 40

/* what the Python CLI runs: the console script's three lines, with argv[0] put back */
static const char LAUNCH[] =
    "import sys; del sys.argv[0]; from ctrlz.cli import main; sys.exit(main())";

/* the variables the daemon needs to see the settings and the output as the Python CLI
 * would (ctrlz/door/serve.py), besides every CTRLZ_* one */
static const char *const ENV_NAMES[] = {
    "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "LC_ALL", "LC_CTYPE", "LANG",
    "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE", "PYTHONLEGACYWINDOWSSTDIO",
    NULL};

extern char **environ;

static int tracing;

static void trace(const char *fmt, ...) {
    if (!tracing) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("ctrlz door: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* -- growing byte buffers -------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} buf;

static int buf_reserve(buf *b, size_t more) {
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

static int buf_add(buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int buf_str(buf *b, const char *s) { return buf_add(b, s, strlen(s)); }

static int buf_byte(buf *b, unsigned char c) { return buf_add(b, &c, 1); }

/* -- UTF-8 as Python decodes it ----------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at s (n bytes left), 0 if none starts there:
 * what Python's strict decoder accepts (no overlong forms, no surrogates, nothing past
 * U+10FFFF). Each byte outside such a sequence is one character of its own to Python's
 * os.fsdecode (a surrogate escape), so counting and escaping byte by byte agrees with it. */
static size_t utf8_len(const unsigned char *s, size_t n) {
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
static int json_bytes(buf *b, const char *p, size_t n) {
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

static int json_str(buf *b, const char *s) { return json_bytes(b, s, strlen(s)); }

/* -- SHA-256 (FIPS 180-4), for the store's name --------------------------------------------- */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
                      K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

/* the first 16 hex digits of SHA-256(data), into hex[17] */
static void sha256_hex16(const char *data, size_t n, char hex[17]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char block[64];
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha256_block(h, (const unsigned char *)data + i);
    size_t rest = n - i;
    memset(block, 0, sizeof block);
    memcpy(block, data + i, rest);
    block[rest] = 0x80;
    if (rest >= 56) {
        sha256_block(h, block);
        memset(block, 0, sizeof block);
    }
    uint64_t bits = (uint64_t)n * 8;
    for (int j = 0; j < 8; j++) block[63 - j] = (unsigned char)(bits >> (8 * j));
    sha256_block(h, block);
    for (int j = 0; j < 8; j++) snprintf(hex + 2 * j, 3, "%02x", (h[j / 4] >> (24 - 8 * (j % 4))) & 0xff);
    hex[16] = '\0';
}

/* -- where the store is (ctrlz.locator) -------------------------------------------------- */

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* os.path.expanduser for the forms this door takes ("~", "~/..."); NULL for the others
 * (~user, no $HOME), which the Python CLI resolves instead */
static char *expand_home(const char *path) {
    if (path[0] != '~') return strdup(path);
    if (path[1] != '\0' && path[1] != '/') return NULL;
    const char *home = getenv("HOME");
    if (!home) return NULL;
    size_t hl = strlen(home);
    while (hl > 0 && home[hl - 1] == '/') hl--;
    buf b = {0};
    if (buf_add(&b, home, hl) || buf_str(&b, path + 1)) return free(b.data), NULL;
    if (b.len == 0 && buf_byte(&b, '/')) return free(b.data), NULL;
    return b.data;
}

/* os.path.join(base, name) */
static char *join(const char *base, const char *name) {
    buf b = {0};
    size_t bl = strlen(base);
    if (buf_str(&b, base) || (bl && base[bl - 1] != '/' && buf_byte(&b, '/')) ||
        buf_str(&b, name))
        return free(b.data), NULL;
    return b.data;
}

/* ctrlz.locator.home_dir: $CTRLZ_HOME, else $XDG_DATA_HOME/ctrlz, else
 * ~/.local/share/ctrlz; NULL when it is not an existing directory by an absolute path (the
 * Python CLI then says what is wrong, or makes it) */
static char *store_home(void) {
    const char *env = getenv("CTRLZ_HOME");
    char *home;
    if (env && *env) home = expand_home(env);
    else {
        const char *base = getenv("XDG_DATA_HOME");
        int blank = 1;
        for (const char *p = base; p && *p; p++)
            if (!strchr(" \t\n\r\v\f", *p)) blank = 0;
        if (blank) {
            char *share = expand_home("~/.local/share");
            home = share ? join(share, "ctrlz") : NULL;
            free(share);
        } else home = join(base, "ctrlz");
    }
    if (home && (home[0] != '/' || !is_dir(home))) {
        trace("the store home %s is not an existing directory", home);
        free(home);
        return NULL;
    }
    return home;
}

/* ctrlz.locator.store_dir: <home>/workspaces/<slug>-<16 hex of sha256(root)> */
static char *store_dir(const char *root, const char *home) {
    const char *name = strrchr(root, '/');
    name = name ? name + 1 : root;
    size_t n = strlen(name);
    char slug[SLUG_MAX + 1];
    size_t len = 0;
    for (size_t i = 0; i < n && len < SLUG_MAX;) {
        unsigned char c = (unsigned char)name[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-') {
            slug[len++] = (char)c;
            i++;
        } else {  /* one character to Python, one "_" */
            size_t cl = utf8_len((const unsigned char *)name + i, n - i);
            slug[len++] = '_';
            i += cl ? cl : 1;
        }
    }
    if (len == 0) memcpy(slug, "root", len = 4);
    slug[len] = '\0';
    char hex[17];
    sha256_hex16(root, strlen(root), hex);
    buf b = {0};
    if (buf_str(&b, home) || (home[strlen(home) - 1] != '/' && buf_byte(&b, '/')) ||
        buf_str(&b, "workspaces/") || buf_str(&b, slug) || buf_byte(&b, '-') ||
        buf_str(&b, hex))
        return free(b.data), NULL;
    return b.data;
}

/* ctrlz.locator.locate from `here` (a real path): the nearest directory whose store has a
 * catalog; 0 with *root and *store set, -1 when there is none */
static int locate(const char *here, const char *home, char **root, char **store) {
    char *candidate = strdup(here);
    if (!candidate) return -1;
    for (;;) {
        char *dir = store_dir(candidate, home);
        char *catalog = dir ? join(dir, "catalog.db") : NULL;
        struct stat st;
        int found = catalog && stat(catalog, &st) == 0 && S_ISREG(st.st_mode);
        free(catalog);
        if (found) {
            *root = candidate;
            *store = dir;
            return 0;
        }
        free(dir);
        char *slash = strrchr(candidate, '/');
        if (!slash || strcmp(candidate, "/") == 0) break;
        if (slash == candidate) slash[1] = '\0';  /* os.path.dirname("/a") == "/" */
        else *slash = '\0';
    }
    free(candidate);
    return -1;
}

/* -- the request ------------------------------------------------------------------------ */

static int wanted(const char *name, size_t len) {
    if (len > 6 && strncmp(name, "CTRLZ_", 6) == 0) return 1;
    for (const char *const *p = ENV_NAMES; *p; p++)
        if (strlen(*p) == len && strncmp(*p, name, len) == 0) return 1;
    return 0;
}

static int build_request(buf *b, int argc, char **argv, const char *cwd, const char *root,
                         const char *store) {
    char version[32];
    snprintf(version, sizeof version, "%d", DOOR_VERSION);
    if (buf_str(b, "{\"op\": \"door\", \"version\": ") || buf_str(b, version) ||
        buf_str(b, ", \"argv\": ["))
        return -1;
    for (int i = 1; i < argc; i++)
        if ((i > 1 && buf_str(b, ", ")) || json_str(b, argv[i])) return -1;
    if (buf_str(b, "], \"cwd\": ") || json_str(b, cwd) || buf_str(b, ", \"root\": ") ||
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

typedef struct {
    int ok, exit_code, has_exit;
    buf out, err, error;
} reply;

/* the reply's "ok", "exit", "out", "err" and "error"; anything else is skipped */
static int parse_reply(const char *data, size_t n, reply *r) {
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

/* -- talking to the daemon --------------------------------------------------------------- */

static void on_interrupt(int sig) {
    (void)sig;
    static const char msg[] = "ctrlz: interrupted\n";  /* as the Python CLI says it */
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(130);
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
    char *path = join(store, "daemon.sock");
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
        snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/daemon.sock", dirfd);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {CONNECT_TIMEOUT_S, 0};
    int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0 &&
             connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    if (!ok) trace("no daemon answered at %s: %s", path, strerror(errno));
    if (dirfd >= 0) close(dirfd);
    free(path);
    if (!ok && fd >= 0) close(fd);
    return ok ? fd : -1;
}

/* The whole door: the exit status when the daemon served the command, -1 to hand it to the
 * Python CLI (nothing was written then). */
static int door(int argc, char **argv) {
    const char *off = getenv("CTRLZ_DOOR");
    if (off && strcmp(off, "0") == 0) return trace("off: $CTRLZ_DOOR is 0"), -1;
    char *home = store_home();
    if (!home) return -1;
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
    if (build_request(&request, argc, argv, cwd, root, store)) goto out;
    /* Ctrl+C ends it as it ends the Python CLI (unless the caller ignores it); a closed pipe
     * is an error to see, not a signal to die of (Python ignores SIGPIPE too). Both are put
     * back before anything is handed to Python. */
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGPIPE, NULL, &old_pipe);
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    if (old_int.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    signals_set = 1;
    fd = connect_daemon(store);
    if (fd < 0) goto out;
    struct timeval tv = {REPLY_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (write_all(fd, request.data, request.len)) {
        trace("the daemon took no request: %s", strerror(errno));
        goto out;
    }
    for (;;) {  /* to the newline, or to the end */
        if (buf_reserve(&answer, 65536)) goto out;
        ssize_t got = read(fd, answer.data + answer.len, 65536);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            trace("no answer: %s", strerror(errno));
            goto out;
        }
        if (got == 0) break;
        answer.len += (size_t)got;
        answer.data[answer.len] = '\0';
        if (answer.data[answer.len - 1] == '\n') break;
        if (answer.len > REPLY_MAX) goto out;
    }
    if (parse_reply(answer.data ? answer.data : "", answer.len, &r) || !r.ok || !r.has_exit) {
        trace("handing over: %s", r.error.data ? r.error.data
                                    : answer.len ? "an answer this door cannot read"
                                                 : "the daemon closed the connection");
        goto out;
    }
    trace("served by the daemon of %s", store);
    status = r.exit_code;
    /* a reader that went away makes a served command fail, as in the Python CLI (ending.py) */
    if (r.out.len && write_all(1, r.out.data, r.out.len) && status == 0) status = 1;
    if (r.err.len) write_all(2, r.err.data, r.err.len);
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

static int executable(const char *path) { return path && *path && access(path, X_OK) == 0; }

/* the interpreter ctrlz was installed with; failing that (a wheel built elsewhere, a venv
 * moved), the python3 or python beside this program */
static char *python_path(void) {
    if (executable(CTRLZ_PYTHON)) return strdup(CTRLZ_PYTHON);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            static const char *const names[] = {"python3", "python"};
            for (int i = 0; i < 2; i++) {
                char *candidate = join(self, names[i]);
                if (executable(candidate)) return candidate;
                free(candidate);
            }
        }
    }
    return NULL;
}

static int run_python(int argc, char **argv) {
    char *python = python_path();
    if (!python) {
        fprintf(stderr, "ctrlz: error: the Python interpreter ctrlz was installed with (%s) is "
                        "gone; reinstall ctrlz (pip install ctrlz)\n",
                *CTRLZ_PYTHON ? CTRLZ_PYTHON : "unknown");
        return 1;
    }
    char **args = calloc((size_t)argc + 5, sizeof *args);
    if (!args) return perror("ctrlz"), 1;
    args[0] = python;
    args[1] = "-P";  /* no working directory on sys.path: a workspace's ctrlz.py is no module */
    args[2] = "-c";
    args[3] = (char *)LAUNCH;
    for (int i = 0; i < argc; i++) args[4 + i] = argv[i];
    trace("running %s for ctrlz", python);
    execv(python, args);
    fprintf(stderr, "ctrlz: error: cannot run %s: %s; reinstall ctrlz (pip install ctrlz)\n",
            python, strerror(errno));
    return 1;
}

int main(int argc, char **argv) {
    const char *t = getenv("CTRLZ_DOOR_TRACE");
    tracing = t && *t && strcmp(t, "0") != 0;
    if (argc == 2 || argc == 3) {
        int form = strcmp(argv[1], "snapshot") == 0 &&
                   (argc == 2 || strcmp(argv[2], "--json") == 0);
        if (form) {
            int status = door(argc, argv);
            if (status >= 0) return status;
        }
    }
    return run_python(argc, argv);
}
