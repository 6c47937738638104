/* opts.c -- parse the launcher's command line the way torchrun's argparse
 * does (see opts.h), and validate every value with a message that names the
 * flag or PET_* variable and says how to fix it.
 *
 * One table (defs) says everything about a flag: its spellings, whether it
 * takes a value and falls back to PET_*, its default, and the setter that
 * checks the value and stores it in struct el_opts (with the range and the
 * "expected ..." words of its message).  el_opts_parse reads the command
 * line and the environment into one value per flag, runs every flag's
 * setter in table order, then checks the combinations of flags.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/opts.h"
#include "common/errfmt.h"
#include "elrun/err.h"
#include "elrun/rdzv.h"

extern char **environ;

#define fail el__opts_fail

enum opt_id {
    O_NNODES,
    O_NPROC,
    O_STANDALONE,
    O_RDZV_BACKEND,
    O_RDZV_ENDPOINT,
    O_RDZV_ID,
    O_RDZV_CONF,
    O_MAX_RESTARTS,
    O_MONITOR_INTERVAL,
    O_START_METHOD,
    O_ROLE,
    O_MODULE,
    O_NO_PYTHON,
    O_RUN_PATH,
    O_LOG_DIR,
    O_REDIRECTS,
    O_TEE,
    O_LOCAL_RANKS_FILTER,
    O_NODE_RANK,
    O_MASTER_ADDR,
    O_MASTER_PORT,
    O_LOCAL_ADDR,
    O_SIGNALS,
    O_LOGS_SPECS,
    O_NUMA_BINDING,
    O_EVENT_LOG_HANDLER,
    O_STOP_TIMEOUT,
    O_EXIT_BARRIER_TIMEOUT,
    O_RESTART_BACKOFF,
    O_RESTART_BACKOFF_MAX,
    O_METRICS_ADDR,
    O_DASHBOARD_ADDR,
    O_PREEMPT_NOTICE_FILE,
    O_PREEMPT_NOTICE_CMD,
    O_PREEMPT_NOTICE_SECS,
    O_PREEMPT_SIGNAL,
    O_WORKER_STALL_TIMEOUT,
    O_HELP,
    O_VERSION,
    O_COUNT
};

typedef char opt_src[64]; /* where a value came from: "--flag", "PET_FLAG" */
struct opt_def;

/* A setter checks value v of flag d (src[id] names where it came from, ""
 * for the default) and stores it in o.  Returns 0 or EL_EUSAGE with the
 * message in err. */
typedef int (*opt_setter)(struct el_opts *o, const struct opt_def *d,
                          const char *v, const opt_src *src, char *err,
                          size_t errlen);

struct opt_def {
    const char *name; /* long name, dash spelling, without "--" */
    char short_name;  /* 0 if none */
    int is_bool;      /* takes no value */
    int env;          /* PET_<NAME> fallback */
    opt_setter set;   /* NULL: read by el_opts_parse itself */
    size_t off;       /* the field of struct el_opts the setter fills */
    const char *def;  /* the value when not given; NULL leaves 0 / NULL */
    double lo, hi;    /* range of set_int and set_seconds */
    const char *const *choices;  /* set_choice's words, NULL-terminated */
    int (*check)(const char *v); /* set_checked's test: 1 = valid */
    const char *expect;          /* the message after "FLAG=VALUE: " */
    const char *alt_env; /* read when neither the flag nor PET_* is given
                            (a bad value there is ignored) */
    const char *ignored; /* accepted for compatibility and ignored: a value
                            that means "nothing" (warned about otherwise) */
};

static int set_bool(struct el_opts *, const struct opt_def *, const char *,
                    const opt_src *, char *, size_t);
static int set_str(struct el_opts *, const struct opt_def *, const char *,
                   const opt_src *, char *, size_t);
static int set_str_or_null(struct el_opts *, const struct opt_def *,
                           const char *, const opt_src *, char *, size_t);
static int set_int(struct el_opts *, const struct opt_def *, const char *,
                   const opt_src *, char *, size_t);
static int set_port(struct el_opts *, const struct opt_def *, const char *,
                    const opt_src *, char *, size_t);
static int set_seconds(struct el_opts *, const struct opt_def *, const char *,
                       const opt_src *, char *, size_t);
static int set_choice(struct el_opts *, const struct opt_def *, const char *,
                      const opt_src *, char *, size_t);
static int set_nnodes(struct el_opts *, const struct opt_def *, const char *,
                      const opt_src *, char *, size_t);
static int set_nproc(struct el_opts *, const struct opt_def *, const char *,
                     const opt_src *, char *, size_t);
static int set_backend(struct el_opts *, const struct opt_def *, const char *,
                       const opt_src *, char *, size_t);
