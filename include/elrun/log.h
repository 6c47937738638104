/* log.h -- one line per event on stderr, for elrun's binaries.
 *
 * Libraries never log: they return codes and keep messages in their objects.
 * Binaries (the elrun CLI, examples, benches) call el_log_init() once, then
 * el_log().  Lines look like
 *   2026-11-29T12:00:00.123Z INFO agent[1234] round 3: 4 nodes
 * The level is checked before the arguments are evaluated.  ELRUN_LOG_LEVEL
 * (error|warn|info|debug) overrides the level given to el_log_init().
 * el_log() is thread-safe (one write(2) per line) but not async-signal-safe.
 */
#ifndef ELRUN_LOG_H
#define ELRUN_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum el_log_level { EL_LOG_ERROR, EL_LOG_WARN, EL_LOG_INFO, EL_LOG_DEBUG };

extern enum el_log_level el_log_max_;

void el_log_init(const char *component, enum el_log_level max);

#define el_log(lvl, ...)                 \
    do {                                 \
        if ((lvl) <= el_log_max_)        \
            el_log_((lvl), __VA_ARGS__); \
    } while (0)

void el_log_(enum el_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
