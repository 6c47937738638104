/* opts.h -- the launcher's command line: every torchrun 2.x flag, parsed into
 * one struct (private to src/cli).
 *
 * Rules follow torchrun (argparse): dash and underscore spellings are the
 * same flag, a unique prefix of a long flag is accepted (--nproc), values come
 * as --flag=V or --flag V (-rV, -r V, -r=V for short flags), the first
 * positional argument is the training script and everything after it belongs
 * to the script.  A flag not given falls back to PET_<FLAG> in the
 * environment; booleans read PET_* as an integer (0 = off).  Values are
 * validated here, so a bad one is reported with the flag (or variable) that
 * carried it.
 */
#ifndef ELRUN_CLI_OPTS_H
#define ELRUN_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

#define EL_OPTS_MAX_RANKS 4096 /* highest local rank a map may name, + 1 */

/* --rdzv-conf, parsed once (el_opts_rdzv_conf).  Keys not named here are
 * accepted and ignored (torch passes backend-specific ones); the first of
 * a repeated key wins. */
struct el_opts_conf {
    char buf[4096]; /* the value, split in place             */
    /* Seconds; -1 when not given. */
    double timeout, join_timeout, read_timeout, last_call_timeout,
        keep_alive_interval, heartbeat_timeout, close_timeout;
    int keep_alive_max_attempt; /* 0 when not given                      */
    int is_host;                /* 1 true, -1 false, 0 not given         */
    /* etcd's options; NULL when not given. */
    const char *etcd_prefix, *protocol, *cacert, *cert, *key, *username,
        *password;
    /* The job secret's file (secret itself is refused: ps shows it). */
    const char *secret_file, *secret;
};

struct el_opts {
    int min_nodes, max_nodes;       /* --nnodes N | MIN:MAX         [1:1]    */
    int nproc;                      /* --nproc-per-node N|cpu|auto  [1]      */
    int standalone;                 /* --standalone                           */
    const char *rdzv_backend;       /* --rdzv-backend               [static] */
    const char *rdzv_endpoint;      /* --rdzv-endpoint              [""]     */
    const char *rdzv_id;            /* --rdzv-id                    [none]   */
    const char *rdzv_conf;          /* --rdzv-conf k=v,...          [""]     */
    struct el_opts_conf conf;       /* rdzv_conf, parsed                     */
    int max_restarts;               /* --max-restarts               [0]      */
    double monitor_interval;        /* --monitor-interval (accepted) [0.1]   */
    const char *start_method;       /* --start-method (accepted)    [spawn]  */
    const char *role;               /* --role                       [default]*/
    int module;                     /* -m, --module                           */
    int no_python;                  /* --no-python                            */
    int run_path;                   /* --run-path                             */
    const char *log_dir;            /* --log-dir                    [NULL]   */
    const char *redirects;          /* -r, --redirects              ["0"]    */
    const char *tee;                /* -t, --tee                    ["0"]    */
    const char *local_ranks_filter; /* --local-ranks-filter       [""]     */
    int node_rank;                  /* --node-rank                  [0]      */
    const char *master_addr; /* --master-addr                [127.0.0.1] */
    int master_port;         /* --master-port                [29500]  */
    int master_port_given;   /* --master-port or PET_MASTER_PORT set  */
    const char *local_addr;  /* --local-addr                 [NULL]   */
    const char *
        signals_to_handle; /* --signals-to-handle [SIGTERM,SIGINT,SIGHUP,SIGQUIT] */
    const char *logs_specs;        /* --logs-specs (accepted, ignored)       */
    const char *numa_binding;      /* --numa-binding (accepted, ignored)     */
    const char *event_log_handler; /* --event-log-handler: null, console ... */
    /* The flags given that are accepted for compatibility and ignored
     * (their --help line says so), as "--flag=VALUE", to warn once. */
    char ignored[4][160];
    int nignored;
    /* elrun's own flags. */
    double stop_timeout;         /* --stop-timeout S: TERM -> KILL grace [30] */
    double exit_barrier_timeout; /* --exit-barrier-timeout S     [300]    */
    double restart_backoff;      /* --restart-backoff S          [1]      */
    double restart_backoff_max;  /* --restart-backoff-max S      [30]     */
    const char *metrics_addr;    /* --metrics-addr HOST:PORT     [NULL]   */
    const char *dashboard_addr;  /* --dashboard-addr HOST:PORT   [NULL]   */
    const char *preempt_notice_file; /* --preempt-notice-file PATH [NULL]  */
    const char *preempt_notice_cmd;  /* --preempt-notice-cmd CMD   [NULL]  */
    double preempt_notice_secs;      /* --preempt-notice-secs S      [30]     */
    const char *preempt_signal;  /* --preempt-signal SIG         [SIGUSR1] */
    double worker_stall_timeout; /* --worker-stall-timeout S     [0: off] */
    int help;                    /* -h, --help                             */
    int version;                 /* --version                              */
    /* The training script and its arguments (pointers into argv). */
    const char *script;
    char **script_args;
    int script_argc;
};