static int set_rdzv_id(struct el_opts *, const struct opt_def *, const char *,
                       const opt_src *, char *, size_t);
static int set_rdzv_conf(struct el_opts *, const struct opt_def *, const char *,
                         const opt_src *, char *, size_t);
static int set_checked(struct el_opts *, const struct opt_def *, const char *,
                       const opt_src *, char *, size_t);
static int check_std_mask(const char *);
static int check_ranks_filter(const char *);
static int check_signals(const char *);
static int check_one_signal(const char *);

#define F(field) offsetof(struct el_opts, field)
/* The longest time that still fits an int of milliseconds. */
#define MAX_S (INT_MAX / 1000)
#define STD_MASK_EXPECT                                                   \
    "expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or a per-rank " \
    "map such as 0:1,1:2"

static const char *const start_methods[] = {"spawn", "fork", "forkserver",
                                            NULL};
/* torch's registered handlers (events/handlers.py); others are a KeyError. */
static const char *const event_handlers[] = {"null", "console",
                                             "dynamic_rendezvous", NULL};

static const struct opt_def defs[O_COUNT] = {
    [O_NNODES] = {"nnodes", .env = 1, .set = set_nnodes, .def = "1"},
    [O_NPROC] = {"nproc-per-node", .env = 1, .set = set_nproc, .def = "1"},
    [O_STANDALONE] = {"standalone", .is_bool = 1, .env = 1, .set = set_bool,
                      .off = F(standalone)},
    [O_RDZV_BACKEND] = {"rdzv-backend", .env = 1, .set = set_backend,
                        .def = "static"},
    [O_RDZV_ENDPOINT] = {"rdzv-endpoint", .env = 1, .set = set_str,
                         .off = F(rdzv_endpoint), .def = ""},
    [O_RDZV_ID] = {"rdzv-id", .env = 1, .set = set_rdzv_id, .def = "none"},
    [O_RDZV_CONF] = {"rdzv-conf", .env = 1, .set = set_rdzv_conf, .def = ""},
    [O_MAX_RESTARTS] = {"max-restarts", .env = 1, .set = set_int,
                        .off = F(max_restarts), .def = "0", .hi = INT_MAX,
                        .expect = "expected a whole number >= 0"},
    [O_MONITOR_INTERVAL] =
        {"monitor-interval", .env = 1, .set = set_seconds,
         .off = F(monitor_interval), .def = "0.1", .hi = 1e9,
         .expect = "expected seconds >= 0 (it "
                   "is accepted and not needed: elrun sees failures "
                   "at once)"},
    [O_START_METHOD] = {"start-method", .env = 1, .set = set_choice,
                        .off = F(start_method), .def = "spawn",
                        .choices = start_methods,
                        .expect = "expected spawn, fork or forkserver"},
    [O_ROLE] = {"role", .env = 1, .set = set_str, .off = F(role),
                .def = "default"},
    [O_MODULE] = {"module", 'm', .is_bool = 1, .env = 1, .set = set_bool,
                  .off = F(module)},
    [O_NO_PYTHON] = {"no-python", .is_bool = 1, .env = 1, .set = set_bool,
                     .off = F(no_python)},
    [O_RUN_PATH] = {"run-path", .is_bool = 1, .env = 1, .set = set_bool,
                    .off = F(run_path)},
    [O_LOG_DIR] = {"log-dir", .env = 1, .set = set_str_or_null,
                   .off = F(log_dir)},
    [O_REDIRECTS] = {"redirects", 'r', .env = 1, .set = set_checked,
                     .check = check_std_mask, .off = F(redirects), .def = "0",
                     .expect = STD_MASK_EXPECT},
    [O_TEE] = {"tee", 't', .env = 1, .set = set_checked,
               .check = check_std_mask, .off = F(tee), .def = "0",
               .expect = STD_MASK_EXPECT},
    [O_LOCAL_RANKS_FILTER] = {"local-ranks-filter", .env = 1,
                              .set = set_checked, .check = check_ranks_filter,
                              .off = F(local_ranks_filter), .def = "",
                              .expect = "expected local ranks separated by "
                                        "commas, e.g. 0 or 0,3"},
    [O_NODE_RANK] = {"node-rank", .env = 1, .set = set_int, .off = F(node_rank),
                     .def = "0", .hi = 1000000,
                     .expect = "expected a node rank >= 0"},
    [O_MASTER_ADDR] = {"master-addr", .env = 1, .set = set_str,
                       .off = F(master_addr), .def = "127.0.0.1"},
    [O_MASTER_PORT] = {"master-port", .env = 1, .set = set_port,
                       .off = F(master_port), .def = "29500", .hi = 65535,
                       .expect = "expected a TCP port from 0 to 65535"},
    [O_LOCAL_ADDR] = {"local-addr", .env = 1, .set = set_str_or_null,
                      .off = F(local_addr)},
    [O_SIGNALS] = {"signals-to-handle", .env = 1, .set = set_checked,
                   .check = check_signals, .off = F(signals_to_handle),
                   .def = "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
                   .expect =
                       "expected signal names or numbers separated by "
                       "commas, e.g. SIGTERM,SIGUSR1 (not SIGKILL, SIGSTOP or "
                       "SIGCHLD)"},
    [O_LOGS_SPECS] = {"logs-specs", .set = set_str, .off = F(logs_specs),
                      .ignored = ""},
    [O_NUMA_BINDING] = {"numa-binding", .set = set_str, .off = F(numa_binding),
                        .ignored = ""},
    [O_EVENT_LOG_HANDLER] = {"event-log-handler", .env = 1, .set = set_choice,
                             .off = F(event_log_handler), .def = "null",
                             .choices = event_handlers,
                             .expect = "expected null, console or "
                                       "dynamic_rendezvous (torch's handlers)"},
    [O_STOP_TIMEOUT] = {"stop-timeout", .env = 1, .set = set_seconds,
                        .off = F(stop_timeout), .def = "30", .hi = MAX_S,
                        .expect = "expected seconds >= 0",
                        .alt_env = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"},
    [O_EXIT_BARRIER_TIMEOUT] = {"exit-barrier-timeout", .env = 1,
                                .set = set_seconds,
                                .off = F(exit_barrier_timeout), .def = "300",
                                .hi = MAX_S, .expect = "expected seconds >= 0"},
    [O_RESTART_BACKOFF] = {"restart-backoff", .env = 1, .set = set_seconds,
                           .off = F(restart_backoff), .def = "1", .hi = MAX_S,
                           .expect = "expected seconds >= 0 (0 restarts at "
                                     "once)"},
    [O_RESTART_BACKOFF_MAX] = {"restart-backoff-max", .env = 1,
                               .set = set_seconds,
                               .off = F(restart_backoff_max), .def = "30",
                               .lo = 1e-3, .hi = MAX_S,
                               .expect =
                                   "expected seconds > 0 (use "
                                   "--restart-backoff=0 to restart at once)"},
    [O_METRICS_ADDR] = {"metrics-addr", .env = 1, .set = set_str_or_null,
                        .off = F(metrics_addr)},
    [O_DASHBOARD_ADDR] = {"dashboard-addr", .env = 1, .set = set_str_or_null,
                          .off = F(dashboard_addr)},
    /* Goodput: docs/AGENT.md "Preemption notices" and "Hung workers". */
    [O_PREEMPT_NOTICE_FILE] = {"preempt-notice-file", .env = 1,
                               .set = set_str_or_null,
                               .off = F(preempt_notice_file)},
    [O_PREEMPT_NOTICE_CMD] = {"preempt-notice-cmd", .env = 1,
                              .set = set_str_or_null,
                              .off = F(preempt_notice_cmd)},
    [O_PREEMPT_NOTICE_SECS] = {"preempt-notice-secs", .env = 1,
                               .set = set_seconds,
                               .off = F(preempt_notice_secs), .def = "30",
                               .lo = 1e-3, .hi = MAX_S,
                               .expect = "expected seconds > 0"},
    [O_PREEMPT_SIGNAL] = {"preempt-signal", .env = 1, .set = set_checked,
                          .check = check_one_signal, .off = F(preempt_signal),
                          .def = "SIGUSR1",
                          .expect =
                              "expected one signal name or number, "
                              "e.g. SIGUSR1 (not SIGKILL, SIGSTOP or SIGCHLD)"},
    [O_WORKER_STALL_TIMEOUT] = {"worker-stall-timeout", .env = 1,
                                .set = set_seconds,
                                .off = F(worker_stall_timeout), .def = "0",
                                .hi = MAX_S,
                                .expect = "expected seconds >= 0 (0 = off)"},
    [O_HELP] = {"help", 'h', .is_bool = 1},
    [O_VERSION] = {"version", .is_bool = 1},
};

static const char help_head[] =
    "usage: elrun [options] SCRIPT [ARGS...]\n"
    "       elrun store --listen HOST:PORT\n"
    "\n"
    "Runs SCRIPT (python3 -u SCRIPT, or the program itself with --no-python) as\n"
    "a group of workers with torchrun's environment, supervises, restarts and\n"
    "reports them.  A drop-in replacement for torchrun: every flag below also\n"
    "takes the underscore spelling (--nproc_per_node), a unique prefix\n"
    "(--nproc), and falls back to PET_<FLAG> in the environment.\n"
    "\n"
    "Nodes and workers:\n"
    "  --nnodes N|MIN:MAX         number of nodes [1]\n"
    "  --nproc-per-node N|cpu|auto  workers on this node [1]\n"
    "  --node-rank I              this node's rank (static rendezvous) [0]\n"
    "  --role NAME                worker role, ROLE_NAME [default]\n"
    "  --max-restarts N           restarts of the worker group after a failure [0]\n"
    "                             (c10d, etcd: one budget for the whole job)\n"
    "  --restart-backoff S        wait before restarts after failures in a row:\n"
    "                             none before the first, then S, doubling [1]\n"
    "  --restart-backoff-max S    the longest such wait [30]\n"
    "  --start-method M           spawn|fork|forkserver (accepted for compatibility)\n"
    "  --monitor-interval S       accepted; failures are seen at once (no polling)\n"
    "\n"
    "Rendezvous:\n"
    "  --standalone               single node, store on a free local port\n"
    "  --rdzv-backend B           static (default): a fixed set of nodes, node 0\n"
    "                             hosts the store at --master-addr:--master-port;\n"
    "                             c10d: elastic across nodes (--nnodes=MIN:MAX),\n"
    "                             the store at --rdzv-endpoint; etcd (or etcd-v2):\n"
    "                             the same, its state in etcd\n"
    "  --rdzv-endpoint HOST[:PORT]  rendezvous store address (etcd: members,\n"
    "                             comma separated)\n"
    "  --rdzv-id ID               job id [none]\n"
    "  --rdzv-conf K=V,...        backend options (other keys are accepted and\n"
    "                             ignored; S seconds, N a count):\n";

static const char help_tail[] =
    "  --master-addr HOST         static: node 0's address [127.0.0.1]\n"
    "  --master-port PORT         static: node 0's store port [29500]\n"
    "  --local-addr HOST          this node's address for MASTER_ADDR\n"
    "  --exit-barrier-timeout S   wait for the other nodes at the end [300]\n"
    "\n"
    "Program:\n"
    "  -m, --module               run SCRIPT as a python module (python3 -u -m)\n"
    "  --no-python                run SCRIPT as a program, not through python3\n"
    "  --run-path                 run SCRIPT with python's runpy.run_path\n"
    "  ${local_rank} in ARGS is replaced by each worker's local rank.\n"
    "  The interpreter is $PYTHON_EXEC, else the first python3 in PATH (torchrun\n"
    "  uses the Python it runs under): PYTHON_EXEC=/usr/bin/python3 elrun ...\n"
    "  The launch log and the failure report name its full path.\n"
    "\n"
    "Output and errors:\n"
    "  --log-dir DIR              base directory for logs and error files\n"
    "  -r, --redirects 0-3|MAP    send stdout(1)/stderr(2)/both(3) to log files,\n"
    "                             for all ranks or per rank (0:1,1:2)\n"
    "  -t, --tee 0-3|MAP          as --redirects, and also to the console with a\n"
    "                             [<role><local_rank>]: prefix on every line\n"
    "  --local-ranks-filter R,... only these local ranks reach the console\n"
    "  --signals-to-handle SIGS   signals forwarded to workers before exiting\n"
    "                             [SIGTERM,SIGINT,SIGHUP,SIGQUIT]\n"
    "  --stop-timeout S           grace between SIGTERM and SIGKILL [30]\n"
    "  --metrics-addr HOST:PORT   serve Prometheus metrics at /metrics (port 0\n"
    "                             picks one; see docs/METRICS.md)\n"
    "  --event-log-handler NAME   console: torchrun's status event JSON on stderr\n"
    "                             at the end; null [default] (docs/EVENTS.md)\n"
    "  --dashboard-addr HOST:PORT the live dashboard at / (JSON: /api/job) and\n"
    "                             /metrics (docs/DASHBOARD.md)\n"
    "  -h, --help                 this text;  --version  elrun's version\n"
    "  LOGLEVEL or ELRUN_LOG_LEVEL (which wins): error, warn [default], info\n"
    "  (torchrun's launch records), debug\n"
    "\n"
    "Accepted for compatibility and ignored (a warning says so when given):\n"
    "  --logs-specs NAME, --numa-binding MODE\n"
    "\n"
    "Faults (docs/AGENT.md):\n"
    "  --preempt-notice-file PATH  its appearance means this node goes soon:\n"
    "                             workers that catch --preempt-signal get it, the\n"
    "                             agent leaves the job --preempt-notice-secs later\n"
    "                             (or after the seconds written in the file)\n"
    "  --preempt-notice-cmd CMD   the same when CMD (run each second) exits 0\n"
    "  --preempt-notice-secs S    notice to departure [30]\n"
    "  --preempt-signal SIG       the signal workers get on a notice [SIGUSR1]\n"
    "  --worker-stall-timeout S   kill a worker whose heartbeat stopped for S s\n"
    "                             and restart the group as for a crash [0: off]\n"
    "\n"
    "Exit status: 0 when every worker succeeded, 1 on a worker failure (after\n"
    "the restarts), a signal or a rendezvous error, 2 on a usage error, 75\n"
    "when the node left at a preemption notice's deadline.\n"
    "See elrun(1).\n";

void el_opts_print_help(FILE *out)
{
    fputs(help_head, out);
    el__opts_rdzv_conf_help(out);
    fputs(help_tail, out);
}

/* ------------------------------------------------------------------------ */

int el__opts_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(err, errlen, EL_EUSAGE, fmt, ap);
    va_end(ap);
    return EL_EUSAGE;
}

