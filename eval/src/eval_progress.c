/* eval_progress.c — a one-line progress bar with an ETA, on stderr when it is a terminal.
 *
 *   eval [##########..........]  48%  1234/2560 tok  21.3 tok/s  0:58 elapsed  ETA 1m02s
 *
 * Redrawn at most ten times a second with a carriage return; silent when the stream is a
 * pipe or a file (logs stay clean) unless the caller forces it. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sjkeval.h"

double sjk_eval_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_dur(char *buf, size_t cap, double s)
{
    if (s < 0) s = 0;
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%luh%02lum", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, cap, "%lum%02lus", t / 60, t % 60);
    else snprintf(buf, cap, "%lus", t);
}

void sjk_eval_format_eta(char *buf, size_t cap, uint64_t done, uint64_t total, double elapsed)
{
    if (!buf || !cap) return;
    if (done == 0 || elapsed <= 0 || done > total) { snprintf(buf, cap, "?"); return; }
    fmt_dur(buf, cap, elapsed * (double)(total - done) / (double)done);
}

static void draw(sjk_eval_progress *p, double now)
{
    enum { BAR = 24 };
    char bar[BAR + 1], eta[32], el[32];
    double frac = p->total ? (double)p->done / (double)p->total : 0.0;
    if (frac > 1) frac = 1;
    size_t full = (size_t)(frac * BAR);
    for (size_t i = 0; i < BAR; i++) bar[i] = i < full ? '#' : '.';
    bar[BAR] = 0;
    double elapsed = now - p->t0;
    sjk_eval_format_eta(eta, sizeof eta, p->done, p->total, elapsed);
    fmt_dur(el, sizeof el, elapsed);
    fprintf(p->f, "\r%s [%s] %3.0f%%  %llu/%llu tok  %.1f tok/s  %s elapsed  ETA %s   ",
            p->label, bar, 100.0 * frac, (unsigned long long)p->done,
            (unsigned long long)p->total, elapsed > 0 ? (double)p->done / elapsed : 0.0, el, eta);
    fflush(p->f);
    p->last_draw = now;
}

void sjk_eval_progress_start(sjk_eval_progress *p, FILE *f, int force, uint64_t total,
                             const char *label)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->f = (f && (force || isatty(fileno(f)))) ? f : NULL;
    p->total = total;
    p->t0 = sjk_eval_now();
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    if (p->f) draw(p, p->t0);
}

void sjk_eval_progress_add(sjk_eval_progress *p, uint64_t n)
{
    if (!p) return;
    p->done += n;
    if (!p->f) return;
    double now = sjk_eval_now();
    if (now - p->last_draw >= 0.1 || p->done >= p->total) draw(p, now);
}

void sjk_eval_progress_end(sjk_eval_progress *p)
{
    if (!p || !p->f) return;
    draw(p, sjk_eval_now());
    fputc('\n', p->f);
    fflush(p->f);
    p->f = NULL;
}
