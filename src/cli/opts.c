/* opts.c -- parse the launcher's command line the way torchrun's argparse
 * does (see opts.h), and validate every value with a message that names the
 * flag or PET_* variable and says how to fix it.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/opts.h"
#include "elrun/err.h"
#include "elrun/rdzv.h"

extern char **environ;

enum opt_id {
    O_NNODES, O_NPROC, O_STANDALONE, O_RDZV_BACKEND, O_RDZV_ENDPOINT,
    O_RDZV_ID, O_RDZV_CONF, O_MAX_RESTARTS, O_MONITOR_INTERVAL,
    O_START_METHOD, O_ROLE, O_MODULE, O_NO_PYTHON, O_RUN_PATH, O_LOG_DIR,
    O_REDIRECTS, O_TEE, O_LOCAL_RANKS_FILTER, O_NODE_RANK, O_MASTER_ADDR,
    O_MASTER_PORT, O_LOCAL_ADDR, O_SIGNALS, O_LOGS_SPECS, O_NUMA_BINDING,
    O_EVENT_LOG_HANDLER, O_STOP_TIMEOUT, O_EXIT_BARRIER_TIMEOUT, O_HELP,
    O_VERSION, O_COUNT
};

struct opt_def {
    const char *name;   /* long name, dash spelling, without "--" */
    char short_name;    /* 0 if none */
    int is_bool;        /* takes no value */
    int has_env;        /* PET_<NAME> fallback */
};

static const struct opt_def defs[O_COUNT] = {
    [O_NNODES]            = {"nnodes", 0, 0, 1},
    [O_NPROC]             = {"nproc-per-node", 0, 0, 1},
    [O_STANDALONE]        = {"standalone", 0, 1, 1},
    [O_RDZV_BACKEND]      = {"rdzv-backend", 0, 0, 1},
    [O_RDZV_ENDPOINT]     = {"rdzv-endpoint", 0, 0, 1},
    [O_RDZV_ID]           = {"rdzv-id", 0, 0, 1},
    [O_RDZV_CONF]         = {"rdzv-conf", 0, 0, 1},
    [O_MAX_RESTARTS]      = {"max-restarts", 0, 0, 1},
    [O_MONITOR_INTERVAL]  = {"monitor-interval", 0, 0, 1},
    [O_START_METHOD]      = {"start-method", 0, 0, 1},
    [O_ROLE]              = {"role", 0, 0, 1},
    [O_MODULE]            = {"module", 'm', 1, 1},
    [O_NO_PYTHON]         = {"no-python", 0, 1, 1},
    [O_RUN_PATH]          = {"run-path", 0, 1, 1},
    [O_LOG_DIR]           = {"log-dir", 0, 0, 1},
    [O_REDIRECTS]         = {"redirects", 'r', 0, 1},
    [O_TEE]               = {"tee", 't', 0, 1},
    [O_LOCAL_RANKS_FILTER] = {"local-ranks-filter", 0, 0, 1},
    [O_NODE_RANK]         = {"node-rank", 0, 0, 1},
    [O_MASTER_ADDR]       = {"master-addr", 0, 0, 1},
    [O_MASTER_PORT]       = {"master-port", 0, 0, 1},
    [O_LOCAL_ADDR]        = {"local-addr", 0, 0, 1},
    [O_SIGNALS]           = {"signals-to-handle", 0, 0, 1},
    [O_LOGS_SPECS]        = {"logs-specs", 0, 0, 0},
    [O_NUMA_BINDING]      = {"numa-binding", 0, 0, 0},
    [O_EVENT_LOG_HANDLER] = {"event-log-handler", 0, 0, 1},
    [O_STOP_TIMEOUT]      = {"stop-timeout", 0, 0, 1},
    [O_EXIT_BARRIER_TIMEOUT] = {"exit-barrier-timeout", 0, 0, 1},
    [O_HELP]              = {"help", 'h', 1, 0},
    [O_VERSION]           = {"version", 0, 1, 0},
};