/* "--nproc_per_node" -> "nproc-per-node" in buf (without the dashes). */
static void normalize(const char *s, size_t n, char *buf, size_t cap)
{
    size_t i;
    for (i = 0; i < n && i + 1 < cap; i++)
        buf[i] = s[i] == '_' ? '-' : s[i];
    buf[i] = 0;
}

/* Find the long option named (or uniquely prefixed) by name.  Returns its
 * id, -1 if unknown, -2 if ambiguous (cands gets the candidates). */
static int find_long(const char *name, char *cands, size_t clen)
{
    size_t n = strlen(name);
    int found = -1, count = 0;
    if (n == 0)
        return -1;
    for (int i = 0; i < O_COUNT; i++)
        if (strcmp(defs[i].name, name) == 0)
            return i;
    cands[0] = 0;
    for (int i = 0; i < O_COUNT; i++) {
        if (strncmp(defs[i].name, name, n) == 0) {
            size_t used = strlen(cands);
            snprintf(cands + used, clen - used, "%s--%s", count ? ", " : "",
                     defs[i].name);
            found = i;
            count++;
        }
    }
    if (count > 1)
        return -2;
    return found;
}

static int find_short(char c)
{
    for (int i = 0; i < O_COUNT; i++)
        if (defs[i].short_name == c)
            return i;
    return -1;
}

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* PET_NPROC_PER_NODE from "nproc-per-node". */
static void pet_name(int id, char *buf, size_t cap)
{
    snprintf(buf, cap, "PET_");
    size_t j = 4;
    for (const char *p = defs[id].name; *p && j + 1 < cap; p++)
        buf[j++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[j] = 0;
}

static int looks_negative_number(const char *s)
{
    if (s[0] != '-' || !s[1])
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            return 0;
    return 1;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return -1;
    long v = strtol(s, &end, 10);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    if (!*s)
        return -1;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo) || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

int el_opts_std_mask(const char *spec, unsigned char *mask, int n)
{
    for (int i = 0; i < n; i++)
        mask[i] = 0;
    if (!spec)
        return 0;
    if (spec[0] >= '0' && spec[0] <= '3' && spec[1] == 0) {
        for (int i = 0; i < n; i++)
            mask[i] = (unsigned char)(spec[0] - '0');
        return 0;
    }
    /* Map: RANK:VALUE[,RANK:VALUE...] (torchrun allows one-digit ranks
     * only; any rank is accepted here). */
    const char *p = spec;
    if (!*p)
        return EL_EUSAGE;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return EL_EUSAGE;
        long r = 0;
        while (isdigit((unsigned char)*p)) {
            r = r * 10 + (*p - '0');
            if (r >= EL_OPTS_MAX_RANKS)
                return EL_EUSAGE;
            p++;
        }
        if (*p++ != ':')
            return EL_EUSAGE;
        if (*p < '0' || *p > '3')
            return EL_EUSAGE;
        if (r < n)
            mask[r] = (unsigned char)(*p - '0');
        p++;
        if (*p == ',') {
            p++;
            if (!*p)
                return EL_EUSAGE;
        } else if (*p) {
            return EL_EUSAGE;
        }
    }
    return 0;
}

