/* Where the store is: ctrlz.session.locator's rules in C (the home, the store's name from SHA-256
 * of the workspace's real path and a 40-character slug, the search up from the working
 * directory). Only ever a hint: the daemon locates the caller again with the one locator
 * (ctrlz/door/serve.py). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "door.h"

#define SLUG_MAX 40

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

/* -- where the store is (ctrlz.session.locator) -------------------------------------------------- */

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
char *join(const char *base, const char *name) {
    buf b = {0};
    size_t bl = strlen(base);
    if (buf_str(&b, base) || (bl && base[bl - 1] != '/' && buf_byte(&b, '/')) ||
        buf_str(&b, name))
        return free(b.data), NULL;
    return b.data;
}

/* ctrlz.session.locator.home_dir: $CTRLZ_HOME, else $XDG_DATA_HOME/ctrlz, else
 * ~/.local/share/ctrlz; NULL when it is not an existing directory by an absolute path (the
 * Python CLI then says what is wrong, or makes it) */
char *store_home(void) {
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
    if (!home) trace("the store home is under a ~ this door does not expand (~user, or no $HOME)");
    if (home && (home[0] != '/' || !is_dir(home))) {
        trace("the store home %s is not an existing directory", home);
        free(home);
        return NULL;
    }
    return home;
}

/* ctrlz.session.locator.store_dir: <home>/workspaces/<slug>-<16 hex of sha256(root)> */
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

/* ctrlz.session.locator.locate from `here` (a real path): the nearest directory whose store has a
 * catalog; 0 with *root and *store set, -1 when there is none */
int locate(const char *here, const char *home, char **root, char **store) {
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
