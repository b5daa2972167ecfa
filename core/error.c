#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void soren_error_clear(soren_error *err)
{
    if (err) {
        err->code = SOREN_OK;
        err->text[0] = '\0';
    }
}

static soren_status error_vset(soren_error *err, soren_status code, int errnum, const char *fmt,
                               va_list ap)
{
    if (!err || err->code != SOREN_OK)
        return code;
    err->code = code;
    int n = vsnprintf(err->text, sizeof err->text, fmt, ap);
    if (errnum && n >= 0 && (size_t)n < sizeof err->text)
        snprintf(err->text + n, sizeof err->text - (size_t)n, ": %s", strerror(errnum));
    return code;
}

soren_status soren_error_set(soren_error *err, soren_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

soren_status soren_error_errno(soren_error *err, soren_status code, int errnum, const char *fmt,
                               ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, errnum, fmt, ap);
    va_end(ap);
    return code;
}

const char *soren_status_name(soren_status code)
{
    switch (code) {
    case SOREN_OK: return "ok";
    case SOREN_EUSAGE: return "usage";
    case SOREN_EMANIFEST: return "manifest";
    case SOREN_EPLUGIN: return "plugin";
    case SOREN_EINPUT: return "input";
    case SOREN_EIO: return "io";
    case SOREN_ENOMEM: return "memory";
    case SOREN_EDEVICE: return "device";
    case SOREN_EJOB: return "job";
    }
    return "unknown";
}

int soren_status_exit_code(soren_status code)
{
    if (code == SOREN_OK)
        return 0;
    return code == SOREN_EUSAGE ? 2 : 1;
}