int el_opts_ranks_filter(const char *spec, unsigned char *show, int n)
{
    int all = !spec || !*spec;
    for (int i = 0; i < n; i++)
        show[i] = (unsigned char)all;
    if (all)
        return 0;
    const char *p = spec;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!isdigit((unsigned char)*p))
            return EL_EUSAGE;
        long r = 0;
        while (isdigit((unsigned char)*p)) {
            r = r * 10 + (*p - '0');
            if (r > INT_MAX / 10)
                return EL_EUSAGE;
            p++;
        }
        while (*p == ' ')
            p++;
        if (r < n)
            show[r] = 1;
        if (*p == ',')
            p++;
        else if (*p)
            return EL_EUSAGE;
    }
    return 0;
}

static const struct {
    const char *name;
    int sig;
} signames[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT},
    {"ABRT", SIGABRT}, {"USR1", SIGUSR1},     {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM},     {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
    {"PWR", SIGPWR},   {"WINCH", SIGWINCH},   {"URG", SIGURG},
    {"TSTP", SIGTSTP}, {"CONT", SIGCONT},
};

int el_opts_signals(const char *spec, int *sigs, int max, int *n)
{
    *n = 0;
    const char *p = spec;
    while (p && *p) {
        char tok[32];
        size_t len = strcspn(p, ",");
        const char *next = p[len] ? p + len + 1 : p + len;
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (len == 0 || len >= sizeof tok)
            return EL_EUSAGE;
        memcpy(tok, p, len);
        tok[len] = 0;
        int sig = 0;
        long v;
        if (parse_int(tok, 1, 64, &v) == 0) {
            sig = (int)v;
        } else {
            const char *nm = strncasecmp(tok, "SIG", 3) == 0 ? tok + 3 : tok;
            for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
                if (strcasecmp(nm, signames[i].name) == 0)
                    sig = signames[i].sig;
        }
        if (sig == 0 || sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD)
            return EL_EUSAGE;
        int dup = 0;
        for (int i = 0; i < *n; i++)
            dup |= sigs[i] == sig;
        if (!dup) {
            if (*n >= max)
                return EL_EUSAGE;
            sigs[(*n)++] = sig;
        }
        p = next;
    }
    return 0;
}

