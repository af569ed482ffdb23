/* The observer of refused writes (observe.c), which the launcher (launcher.c) runs. */
#ifndef CTRLZ_OBSERVE_H
#define CTRLZ_OBSERVE_H

#include "confine.h"

/* fork, confine the child and run the command in it; answer and record its trapped calls */
int observe(const spec *s, char **argv);
/* inside bwrap: install the notify filter, hand its listener out, exec the command */
int send_listener(const spec *s, char **argv) __attribute__((noreturn));

#endif