const char el_opts_help[] =
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
"  --start-method M           spawn|fork|forkserver (accepted for compatibility)\n"
"  --monitor-interval S       accepted; failures are seen at once (no polling)\n"
"\n"
"Rendezvous:\n"
"  --standalone               single node, store on a free local port\n"
"  --rdzv-backend B           static (default); c10d with one node\n"
"  --rdzv-endpoint HOST[:PORT]  rendezvous store address\n"
"  --rdzv-id ID               job id [none]\n"
"  --rdzv-conf K=V,...        backend options (timeout=S join_timeout=S)\n"
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
"  PYTHON_EXEC names the interpreter [python3].\n"
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
"  -h, --help                 this text;  --version  elrun's version\n"
"\n"
"Exit status: 0 when every worker succeeded, 1 on a worker failure (after\n"
"the restarts), a signal or a rendezvous error, 2 on a usage error.\n"
"See elrun(1).\n";

/* ------------------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
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
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
    {"ABRT", SIGABRT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
    {"PWR", SIGPWR},   {"WINCH", SIGWINCH}, {"URG", SIGURG},
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

/* ------------------------------------------------------------------------ */

int el_opts_parse(struct el_opts *o, int argc, char **argv, char **env,
                  char *err, size_t errlen)
{
    const char *val[O_COUNT] = {0};
    char src[O_COUNT][64];  /* where each value came from, for messages */
    char cands[512], name[128], pet[64];

    if (!env)
        env = environ;
    memset(o, 0, sizeof *o);
    for (int i = 0; i < O_COUNT; i++)
        src[i][0] = 0;

    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == 0)
            break;  /* the script */
        int id;
        const char *inl = NULL;  /* value given inline */
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            normalize(a + 2, n, name, sizeof name);
            id = find_long(name, cands, sizeof cands);
            if (id == -2)
                return fail(err, errlen, "ambiguous option --%s: it could "
                            "be %s; spell it out", name, cands);
            if (id < 0)
                return fail(err, errlen, "unrecognized option '%.*s'; see "
                            "'elrun --help' for the flags (options go before "
                            "the script)", (int)(n + 2), a);
            if (eq)
                inl = eq + 1;
        } else {
            id = find_short(a[1]);
            if (id < 0)
                return fail(err, errlen, "unrecognized option '%s'; see "
                            "'elrun --help'", a);
            if (a[2])
                inl = a[2] == '=' ? a + 3 : a + 2;
            if (defs[id].is_bool && inl)
                return fail(err, errlen, "option -%c takes no value (got "
                            "'%s')", a[1], a);
        }
        snprintf(src[id], sizeof src[id], "--%s", defs[id].name);
        if (defs[id].is_bool) {
            if (inl)
                return fail(err, errlen, "option --%s takes no value; drop "
                            "'=%s'", defs[id].name, inl);
            val[id] = "1";
            continue;
        }
        if (inl) {
            val[id] = inl;
        } else {
            if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] &&
                                  !looks_negative_number(argv[i + 1])))
                return fail(err, errlen, "option --%s needs a value, as in "
                            "--%s=VALUE", defs[id].name, defs[id].name);
            val[id] = argv[++i];
        }
    }
    if (i < argc) {
        o->script = argv[i];
        o->script_args = argv + i + 1;
        o->script_argc = argc - i - 1;
    }

    /* PET_* fallbacks for flags not on the command line. */
    for (int id = 0; id < O_COUNT; id++) {
        if (val[id] || !defs[id].has_env)
            continue;
        pet_name(id, pet, sizeof pet);
        const char *v = env_get(env, pet);
        if (!v)
            continue;
        snprintf(src[id], sizeof src[id], "%s", pet);
        if (defs[id].is_bool) {
            long b;
            if (parse_int(v, LONG_MIN, LONG_MAX, &b) != 0)
                return fail(err, errlen, "%s=%s is not an integer; set it to "
                            "1 (on) or 0 (off)", pet, v);
            val[id] = b ? "1" : NULL;
        } else {
            val[id] = v;
        }
    }

    o->help = val[O_HELP] != NULL;
    o->version = val[O_VERSION] != NULL;
    if (o->help || o->version)
        return 0;

    long l;
    double d;
    /* --nnodes */
    o->min_nodes = o->max_nodes = 1;
    if (val[O_NNODES]) {
        const char *v = val[O_NNODES], *colon = strchr(v, ':');
        char a[32], b[32];
        int ok;
        if (colon) {
            snprintf(a, sizeof a, "%.*s", (int)(colon - v), v);
            snprintf(b, sizeof b, "%s", colon + 1);
            long mn, mx;
            ok = !strchr(colon + 1, ':') &&
                 parse_int(a, 1, 1000000, &mn) == 0 &&
                 parse_int(b, 1, 1000000, &mx) == 0 && mn <= mx;
            if (ok) {
                o->min_nodes = (int)mn;
                o->max_nodes = (int)mx;
            }
        } else {
            ok = parse_int(v, 1, 1000000, &l) == 0;
            if (ok)
                o->min_nodes = o->max_nodes = (int)l;
        }
        if (!ok)
            return fail(err, errlen, "%s=%s: expected N or MIN:MAX with "
                        "0 < MIN <= MAX, e.g. --nnodes=2 or --nnodes=1:4",
                        src[O_NNODES], v);
    }
    /* --nproc-per-node */
    o->nproc = 1;
    if (val[O_NPROC]) {
        const char *v = val[O_NPROC];
        if (strcmp(v, "cpu") == 0 || strcmp(v, "auto") == 0) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            o->nproc = n > 0 ? (int)n : 1;
        } else if (strcmp(v, "gpu") == 0 || strcmp(v, "xpu") == 0) {
            return fail(err, errlen, "%s=%s: no %s devices are visible to "
                        "elrun; give a number of workers or 'cpu'",
                        src[O_NPROC], v, strcmp(v, "gpu") ? "XPU" : "CUDA");
        } else if (parse_int(v, 1, EL_OPTS_MAX_RANKS, &l) == 0) {
            o->nproc = (int)l;
        } else {
            return fail(err, errlen, "%s=%s: expected a number of workers "
                        "from 1 to %d, 'cpu' or 'auto'", src[O_NPROC], v,
                        EL_OPTS_MAX_RANKS);
        }
    }
    o->standalone = val[O_STANDALONE] != NULL;
    o->module = val[O_MODULE] != NULL;
    o->no_python = val[O_NO_PYTHON] != NULL;
    o->run_path = val[O_RUN_PATH] != NULL;
    o->rdzv_backend = val[O_RDZV_BACKEND] ? val[O_RDZV_BACKEND] : "static";
    o->rdzv_endpoint = val[O_RDZV_ENDPOINT] ? val[O_RDZV_ENDPOINT] : "";
    o->rdzv_id = val[O_RDZV_ID] ? val[O_RDZV_ID] : "none";
    o->rdzv_conf = val[O_RDZV_CONF] ? val[O_RDZV_CONF] : "";
    if (!el_rdzv_backend_known(o->rdzv_backend)) {
        char names[128];
        el_rdzv_backend_list(names, sizeof names);
        return fail(err, errlen, "%s=%s: unknown rendezvous backend; "
                    "use one of: %s", src[O_RDZV_BACKEND], o->rdzv_backend,
                    names);
    }
    if (!*o->rdzv_id)
        return fail(err, errlen, "%s is empty; give a job id such as "
                    "--rdzv-id=job42", src[O_RDZV_ID]);
    /* --rdzv-conf: k=v pairs, each part non-empty. */
    for (const char *p = o->rdzv_conf; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        int bad = !eq;
        if (eq) {
            const char *k = p, *ke = eq, *vb = eq + 1, *ve = p + len;
            while (k < ke && isspace((unsigned char)*k)) k++;
            while (ke > k && isspace((unsigned char)ke[-1])) ke--;
            while (vb < ve && isspace((unsigned char)*vb)) vb++;
            while (ve > vb && isspace((unsigned char)ve[-1])) ve--;
            bad = k == ke || vb == ve;
        }
        if (bad)
            return fail(err, errlen, "%s=%s: expected KEY=VALUE pairs "
                        "separated by commas, e.g. timeout=900,"
                        "join_timeout=600", src[O_RDZV_CONF], o->rdzv_conf);
        p += len;
        if (*p == ',')
            p++;
    }
    o->max_restarts = 0;
    if (val[O_MAX_RESTARTS]) {
        if (parse_int(val[O_MAX_RESTARTS], 0, INT_MAX, &l) != 0)
            return fail(err, errlen, "%s=%s: expected a whole number >= 0",
                        src[O_MAX_RESTARTS], val[O_MAX_RESTARTS]);
        o->max_restarts = (int)l;
    }
    o->monitor_interval = 0.1;
    if (val[O_MONITOR_INTERVAL]) {
        if (parse_double(val[O_MONITOR_INTERVAL], 0, &d) != 0)
            return fail(err, errlen, "%s=%s: expected seconds >= 0 (it is "
                        "accepted and not needed: elrun sees failures at "
                        "once)", src[O_MONITOR_INTERVAL],
                        val[O_MONITOR_INTERVAL]);
        o->monitor_interval = d;
    }
    o->start_method = val[O_START_METHOD] ? val[O_START_METHOD] : "spawn";
    if (strcmp(o->start_method, "spawn") && strcmp(o->start_method, "fork") &&
        strcmp(o->start_method, "forkserver"))
        return fail(err, errlen, "%s=%s: expected spawn, fork or forkserver",
                    src[O_START_METHOD], o->start_method);
    o->role = val[O_ROLE] ? val[O_ROLE] : "default";
    o->log_dir = val[O_LOG_DIR] && *val[O_LOG_DIR] ? val[O_LOG_DIR] : NULL;
    o->redirects = val[O_REDIRECTS] ? val[O_REDIRECTS] : "0";
    o->tee = val[O_TEE] ? val[O_TEE] : "0";
    {
        unsigned char tmp[1];
        if (el_opts_std_mask(o->redirects, tmp, 1) != 0)
            return fail(err, errlen, "%s=%s: expected 0 (none), 1 (stdout), "
                        "2 (stderr), 3 (both), or a per-rank map such as "
                        "0:1,1:2", src[O_REDIRECTS], o->redirects);
        if (el_opts_std_mask(o->tee, tmp, 1) != 0)
            return fail(err, errlen, "%s=%s: expected 0 (none), 1 (stdout), "
                        "2 (stderr), 3 (both), or a per-rank map such as "
                        "0:1,1:2", src[O_TEE], o->tee);
    }
    o->local_ranks_filter =
        val[O_LOCAL_RANKS_FILTER] ? val[O_LOCAL_RANKS_FILTER] : "";
    {
        unsigned char tmp[1];
        if (el_opts_ranks_filter(o->local_ranks_filter, tmp, 1) != 0)
            return fail(err, errlen, "%s=%s: expected local ranks separated "
                        "by commas, e.g. 0 or 0,3", src[O_LOCAL_RANKS_FILTER],
                        o->local_ranks_filter);
    }
    o->node_rank = 0;
    if (val[O_NODE_RANK]) {
        if (parse_int(val[O_NODE_RANK], 0, 1000000, &l) != 0)
            return fail(err, errlen, "%s=%s: expected a node rank >= 0",
                        src[O_NODE_RANK], val[O_NODE_RANK]);
        o->node_rank = (int)l;
    }
    o->master_addr = val[O_MASTER_ADDR] ? val[O_MASTER_ADDR] : "127.0.0.1";
    o->master_port = 29500;
    if (val[O_MASTER_PORT]) {
        if (parse_int(val[O_MASTER_PORT], 0, 65535, &l) != 0)
            return fail(err, errlen, "%s=%s: expected a TCP port from 0 to "
                        "65535", src[O_MASTER_PORT], val[O_MASTER_PORT]);
        o->master_port = (int)l;
        o->master_port_given = 1;
    }
    o->local_addr = val[O_LOCAL_ADDR] && *val[O_LOCAL_ADDR]
                        ? val[O_LOCAL_ADDR] : NULL;
    o->signals_to_handle = val[O_SIGNALS] ? val[O_SIGNALS]
                                          : "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
    {
        int sigs[64], n;
        if (el_opts_signals(o->signals_to_handle, sigs, 64, &n) != 0)
            return fail(err, errlen, "%s=%s: expected signal names or numbers "
                        "separated by commas, e.g. SIGTERM,SIGUSR1 (not "
                        "SIGKILL, SIGSTOP or SIGCHLD)", src[O_SIGNALS],
                        o->signals_to_handle);
    }
    o->logs_specs = val[O_LOGS_SPECS];
    o->numa_binding = val[O_NUMA_BINDING];
    o->event_log_handler = val[O_EVENT_LOG_HANDLER];
    o->stop_timeout = 30;
    if (val[O_STOP_TIMEOUT]) {
        if (parse_double(val[O_STOP_TIMEOUT], 0, &o->stop_timeout) != 0)
            return fail(err, errlen, "%s=%s: expected seconds >= 0",
                        src[O_STOP_TIMEOUT], val[O_STOP_TIMEOUT]);
    } else {
        const char *v = env_get(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
        if (v && parse_double(v, 0, &d) == 0)
            o->stop_timeout = d;
    }
    o->exit_barrier_timeout = 300;
    if (val[O_EXIT_BARRIER_TIMEOUT] &&
        parse_double(val[O_EXIT_BARRIER_TIMEOUT], 0,
                     &o->exit_barrier_timeout) != 0)
        return fail(err, errlen, "%s=%s: expected seconds >= 0",
                    src[O_EXIT_BARRIER_TIMEOUT], val[O_EXIT_BARRIER_TIMEOUT]);

    if (o->no_python && o->module && !o->run_path)
        return fail(err, errlen, "--no-python and -m/--module cannot be used "
                    "together; drop one of them");
    if (!o->script)
        return fail(err, errlen, "missing the training script; usage: elrun "
                    "[options] SCRIPT [ARGS...] (see elrun --help)");
    if (!*o->script)
        return fail(err, errlen, "the training script is an empty string; "
                    "give a script path or program name");
    if (o->standalone && o->max_nodes > 1)
        return fail(err, errlen, "--standalone runs a single node but "
                    "%s asks for %d; drop --standalone and use "
                    "--rdzv-backend=static with --node-rank", src[O_NNODES],
                    o->max_nodes);
    if (!o->standalone && strcmp(o->rdzv_backend, "static") == 0) {
        if (o->min_nodes != o->max_nodes)
            return fail(err, errlen, "%s=%d:%d: the static rendezvous needs "
                        "a fixed number of nodes; use --nnodes=%d", src[O_NNODES],
                        o->min_nodes, o->max_nodes, o->max_nodes);
        if (o->node_rank >= o->max_nodes)
            return fail(err, errlen, "%s=%d but there are only %d node(s); "
                        "node ranks go from 0 to %d", src[O_NODE_RANK][0]
                        ? src[O_NODE_RANK] : "--node-rank", o->node_rank,
                        o->max_nodes, o->max_nodes - 1);
    }
    return 0;
}