/* ---- setters (see opt_setter) ---- */

#define FIELD(o, d, type) ((type *)(void *)((char *)(o) + (d)->off))

static int set_bool(struct el_opts *o, const struct opt_def *d, const char *v,
                    const opt_src *src, char *err, size_t errlen)
{
    *FIELD(o, d, int) = 1;
    return 0;
}

static int set_str(struct el_opts *o, const struct opt_def *d, const char *v,
                   const opt_src *src, char *err, size_t errlen)
{
    *FIELD(o, d, const char *) = v;
    return 0;
}

/* An empty value means "not given". */
static int set_str_or_null(struct el_opts *o, const struct opt_def *d,
                           const char *v, const opt_src *src, char *err,
                           size_t errlen)
{
    *FIELD(o, d, const char *) = *v ? v : NULL;
    return 0;
}

static int set_int(struct el_opts *o, const struct opt_def *d, const char *v,
                   const opt_src *src, char *err, size_t errlen)
{
    long l;
    if (parse_int(v, (long)d->lo, (long)d->hi, &l) != 0)
        return fail(err, errlen, "%s=%s: %s", src[d - defs], v, d->expect);
    *FIELD(o, d, int) = (int)l;
    return 0;
}

static int set_port(struct el_opts *o, const struct opt_def *d, const char *v,
                    const opt_src *src, char *err, size_t errlen)
{
    int rc = set_int(o, d, v, src, err, errlen);
    o->master_port_given = !rc && src[d - defs][0];
    return rc;
}