/* Parse argv[1..argc-1] (argv[0] is the program name) with env as the
 * environment (a NULL-terminated "K=V" array; NULL means environ).  Returns
 * 0, or EL_EUSAGE with a one-line message in err (what is wrong and how to
 * fix it).  With --help or --version, returns 0 with help/version set and
 * no script required.  Strings in *o point into argv, env, static
 * storage or o->conf.buf. */
int el_opts_parse(struct el_opts *o, int argc, char **argv, char **env,
                  char *err, size_t errlen);

/* Per-local-rank stream mask from a --redirects/--tee value: "0".."3" for
 * every rank, or a map "0:1,1:2" (ranks not named get 0).  mask[i] for
 * i < n gets bits 1 (stdout) and 2 (stderr).  Returns 0 or EL_EUSAGE. */
int el_opts_std_mask(const char *spec, unsigned char *mask, int n);

/* Parse --local-ranks-filter ("0,2"; "" = every rank) into show[0..n-1]
 * (1 = the rank's output reaches the console).  Returns 0 or EL_EUSAGE. */
int el_opts_ranks_filter(const char *spec, unsigned char *show, int n);

/* Parse --signals-to-handle ("SIGTERM,SIGUSR1,10") into sigs (at most max);
 * *n gets the count.  Returns 0 or EL_EUSAGE. */
int el_opts_signals(const char *spec, int *sigs, int max, int *n);

/* Parse a --rdzv-conf value ("timeout=900, join_timeout=600") into *c:
 * KEY=VALUE pairs separated by commas, spaces around either ignored, every
 * known key's value checked.  src names where the value came from
 * ("--rdzv-conf" or "PET_RDZV_CONF").  Returns 0 or EL_EUSAGE with a
 * one-line message in err. */
int el_opts_rdzv_conf(const char *spec, const char *src, struct el_opts_conf *c,
                      char *err, size_t errlen);
struct el_rdzv_config;
/* The etcd client's settings of c (prefix, protocol, TLS files, user and
 * password) into rc->etcd; the strings stay c's. */
void el_opts_etcd_config(const struct el_opts_conf *c,
                         struct el_rdzv_config *rc);

/* Format a usage message into err (when err and errlen) and return
 * EL_EUSAGE: the one error path of opts.c and rdzv_conf.c. */
int el__opts_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Print the --help text (the --rdzv-conf keys from rdzv_conf.c's table). */
void el_opts_print_help(FILE *out);

/* rdzv_conf.c: one line per --rdzv-conf key, for --help; the i-th key's
 * name (NULL past the last). */
void el__opts_rdzv_conf_help(FILE *out);
const char *el__opts_rdzv_conf_key(size_t i);

#endif
