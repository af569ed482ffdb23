/* The native door's wire protocol, written by scripts/gen_door_header.py from its one
 * definition, src/ctrlz/protocol.py (where each value says why it is what it is).
 * Do not edit: tests/door/test_protocol.py fails when this is not what the script
 * writes. */
#ifndef CTRLZ_DOOR_PROTOCOL_H
#define CTRLZ_DOOR_PROTOCOL_H

#define DOOR_OP "door"
#define DOOR_VERSION 1
#define SOCKET_NAME "daemon.sock"
#define STARTING_NAME "daemon.starting"
#define CONNECT_TIMEOUT_MS 2000
#define REPLY_TIMEOUT_MS 300000
#define HOOK_REPLY_TIMEOUT_MS 10000
#define HOOK_START_BY_NS 8000000000LL
#define REPLY_MAX 268435456u
#define HOOK_INPUT_MAX 16777216u
#define HOOK "hook"
#define HOOK_MIN_ARGS 1
#define HOOK_MAX_ARGS 2
#define ENV_PREFIX "CTRLZ_"
#define OFF_VAR "CTRLZ_DOOR"
#define TRACE_VAR "CTRLZ_DOOR_TRACE"
#define TRACE_PREFIX "ctrlz door: "
#define RESTORE_FAILED 7  /* a failed restore's exit status */

/* the variables the request carries besides every ENV_PREFIX one */
#define ENV_NAMES_INIT { \
    "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "LC_ALL", "LC_CTYPE", "LANG", \
    "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE", "PYTHONLEGACYWINDOWSSTDIO", \
    "CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR", NULL}

/* a command line the door hands to the daemon: COMMAND [OPERAND] [OPTION...], each
 * option at most once, in any order (ctrlz.protocol.Form) */
typedef struct {
    const char *command;
    int operand;                 /* one argument that is not an option comes first */
    int once;                    /* never asked twice: a rollback */
    const char *const *options;  /* NULL-terminated */
} door_form;

/* every form the door serves, and {NULL...} */
#define DOOR_FORMS_INIT { \
    {"snapshot", 0, 0, (const char *const[]){"--json", NULL}}, \
    {"list", 0, 0, (const char *const[]){"--json", NULL}}, \
    {"rollback", 1, 1, (const char *const[]){"--json", NULL}}, \
    {NULL, 0, 0, NULL}}

#endif