static int set_seconds(struct el_opts *o, const struct opt_def *d,
                       const char *v, const opt_src *src, char *err,
                       size_t errlen)
{
    double s;
    if (parse_double(v, d->lo, &s) != 0)
        return fail(err, errlen, "%s=%s: %s", src[d - defs], v, d->expect);
    if (s > d->hi)
        return fail(err, errlen, "%s=%s: at most %.0f seconds", src[d - defs],
                    v, d->hi);
    *FIELD(o, d, double) = s;
    return 0;
}

/* One of d->choices. */
static int set_choice(struct el_opts *o, const struct opt_def *d, const char *v,
                      const opt_src *src, char *err, size_t errlen)
{
    for (const char *const *c = d->choices; *c; c++) {
        if (strcmp(*c, v) == 0) {
            *FIELD(o, d, const char *) = v;
            return 0;
        }
    }
    return fail(err, errlen, "%s=%s: %s", src[d - defs], v, d->expect);
}

static int set_nnodes(struct el_opts *o, const struct opt_def *d, const char *v,
                      const opt_src *src, char *err, size_t errlen)
{
    const char *colon = strchr(v, ':');
    char a[32], b[32];
    long mn, mx;
    int ok;
    if (colon) {
        snprintf(a, sizeof a, "%.*s", (int)(colon - v), v);
        snprintf(b, sizeof b, "%s", colon + 1);
        ok = !strchr(colon + 1, ':') && parse_int(a, 1, 1000000, &mn) == 0 &&
             parse_int(b, 1, 1000000, &mx) == 0 && mn <= mx;
    } else {
        ok = parse_int(v, 1, 1000000, &mn) == 0;
        mx = mn;
    }
    if (!ok)
        return fail(err, errlen,
                    "%s=%s: expected N or MIN:MAX with "
                    "0 < MIN <= MAX, e.g. --nnodes=2 or --nnodes=1:4",
                    src[O_NNODES], v);
    o->min_nodes = (int)mn;
    o->max_nodes = (int)mx;
    return 0;
}

