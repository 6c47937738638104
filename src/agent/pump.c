/* pump.c -- worker output: the read ends of teed stdout/stderr pipes.
 * Whole lines go to the console with the worker's prefix, in one write per
 * batch so lines of different workers never mix; everything read also goes
 * unprefixed to the worker's log file.  A line longer than EL__LINE_MAX
 * is cut; a last line without a newline gets one at EOF.  Reads are
 * non-blocking: a pump call takes what the pipe has and returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "agent/agent_impl.h"

/* ---- output pumping ---- */

static void console_write(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Emit buf[0..n) (whole lines) to the console, each line prefixed, in one
 * write so lines of different workers never mix. */
static void emit_lines(struct el_agent *a, struct el__worker *w, int fd,
                       const char *buf, size_t n)
{
    size_t plen = strlen(w->prefix), lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    size_t need = n + lines * plen + 1;
    if (need > a->outcap) {
        char *nb = realloc(a->outbuf, need);
        if (!nb)
            return;
        a->outbuf = nb;
        a->outcap = need;
    }
    size_t o = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        memcpy(a->outbuf + o, w->prefix, plen);
        o += plen;
        memcpy(a->outbuf + o, buf + start, i + 1 - start);
        o += i + 1 - start;
        start = i + 1;
    }
    console_write(fd, a->outbuf, o);
}

/* Read what a teed stream has; eof = drain to the end and close. */
void el__agent_pump(struct el_agent *a, struct el__worker *w, int s)
{
    struct el__stream *st = &w->st[s];
    while (st->fd >= 0) {
        ssize_t n = read(st->fd, st->buf + st->len, EL__LINE_MAX - 1 - st->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            /* EOF: flush a last partial line with a newline. */
            if (st->len && st->console >= 0) {
                st->buf[st->len] = '\n';
                emit_lines(a, w, st->console, st->buf, st->len + 1);
            }
            st->len = 0;
            epoll_ctl(a->epfd, EPOLL_CTL_DEL, st->fd, NULL);
            close(st->fd);
            st->fd = -1;
            return;
        }
        if (st->file >= 0)
            console_write(st->file, st->buf + st->len, (size_t)n);
        st->len += (size_t)n;
        size_t last = st->len;
        while (last > 0 && st->buf[last - 1] != '\n')
            last--;
        if (last == 0 && st->len >= EL__LINE_MAX - 1) {
            /* A line longer than the buffer: cut it here. */
            st->buf[st->len] = '\n';
            last = st->len + 1;
            if (st->console >= 0)
                emit_lines(a, w, st->console, st->buf, last);
            st->len = 0;
            continue;
        }
        if (last > 0) {
            if (st->console >= 0)
                emit_lines(a, w, st->console, st->buf, last);
            memmove(st->buf, st->buf + last, st->len - last);
            st->len -= last;
        }
    }
}

void el__agent_drain_all(struct el_agent *a)
{
    for (int i = 0; i < a->cfg.nproc; i++)
        for (int s = 0; s < 2; s++)
            if (a->w[i].st[s].fd >= 0) {
                /* Non-blocking: take what is there; the writers are dead. */
                el__agent_pump(a, &a->w[i], s);
            }
}

void el__agent_close_streams(struct el_agent *a, struct el__worker *w)
{
    for (int s = 0; s < 2; s++) {
        struct el__stream *st = &w->st[s];
        if (st->len && st->console >= 0 && st->buf) {
            st->buf[st->len] = '\n'; /* the buffer has room for it */
            emit_lines(a, w, st->console, st->buf, st->len + 1);
        }
        if (st->fd >= 0) {
            epoll_ctl(a->epfd, EPOLL_CTL_DEL, st->fd, NULL);
            close(st->fd);
            st->fd = -1;
        }
        if (st->file >= 0) {
            close(st->file);
            st->file = -1;
        }
        free(st->buf);
        st->buf = NULL;
        st->len = 0;
    }
}
