/* status.c — names of status codes and the version string. */
#include "sjkvarn.h"

static const char *const status_names[SJK_STATUS_COUNT] = {
    [SJK_OK] = "ok",
    [SJK_ERR_PARAM] = "invalid parameter",
    [SJK_ERR_NOMEM] = "out of memory",
    [SJK_ERR_BUFFER] = "buffer too small or input too short",
    [SJK_ERR_FORMAT] = "bad format (magic, version or type)",
    [SJK_ERR_CORRUPT] = "corrupt data",
    [SJK_ERR_RANGE] = "out of range",
    [SJK_ERR_UNSUPPORTED] = "unsupported",
    [SJK_ERR_IO] = "I/O error",
    [SJK_ERR_REPROCESS] = "positions must be re-processed",
    [SJK_ERR_MISMATCH] = "made for another model or configuration",
};

const char *sjk_status_str(sjk_status s)
{
    if ((unsigned)s >= SJK_STATUS_COUNT) return "unknown status";
    return status_names[s];
}

const char *sjk_version(void) { return SJK_VERSION_STRING; }