static int set_nproc(struct el_opts *o, const struct opt_def *d, const char *v,
                     const opt_src *src, char *err, size_t errlen)
{
    long l;
    if (strcmp(v, "cpu") == 0 || strcmp(v, "auto") == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->nproc = n > 0 ? (int)n : 1;
    } else if (strcmp(v, "gpu") == 0 || strcmp(v, "xpu") == 0) {
        return fail(err, errlen,
                    "%s=%s: no %s devices are visible to "
                    "elrun; give a number of workers or 'cpu'",
                    src[O_NPROC], v, strcmp(v, "gpu") ? "XPU" : "CUDA");
    } else if (parse_int(v, 1, EL_OPTS_MAX_RANKS, &l) == 0) {
        o->nproc = (int)l;
    } else {
        return fail(err, errlen,
                    "%s=%s: expected a number of workers "
                    "from 1 to %d, 'cpu' or 'auto'",
                    src[O_NPROC], v, EL_OPTS_MAX_RANKS);
    }
    return 0;
}

static int set_backend(struct el_opts *o, const struct opt_def *d,
                       const char *v, const opt_src *src, char *err,
                       size_t errlen)
{
    o->rdzv_backend = v;
    if (!el_rdzv_backend_known(v)) {
        char names[128];
        el_rdzv_backend_list(names, sizeof names);
        return fail(err, errlen,
                    "%s=%s: unknown rendezvous backend; use one "
                    "of: %s",
                    src[O_RDZV_BACKEND], v, names);
    }
    return 0;
}

static int set_rdzv_id(struct el_opts *o, const struct opt_def *d,
                       const char *v, const opt_src *src, char *err,
                       size_t errlen)
{
    if (!*v)
        return fail(err, errlen,
                    "%s is empty; give a job id such as "
                    "--rdzv-id=job42",
                    src[O_RDZV_ID]);
    o->rdzv_id = v;
    return 0;
}

static int set_rdzv_conf(struct el_opts *o, const struct opt_def *d,
                         const char *v, const opt_src *src, char *err,
                         size_t errlen)
{
    o->rdzv_conf = v;
    return el_opts_rdzv_conf(v, src[O_RDZV_CONF], &o->conf, err, errlen);
}

/* Store v if d->check accepts it. */
static int set_checked(struct el_opts *o, const struct opt_def *d,
                       const char *v, const opt_src *src, char *err,
                       size_t errlen)
{
    if (!d->check(v))
        return fail(err, errlen, "%s=%s: %s", src[d - defs], v, d->expect);
    *FIELD(o, d, const char *) = v;
    return 0;
}

static int check_std_mask(const char *v)
{
    unsigned char tmp[1];
    return el_opts_std_mask(v, tmp, 1) == 0;
}

static int check_ranks_filter(const char *v)
{
    unsigned char tmp[1];
    return el_opts_ranks_filter(v, tmp, 1) == 0;
}

static int check_signals(const char *v)
{
    int sigs[64], n;
    return el_opts_signals(v, sigs, 64, &n) == 0;
}

static int check_one_signal(const char *v)
{
    int sig, n;
    return el_opts_signals(v, &sig, 1, &n) == 0 && n == 1;
}

/* ---- the command line ---- */

/* argv[1..] into val[] (and src[]) up to the script.  Returns the index of
 * the script (argc if none), or -1 with the message in err. */
static int read_argv(int argc, char **argv, const char **val, opt_src *src,
                     char *err, size_t errlen)
{
    char cands[512], name[128];
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return i + 1;
        if (a[0] != '-' || a[1] == 0)
            break; /* the script */
        int id;
        const char *inl = NULL; /* value given inline */
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            normalize(a + 2, n, name, sizeof name);
            id = find_long(name, cands, sizeof cands);
            if (id == -2)
                return fail(err, errlen,
                            "ambiguous option --%s: it could "
                            "be %s; spell it out",
                            name, cands),
                       -1;
            if (id < 0)
                return fail(err, errlen,
                            "unrecognized option '%.*s'; see "
                            "'elrun --help' for the flags (options go before "
                            "the script)",
                            (int)(n + 2), a),
                       -1;
            if (eq)
                inl = eq + 1;
        } else {
            id = find_short(a[1]);
            if (id < 0)
                return fail(err, errlen,
                            "unrecognized option '%s'; see "
                            "'elrun --help'",
                            a),
                       -1;
            if (a[2])
                inl = a[2] == '=' ? a + 3 : a + 2;
            if (defs[id].is_bool && inl)
                return fail(err, errlen,
                            "option -%c takes no value (got "
                            "'%s')",
                            a[1], a),
                       -1;
        }
        snprintf(src[id], sizeof src[id], "--%s", defs[id].name);
        if (defs[id].is_bool) {
            if (inl)
                return fail(err, errlen,
                            "option --%s takes no value; drop "
                            "'=%s'",
                            defs[id].name, inl),
                       -1;
            val[id] = "1";
        } else if (inl) {
            val[id] = inl;
        } else {
            if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] &&
                                  !looks_negative_number(argv[i + 1])))
                return fail(err, errlen,
                            "option --%s needs a value, as in "
                            "--%s=VALUE",
                            defs[id].name, defs[id].name),
                       -1;
            val[id] = argv[++i];
        }
    }
    return i;
}

