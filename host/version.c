/* version.c — libsjkhost version. */
#include "sjkhost.h"

const char *sjkh_version(void) { return sjk_version(); }