/* PET_* for the flags not on the command line. */
static int read_env(char **env, const char **val, opt_src *src, char *err,
                    size_t errlen)
{
    char pet[64];
    for (int id = 0; id < O_COUNT; id++) {
        if (val[id] || !defs[id].env)
            continue;
        pet_name(id, pet, sizeof pet);
        const char *v = env_get(env, pet);
        if (!v)
            continue;
        snprintf(src[id], sizeof src[id], "%s", pet);
        if (defs[id].is_bool) {
            long b;
            if (parse_int(v, LONG_MIN, LONG_MAX, &b) != 0)
                return fail(err, errlen,
                            "%s=%s is not an integer; set it to "
                            "1 (on) or 0 (off)",
                            pet, v);
            val[id] = b ? "1" : NULL;
        } else {
            val[id] = v;
        }
    }
    return 0;
}

/* What no single flag can check. */
static int check_combinations(const struct el_opts *o, const opt_src *src,
                              char *err, size_t errlen)
{
    if (o->no_python && o->module && !o->run_path)
        return fail(err, errlen,
                    "--no-python and -m/--module cannot be used "
                    "together; drop one of them");
    if (!o->script)
        return fail(err, errlen,
                    "missing the training script; usage: elrun "
                    "[options] SCRIPT [ARGS...] (see elrun --help)");
    if (!*o->script)
        return fail(err, errlen,
                    "the training script is an empty string; "
                    "give a script path or program name");
    if (o->standalone && o->max_nodes > 1)
        return fail(err, errlen,
                    "--standalone runs a single node but "
                    "%s asks for %d; drop --standalone and use "
                    "--rdzv-backend=static with --node-rank",
                    src[O_NNODES], o->max_nodes);
    if (!o->standalone && strcmp(o->rdzv_backend, "static") == 0) {
        if (o->min_nodes != o->max_nodes)
            return fail(err, errlen,
                        "%s=%d:%d: the static rendezvous needs "
                        "a fixed number of nodes; use --nnodes=%d",
                        src[O_NNODES], o->min_nodes, o->max_nodes,
                        o->max_nodes);
        if (o->node_rank >= o->max_nodes)
            return fail(err, errlen,
                        "%s=%d but there are only %d node(s); "
                        "node ranks go from 0 to %d",
                        src[O_NODE_RANK][0] ? src[O_NODE_RANK] : "--node-rank",
                        o->node_rank, o->max_nodes, o->max_nodes - 1);
    }
    return 0;
}

int el_opts_parse(struct el_opts *o, int argc, char **argv, char **env,
                  char *err, size_t errlen)
{
    const char *val[O_COUNT] = {0};
    opt_src src[O_COUNT]; /* where each value came from, for messages */
    int rc;

    if (!env)
        env = environ;
    memset(o, 0, sizeof *o);
    for (int i = 0; i < O_COUNT; i++)
        src[i][0] = 0;

    int i = read_argv(argc, argv, val, src, err, errlen);
    if (i < 0)
        return EL_EUSAGE;
    if (i < argc) {
        o->script = argv[i];
        o->script_args = argv + i + 1;
        o->script_argc = argc - i - 1;
    }
    if ((rc = read_env(env, val, src, err, errlen)))
        return rc;

    o->help = val[O_HELP] != NULL;
    o->version = val[O_VERSION] != NULL;
    if (o->help || o->version)
        return 0;

    for (int id = 0; id < O_COUNT; id++) {
        const struct opt_def *d = &defs[id];
        if (!d->set)
            continue;
        if (!val[id] && d->alt_env) {
            const char *alt = env_get(env, d->alt_env);
            char ignored[8];
            if (alt && d->set(o, d, alt, src, ignored, sizeof ignored) == 0)
                continue;
        }
        const char *v = val[id] ? val[id] : d->def;
        if (v && (rc = d->set(o, d, v, src, err, errlen)))
            return rc;
        if (d->ignored && val[id] && strcmp(val[id], d->ignored) &&
            o->nignored < 4) {
            snprintf(o->ignored[o->nignored++], sizeof o->ignored[0], "%s=%s",
                     src[id], val[id]);
        }
    }
    return check_combinations(o, src, err, errlen);
}
