/* run_cmd.c -- `elrun [run] [torchrun flags] SCRIPT [ARGS...]`: the
 * torchrun-compatible launcher.  Parses the flags (opts.c), checks that the
 * program can run, picks the rendezvous backend, runs the agent and turns
 * its outcome into torchrun's report and exit status:
 *   0 every worker succeeded; 1 workers failed (after the restarts), a
 *   signal, or a rendezvous error; 2 a usage error (bad flag, missing
 *   program).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "elrun/agent.h"
#include "elrun/dashboard.h"
#include "elrun/err.h"
#include "elrun/events.h"
#include "elrun/log.h"
#include "elrun/metrics.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"

#define RUN_PATH_BOOT                              \
    "import runpy, sys; sys.argv = sys.argv[1:]; " \
    "runpy.run_path(sys.argv[0], run_name='__main__')"

static int usage_error(const char *msg)
{
    fprintf(stderr, "elrun: error: %s\n", msg);
    return 2;
}

/* Is prog runnable: a path that is an executable file, or a name found
 * in PATH?  full gets the path that will run (the PATH entry for a bare
 * name).  Fills why on failure. */
static int find_program(const char *prog, char *full, size_t fcap, char *why,
                        size_t cap)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) < 0) {
            snprintf(why, cap, "program '%s' does not exist; check the path",
                     prog);
            return -1;
        }
        if (S_ISDIR(st.st_mode) || access(prog, X_OK) < 0) {
            snprintf(why, cap,
                     "program '%s' is not executable; chmod +x it "
                     "or drop --no-python to run it with python3",
                     prog);
            return -1;
        }
        snprintf(full, fcap, "%s", prog);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(full, fcap, "%.*s/%s", (int)n, n ? path : ".", prog);
        if (stat(full, &st) == 0 && !S_ISDIR(st.st_mode) &&
            access(full, X_OK) == 0)
            return 0;
        path += n;
        if (*path == ':')
            path++;
    }
    snprintf(why, cap,
             "program '%s' was not found in PATH; give its path or "
             "fix PATH",
             prog);
    return -1;
}

/* A script handed to python that is not Python (an ELF program, or a #!
 * line naming another interpreter) would end in Python's SyntaxError on
 * every worker: say so instead.  Returns 0, or -1 with the message. */
static int check_python_script(const char *script, char *err, size_t cap)
{
    char head[256] = {0};
    int fd = open(script, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    if (n >= 4 && memcmp(head,
                         "\x7f"
                         "ELF",
                         4) == 0) {
        snprintf(err, cap,
                 "'%s' is an ELF executable, not a Python script; "
                 "add --no-python to run it directly",
                 script);
        return -1;
    }
    if (n >= 2 && head[0] == '#' && head[1] == '!') {
        head[strcspn(head, "\r\n")] = 0;
        if (!strstr(head, "python")) {
            snprintf(err, cap,
                     "'%s' is not a Python script (its first line "
                     "is '%s'); add --no-python to run it directly",
                     script, head);
            return -1;
        }
    }
    return 0;
}

static void uuid4(char out[37])
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, b, 16) != 16) {
        long long t = el_now_ns() ^ getpid();
        for (int i = 0; i < 16; i++)
            b[i] = (unsigned char)(t >> (i * 4));
    }
    if (fd >= 0)
        close(fd);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

/* --rdzv-endpoint for etcd: members separated by commas, each HOST[:PORT]
 * (port 2379) or a URL, into "h:p,h2:p2".  0, or -1 with a message. */
static int etcd_endpoints(const char *spec, char *out, size_t cap, char *err,
                          size_t errlen)
{
    size_t len = 0;
    out[0] = '\0';
    if (!*spec) {
        snprintf(err, errlen,
                 "the etcd rendezvous needs --rdzv-endpoint="
                 "HOST:PORT[,HOST:PORT...] (etcd's client URLs)");
        return -1;
    }
    for (const char *p = spec; *p;) {
        size_t n = strcspn(p, ",");
        char part[EL_HOST_MAX + 32], host[EL_HOST_MAX];
        int port = 0, w;
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        if (strstr(part, "://"))
            w = snprintf(out + len, cap - len, "%s%s", len ? "," : "", part);
        else if (n >= sizeof part || el_addr_parse(part, 2379, host, &port)) {
            snprintf(err, errlen,
                     "--rdzv-endpoint: '%s' is not HOST[:PORT] "
                     "or a URL of an etcd member",
                     part);
            return -1;
        } else
            w = snprintf(out + len, cap - len,
                         strchr(host, ':') ? "%s[%s]:%d" : "%s%s:%d",
                         len ? "," : "", host, port);
        if (w < 0 || (size_t)w >= cap - len) {
            snprintf(err, errlen, "--rdzv-endpoint: too many etcd members");
            return -1;
        }
        len += (size_t)w;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static void on_agent_event(void *arg, enum el_agent_event_level lvl,
                           const char *msg)
{
    (void)arg;
    static const enum el_log_level map[] = {EL_LOG_ERROR, EL_LOG_WARN,
                                            EL_LOG_INFO, EL_LOG_DEBUG};
    el_log(map[lvl], "%s", msg);
}

static void on_rdzv_event(void *arg, const char *msg)
{
    (void)arg;
    /* "round N: K nodes (joined: ...; left: ...)" is what an operator
     * wants to see by default, and so is which node ended a round ("node
     * h/3f2a is gone; re-forming") and a hosted store closing a client (a
     * limit, a refused write); the rest is detail. */
    el_log((strncmp(msg, "round ", 6) == 0 &&
            (strstr(msg, "nodes (joined") || strstr(msg, "; re-forming"))) ||
                   strncmp(msg, "closed connection from ", 23) == 0
               ? EL_LOG_WARN
               : EL_LOG_INFO,
           "%s", msg);
}

/* ---- the workers' command line ---- */

/* python3 -u [-m | -c RUN_PATH_BOOT] SCRIPT ARGS, or the program itself
 * (--no-python).  The interpreter is $PYTHON_EXEC, else python3 from PATH
 * (as torchrun's sys.executable, by its full path).  Returns 0 with a
 * malloc'd *out (NULL-terminated, strings borrowed from o and binary) and
 * binary = the interpreter's full path or the program as given, 2 with a usage
 * message in err, or 1 on ENOMEM. */
static int worker_argv(const struct el_opts *o, char ***out, char *binary,
                       size_t bcap, char *err, size_t cap)
{
    const char *python = getenv("PYTHON_EXEC");
    if (!python || !*python)
        python = "python3";
    int use_python = o->run_path || !o->no_python;
    if (find_program(use_python ? python : o->script, binary, bcap, err, cap) !=
        0) {
        if (use_python) {
            size_t n = strlen(err);
            snprintf(err + n, cap - n,
                     " (set PYTHON_EXEC or use "
                     "--no-python)");
        }
        return 2;
    }
    if (use_python && !o->module && access(o->script, R_OK) != 0) {
        snprintf(err, cap,
                 "training script '%s' cannot be read (%s); "
                 "check the path, or use -m for a module or --no-python for "
                 "a program",
                 o->script, strerror(errno));
        return 2;
    }
    if (use_python && !o->module && check_python_script(o->script, err, cap))
        return 2;
    if (!use_python) /* run as given, and named so (as torchrun) */
        snprintf(binary, bcap, "%s", o->script);
    char **wargv = calloc((size_t)o->script_argc + 8, sizeof *wargv);
    if (!wargv)
        return 1;
    int n = 0;
    if (use_python) {
        wargv[n++] = binary;
        wargv[n++] = "-u";
        if (o->run_path) {
            wargv[n++] = "-c";
            wargv[n++] = RUN_PATH_BOOT;
        } else if (o->module) {
            wargv[n++] = "-m";
        }
    }
    wargv[n++] = (char *)o->script;
    for (int i = 0; i < o->script_argc; i++)
        wargv[n++] = o->script_args[i];
    wargv[n] = NULL;
    *out = wargv;
    return 0;
}

/* ---- the rendezvous ---- */

/* Storage the rendezvous config points into until el_rdzv_open. */
struct rdzv_strings {
    char run_id[64];
    char host[EL_HOST_MAX];
    char endpoints[2048];
    uint8_t secret[EL_STORE_SECRET_MAX + 1];
};

/* A backend's part of the config: the address and what only it reads.
 * Returns 0, or -1 with a usage message in err. */
typedef int (*backend_setup)(const struct el_opts *o, struct el_rdzv_config *rc,
                             struct rdzv_strings *s, char *err, size_t cap);

/* Can this host listen on addr (one of its own addresses)?  Returns 0, or
 * -1 with the reason in why. */
static int is_own_address(const char *addr, char *why, size_t cap)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    int rc = getaddrinfo(addr, "0", &hints, &ai);
    if (rc) {
        snprintf(why, cap, "%s", gai_strerror(rc));
        return -1;
    }
    int ok = -1;
    for (struct addrinfo *p = ai; p && ok; p = p->ai_next) {
        int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (bind(fd, p->ai_addr, p->ai_addrlen) == 0)
            ok = 0;
        else
            snprintf(why, cap, "%s", strerror(errno));
        close(fd);
    }
    freeaddrinfo(ai);
    return ok;
}

/* The workers connect to MASTER_ADDR, which is --local-addr when given: the
 * store is served there (a loopback address other than 127.0.0.1 included),
 * and an address this host does not have is refused. */
static int setup_standalone(const struct el_opts *o, struct el_rdzv_config *rc,
                            struct rdzv_strings *s, char *err, size_t cap)
{
    if (strcmp(o->rdzv_backend, "static") || *o->rdzv_endpoint ||
        strcmp(o->rdzv_id, "none"))
        el_log(EL_LOG_INFO, "--standalone: ignoring the given "
                            "rendezvous backend, endpoint and id");
    uuid4(s->run_id);
    rc->run_id = s->run_id;
    rc->backend = "standalone";
    snprintf(s->host, sizeof s->host, "127.0.0.1");
    if (o->local_addr) {
        char why[256];
        if (is_own_address(o->local_addr, why, sizeof why)) {
            snprintf(err, cap,
                     "--local-addr=%s is not an address of this "
                     "host (%s): the workers are told MASTER_ADDR=%s and "
                     "would find no store there; give one of this host's "
                     "addresses or drop --local-addr",
                     o->local_addr, why, o->local_addr);
            return -1;
        }
        snprintf(s->host, sizeof s->host, "%s", o->local_addr);
    }
    rc->port = 0;
    return 0;
}

static int setup_static(const struct el_opts *o, struct el_rdzv_config *rc,
                        struct rdzv_strings *s, char *err, size_t cap)
{
    rc->backend = "static";
    if (*o->rdzv_endpoint) {
        if (el_addr_parse(o->rdzv_endpoint, -1, s->host, &rc->port) != 0) {
            snprintf(err, cap,
                     "--rdzv-endpoint=%s: the static rendezvous "
                     "needs HOST:PORT",
                     o->rdzv_endpoint);
            return -1;
        }
    } else {
        if (el_addr_parse(o->master_addr, 0, s->host, &rc->port) != 0) {
            snprintf(err, cap,
                     "--master-addr=%s is not a host name or "
                     "address",
                     o->master_addr);
            return -1;
        }
        rc->port = o->master_port;
    }
    rc->join_timeout_ms = 900000; /* torchrun's static store timeout */
    return 0;
}

static int setup_c10d(const struct el_opts *o, struct el_rdzv_config *rc,
                      struct rdzv_strings *s, char *err, size_t cap)
{
    rc->backend = "c10d";
    const char *ep = *o->rdzv_endpoint ? o->rdzv_endpoint : "localhost";
    if (el_addr_parse(ep, 29400, s->host, &rc->port) != 0) {
        snprintf(err, cap, "--rdzv-endpoint=%s: expected HOST or HOST:PORT",
                 ep);
        return -1;
    }
    return 0;
}

static int setup_etcd(const struct el_opts *o, struct el_rdzv_config *rc,
                      struct rdzv_strings *s, char *err, size_t cap)
{
    rc->backend = "etcd";
    if (etcd_endpoints(o->rdzv_endpoint, s->endpoints, sizeof s->endpoints, err,
                       cap))
        return -1;
    rc->endpoints = s->endpoints;
    el_opts_etcd_config(&o->conf, rc);
    return 0;
}

/* How each --rdzv-backend value is set up (opts.c accepted the name). */
static const struct {
    const char *name;
    backend_setup setup;
} backends[] = {
    {"static", setup_static},
    {"c10d", setup_c10d},
    {"etcd", setup_etcd},
    {"etcd-v2", setup_etcd},
};

/* The job secret (docs/RENDEZVOUS.md, "Security"): read from the file
 * named by --rdzv-conf secret_file=PATH, else $ELRUN_SECRET_FILE, else
 * $PET_RDZV_SECRET_FILE, into s->secret, and set in rc.  Never the secret
 * itself on the command line, where ps shows it.  Warns when an elastic job
 * on a non-loopback endpoint has none.  Returns 0, or -1 with a usage
 * message in err. */
static int job_secret(const struct el_opts_conf *c, struct el_rdzv_config *rc,
                      struct rdzv_strings *s, char *err, size_t cap)
{
    const char *path = c->secret_file;
    if (c->secret) {
        snprintf(err, cap,
                 "--rdzv-conf secret=...: the secret would show "
                 "in ps; write it to a file (chmod 600) and give "
                 "secret_file=PATH");
        return -1;
    }
    if (!path || !*path)
        path = getenv("ELRUN_SECRET_FILE");
    if (!path || !*path)
        path = getenv("PET_RDZV_SECRET_FILE");
    if (path && *path) {
        if (strcmp(rc->backend, "etcd") == 0) {
            snprintf(err, cap,
                     "secret_file is for the c10d and static "
                     "rendezvous; etcd has TLS client certificates and "
                     "users (cacert, cert, key, username)");
            return -1;
        }
        if (el_store_read_secret(path, s->secret, sizeof s->secret,
                                 &rc->secret_len, err, cap))
            return -1;
        rc->secret = s->secret;
        return 0;
    }
    const char *h = rc->host ? rc->host : "";
    if (strcmp(rc->backend, "c10d") == 0 && rc->max_nodes > 1 &&
        strcmp(h, "localhost") && strncmp(h, "127.", 4) && strcmp(h, "::1"))
        el_log(EL_LOG_WARN,
               "the rendezvous store at %s:%d has no job "
               "secret: anyone who reaches it can end, stall or join this "
               "job; give every node --rdzv-conf secret_file=PATH (the same "
               "secret)",
               h, rc->port);
    return 0;
}

/* The rendezvous config from the flags and --rdzv-conf (parsed by
 * rdzv_conf.c).  Returns 0, or -1 with a usage message in err. */
static int rdzv_config(const struct el_opts *o, struct el_rdzv_config *rc,
                       struct rdzv_strings *s, char *err, size_t cap)
{
    const struct el_opts_conf *c = &o->conf;
    backend_setup setup = NULL;
    memset(rc, 0, sizeof *rc);
    rc->run_id = o->rdzv_id;
    rc->min_nodes = o->min_nodes;
    rc->max_nodes = o->max_nodes;
    rc->node_rank = o->node_rank;
    rc->local_addr = o->local_addr;
    rc->on_event = on_rdzv_event;
    rc->join_timeout_ms = 600000;
    /* The elastic rendezvous' knobs, with torch's defaults. */
    rc->last_call_timeout_ms = 30000;
    rc->keep_alive_interval_ms = 5000;
    rc->keep_alive_max_attempt = 3;
    rc->max_restarts = o->max_restarts;
    if (o->standalone)
        setup = setup_standalone;
    for (size_t i = 0; !setup && i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(o->rdzv_backend, backends[i].name) == 0)
            setup = backends[i].setup;
    if (!setup) {
        snprintf(err, cap,
                 "--rdzv-backend=%s is not supported; use "
                 "--standalone, static, c10d or etcd",
                 o->rdzv_backend);
        return -1;
    }
    if (setup(o, rc, s, err, cap))
        return -1;
    rc->host = s->host;
    /* --rdzv-conf's times, in the order that decides (join_timeout wins
     * over timeout). */
    const struct {
        double s;
        int *ms;
    } secs[] = {{c->timeout, &rc->join_timeout_ms},
                {c->join_timeout, &rc->join_timeout_ms},
                {c->read_timeout, &rc->io_timeout_ms},
                {c->last_call_timeout, &rc->last_call_timeout_ms},
                {c->keep_alive_interval, &rc->keep_alive_interval_ms}};
    for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++)
        if (secs[i].s >= 0)
            *secs[i].ms = (int)(secs[i].s * 1000);
    if (c->keep_alive_max_attempt)
        rc->keep_alive_max_attempt = c->keep_alive_max_attempt;
    if (c->is_host)
        rc->is_host = c->is_host;
    return job_secret(c, rc, s, err, cap);
}

/* ---- the outcome ---- */

/* Exit status per outcome (torchrun's, and 2 for a program that cannot
 * run), and whether the job ends for every node.  As torch: a job that
 * ended closes the rendezvous for everyone, but an agent stopped by a
 * signal leaves it open (a replacement node may join), and so does one
 * that could not join at all. */
static const struct {
    int exit_code;
    int close_job;
} outcomes[] = {
    [EL_AGENT_SUCCEEDED] = {0, 1},
    [EL_AGENT_FAILED] = {1, 1},
    [EL_AGENT_SIGNALED] = {1, 0},
    [EL_AGENT_RDZV_ERROR] = {1, 0},
    [EL_AGENT_EXEC_ERROR] = {2, 1},
    /* EX_TEMPFAIL: not a success, not a failure (docs/AGENT.md). */
    [EL_AGENT_PREEMPTED] = {EL_EXIT_PREEMPTED, 0},
};

/* Workers that die at start-up for want of a module most often ran under
 * the wrong Python (pyenv, conda, a system python3 without torch): one line
 * that names the interpreter and how to choose another.  Certain when the
 * error file or stderr.log shows the import error; when stderr went
 * straight to the console, said when every worker exited 1 within 3 s. */
static void python_hint(const struct el_agent_result *res, const char *python)
{
    const char *other = strcmp(python, "/usr/bin/python3") ? "/usr/bin/python3"
                                                           : "/path/to/python3";
    int early = res->nfailures > 0;
    int64_t ran_ms = 0;
    for (int i = 0; i < res->nfailures; i++) {
        const struct el_agent_failure *f = &res->failures[i];
        if (f->import_error) {
            el_log(EL_LOG_WARN,
                   "the workers could not import a module "
                   "(%s) with the interpreter %s; choose the Python that "
                   "has it with PYTHON_EXEC, e.g. PYTHON_EXEC=%s",
                   f->import_error, python, other);
            return;
        }
        early &= f->exitcode == 1 && !f->error_file && f->ran_ms < 3000;
        if (f->ran_ms > ran_ms)
            ran_ms = f->ran_ms;
    }
    if (early)
        el_log(EL_LOG_WARN,
               "the workers exited with code 1 right after "
               "starting (%" PRId64 " ms): if the error above is "
               "ModuleNotFoundError or ImportError, the interpreter %s lacks "
               "the module; choose another with PYTHON_EXEC, e.g. "
               "PYTHON_EXEC=%s",
               ran_ms, python, other);
}

/* Log the outcome; for a failure, torchrun's table on stderr and the
 * agent's own error file.  python: the workers ran under binary. */
static void report(const struct el_agent_result *res, const char *binary,
                   int python, const char *script, const char *own_ef)
{
    switch (res->outcome) {
    case EL_AGENT_SUCCEEDED:
        break;
    case EL_AGENT_FAILED: {
        const struct el_agent_failure *f = &res->failures[res->root];
        char fqdn[256];
        el_log(EL_LOG_ERROR,
               "failed (exitcode: %d) local_rank: %d "
               "(pid: %d) of binary: %s",
               f->exitcode, f->local_rank, (int)f->pid, binary);
        if (own_ef) {
            int w = el_agent_write_error_file(res, own_ef);
            if (w)
                el_log(EL_LOG_WARN, "cannot write the error file %s: %s",
                       own_ef, el_strerror(w));
        }
        el_agent_fqdn(fqdn, sizeof fqdn);
        char *box = el_agent_format_failures(res, script, fqdn);
        if (box) {
            fprintf(stderr, "ChildFailedError: \n%s", box);
            fflush(stderr);
            free(box);
        }
        if (python)
            python_hint(res, binary);
        break;
    }
    case EL_AGENT_SIGNALED:
        el_log(EL_LOG_WARN,
               "stopped by signal %d (%s); workers "
               "stopped",
               res->signal,
               sigabbrev_np(res->signal) ? sigabbrev_np(res->signal) : "?");
        break;
    case EL_AGENT_RDZV_ERROR:
    case EL_AGENT_EXEC_ERROR:
        el_log(EL_LOG_ERROR, "%s", res->errmsg);
        break;
    case EL_AGENT_PREEMPTED:
        el_log(EL_LOG_WARN,
               "preempted: left the job after a preemption "
               "notice; workers stopped (exit status %d)",
               EL_EXIT_PREEMPTED);
        break;
    }
}

/* ---- the launcher ---- */

/* The log level: torchrun's LOGLEVEL (Python's names or numbers), which
 * ELRUN_LOG_LEVEL overrides (el_log_init reads it); warn without either. */
static enum el_log_level log_level(void)
{
    static const struct {
        const char *name;
        int num;
        enum el_log_level lvl;
    } names[] = {{"DEBUG", 10, EL_LOG_DEBUG},  {"INFO", 20, EL_LOG_INFO},
                 {"WARNING", 30, EL_LOG_WARN}, {"WARN", 30, EL_LOG_WARN},
                 {"ERROR", 40, EL_LOG_ERROR},  {"CRITICAL", 50, EL_LOG_ERROR},
                 {"FATAL", 50, EL_LOG_ERROR}};
    const char *v = getenv("LOGLEVEL");
    if (!v || !*v)
        return EL_LOG_WARN;
    char *end;
    long num = strtol(v, &end, 10);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(v, names[i].name) == 0 || (!*end && num <= names[i].num))
            return names[i].lvl;
    return EL_LOG_WARN;
}

/* Where the rendezvous is, as the user would write it. */
static void rdzv_endpoint_text(const struct el_rdzv_config *rc, char *ep,
                               size_t cap)
{
    if (rc->endpoints)
        snprintf(ep, cap, "%s", rc->endpoints);
    else
        snprintf(ep, cap, strchr(rc->host, ':') ? "[%s]:%d" : "%s:%d", rc->host,
                 rc->port);
}

/* Python's repr of --rdzv-conf as torchrun's LaunchConfig holds it: the
 * given pairs (values are strings), 'rank' for static, timeout 900 unless
 * given. */
static void rdzv_configs_repr(const struct el_opts *o, char *buf, size_t cap)
{
    size_t len = 0;
    int has_timeout = 0;
    len += (size_t)snprintf(buf, cap, "{");
    if (!o->standalone && strcmp(o->rdzv_backend, "static") == 0)
        len +=
            (size_t)snprintf(buf + len, cap - len, "'rank': %d", o->node_rank);
    for (const char *p = o->rdzv_conf; p && *p && len < cap;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (eq) {
            const char *k = p, *v = eq + 1;
            size_t kn = (size_t)(eq - p), vn = n - kn - 1;
            while (kn && *k == ' ')
                k++, kn--;
            while (kn && k[kn - 1] == ' ')
                kn--;
            while (vn && *v == ' ')
                v++, vn--;
            while (vn && v[vn - 1] == ' ')
                vn--;
            has_timeout |= kn == 7 && strncmp(k, "timeout", 7) == 0;
            len +=
                (size_t)snprintf(buf + len, cap - len, "%s'%.*s': '%.*s'",
                                 len > 1 ? ", " : "", (int)kn, k, (int)vn, v);
        }
        p += n;
        if (*p == ',')
            p++;
    }
    if (!has_timeout && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, "%s'timeout': 900",
                                len > 1 ? ", " : "");
    if (len < cap)
        snprintf(buf + len, cap - len, "}");
}

/* torchrun's INFO record of the launch, its keys and alignment, with the
 * interpreter added (elrun does not run under it). */
static void log_launch(const struct el_opts *o, const struct el_rdzv_config *rc,
                       const char *binary)
{
    char confs[1024], ep[2048], interp[4200] = "";
    int python = o->run_path || !o->no_python;
    rdzv_configs_repr(o, confs, sizeof confs);
    rdzv_endpoint_text(rc, ep, sizeof ep);
    if (python)
        snprintf(interp, sizeof interp, "  interpreter      : %s\n", binary);
    el_log(EL_LOG_INFO,
           "Starting elastic_operator with launch configs:\n"
           "  entrypoint       : %s\n%s"
           "  min_nodes        : %d\n  max_nodes        : %d\n"
           "  nproc_per_node   : %d\n  run_id           : %s\n"
           "  rdzv_backend     : %s\n  rdzv_endpoint    : %s\n"
           "  rdzv_configs     : %s\n  max_restarts     : %d\n"
           "  monitor_interval : %g\n  log_dir          : %s\n"
           "  metrics_cfg      : {}",
           o->script, interp, o->min_nodes, o->max_nodes, o->nproc, rc->run_id,
           rc->backend, ep, confs, o->max_restarts, o->monitor_interval,
           o->log_dir ? o->log_dir : "None");
}

static void on_events_note(void *arg, const char *msg)
{
    (void)arg;
    el_log(EL_LOG_WARN, "%s", msg);
}

static void mkdir_p(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

struct run;
static void start_events(struct run *run, const struct el_rdzv_config *rc,
                         struct el_agent_config *ac);

/* Everything cli_run_main allocates, freed in one place. */
struct run {
    struct el_opts o;
    char **wargv;
    unsigned char *redir, *tee, *show;
    char *own_ef;
    struct el_agent *agent;
    struct el_rdzv *rdzv;
    struct el_metrics *metrics;
    struct el_metrics_server *msrv;
    struct el_events *events;
    struct el_dash *dash;
    struct el_metrics_server *dsrv; /* the dashboard's, when not msrv */
};

static void run_free(struct run *run)
{
    el_events_close(run->events, 2000); /* while the hosted store runs */
    el_rdzv_close(run->rdzv);
    el_metrics_server_close(run->msrv); /* before the agent it reads */
    el_metrics_server_close(run->dsrv);
    el_agent_close(run->agent);
    el_metrics_free(run->metrics);
    el_dash_free(run->dash);
    free(run->own_ef);
    free(run->wargv);
    free(run->redir);
    free(run->tee);
    free(run->show);
}

/* log_url ADDR PORT PATH WHAT: "WHAT at http://HOST:PORT/PATH", at any log
 * level: the address was asked for. */
static void log_url(const char *what, const char *addr, int port,
                    const char *path)
{
    char h[EL_HOST_MAX];
    int p;
    el_addr_parse(addr, -1, h, &p);
    el_log_(EL_LOG_INFO, "%s at http://%s%s%s:%d%s", what,
            strchr(h, ':') ? "[" : "", h, strchr(h, ':') ? "]" : "", port,
            path);
}

/* --metrics-addr and --dashboard-addr: one registry; the dashboard's
 * server also answers /metrics, so the same address given to both is one
 * server.  0, EL_EUSAGE (a bad address) or another error; err says why. */
static int start_observers(struct run *run, const char *const *consts,
                           char *err, size_t cap)
{
    const struct el_opts *o = &run->o;
    const char *maddr = o->metrics_addr, *daddr = o->dashboard_addr;
    char host[EL_HOST_MAX];
    int port, rc;
    if (daddr && el_addr_parse(daddr, -1, host, &port) < 0) {
        snprintf(err, cap,
                 "--dashboard-addr needs HOST:PORT (for example "
                 "127.0.0.1:8080, or port 0 for a free one), got '%s'",
                 daddr);
        return EL_EUSAGE;
    }
    if (daddr && maddr && strcmp(daddr, maddr) == 0)
        maddr = NULL;
    if (maddr) {
        if ((rc = el_metrics_start(maddr, consts, &run->metrics, &run->msrv,
                                   err, cap)))
            return rc;
        log_url("metrics", maddr, el_metrics_server_port(run->msrv),
                "/metrics");
    } else if ((rc = el_metrics_new(&run->metrics, consts)) < 0) {
        snprintf(err, cap, "metrics: %s", el_strerror(rc));
        return rc;
    }
    if (!daddr)
        return 0;
    struct el_dash_job job = {
        .run_id = consts[1],
        .node = consts[3],
        .role = consts[5],
        .min_nodes = o->min_nodes,
        .max_nodes = o->max_nodes,
        .nproc = o->nproc,
        .max_restarts = o->max_restarts,
    };
    if ((rc = el_dash_new(&run->dash, &job)) < 0) {
        snprintf(err, cap, "dashboard: %s", el_strerror(rc));
        return rc;
    }
    if ((rc = el_metrics_serve_routes(&run->dsrv, run->metrics, host, port,
                                      el_dash_handle, run->dash, err, cap)))
        return rc;
    log_url("dashboard", daddr, el_metrics_server_port(run->dsrv), "/");
    if (!o->metrics_addr || strcmp(daddr, o->metrics_addr) == 0)
        log_url("metrics", daddr, el_metrics_server_port(run->dsrv),
                "/metrics");
    return 0;
}

static int run_main(struct run *run, int argc, char **argv)
{
    struct el_opts *o = &run->o;
    char err[1400];
    char binary[4096];
    int rc;
    el_log_init("elrun", log_level());
    if (el_opts_parse(o, argc, argv, NULL, err, sizeof err) != 0)
        return usage_error(err);
    if (o->help) {
        el_opts_print_help(stdout);
        return 0;
    }
    if (o->version) {
        puts("elrun 0.1.0");
        return 0;
    }
    if ((rc = worker_argv(o, &run->wargv, binary, sizeof binary, err,
                          sizeof err)))
        return rc == 2 ? usage_error(err) : 1;

    struct el_rdzv_config rc_cfg;
    struct rdzv_strings strs;
    if (rdzv_config(o, &rc_cfg, &strs, err, sizeof err))
        return usage_error(err);

    log_launch(o, &rc_cfg, binary);
    for (int i = 0; i < o->nignored; i++)
        el_log(EL_LOG_WARN,
               "%s is accepted for compatibility with torchrun "
               "and ignored",
               o->ignored[i]);

    /* Worker output. */
    run->redir = calloc((size_t)o->nproc, 1);
    run->tee = calloc((size_t)o->nproc, 1);
    run->show = calloc((size_t)o->nproc, 1);
    int sigs[64], nsigs = 0;
    if (!run->redir || !run->tee || !run->show)
        return 1;
    el_opts_std_mask(o->redirects, run->redir, o->nproc);
    el_opts_std_mask(o->tee, run->tee, o->nproc);
    for (int i = 0; i < o->nproc; i++)
        run->redir[i] |= run->tee[i];
    el_opts_ranks_filter(o->local_ranks_filter, run->show, o->nproc);
    el_opts_signals(o->signals_to_handle, sigs, 64, &nsigs);

    if (o->nproc > 1 && !getenv("OMP_NUM_THREADS")) {
        setenv("OMP_NUM_THREADS", "1", 1);
        el_log(EL_LOG_WARN,
               "setting OMP_NUM_THREADS=1 for each worker to "
               "avoid overloading the system; set it yourself to tune");
    }
    /* The agent's own error file (if a scheduler gave one); the workers get
     * theirs from the agent. */
    const char *own_error_file = getenv("TORCHELASTIC_ERROR_FILE");
    run->own_ef =
        own_error_file && *own_error_file ? strdup(own_error_file) : NULL;

    struct el_agent_config ac = {0};
    ac.argv = run->wargv;
    ac.nproc = o->nproc;
    ac.role = o->role;
    ac.run_id = rc_cfg.run_id;
    ac.max_restarts = o->max_restarts;
    ac.log_dir = o->log_dir;
    ac.redirect = run->redir;
    ac.tee = run->tee;
    ac.console = run->show;
    ac.prefix_template = getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
    ac.stop_grace_ms = (int)(o->stop_timeout * 1000);
    ac.exit_barrier_ms = (int)(o->exit_barrier_timeout * 1000);
    ac.restart_backoff_ms = (int)(o->restart_backoff * 1000);
    ac.restart_backoff_max_ms = (int)(o->restart_backoff_max * 1000);
    ac.signals = sigs;
    ac.nsignals = nsigs;
    ac.out_fd = 1;
    ac.err_fd = 2;
    char ep[2048];
    if (!o->standalone) {
        rdzv_endpoint_text(&rc_cfg, ep, sizeof ep);
        ac.rdzv_endpoint = ep;
    }
    ac.rdzv_min_nodes = o->min_nodes;
    ac.rdzv_max_nodes = o->max_nodes;
    ac.rdzv_join_timeout_ms = rc_cfg.join_timeout_ms;
    const char *every = getenv("ELRUN_RDZV_REPORT_INTERVAL");
    ac.rdzv_report_ms = every ? (int)(atof(every) * 1000) : 0;
    ac.on_event = on_agent_event;
    ac.preempt_notice_file = o->preempt_notice_file;
    ac.preempt_notice_cmd = o->preempt_notice_cmd;
    ac.preempt_notice_ms = (int)(o->preempt_notice_secs * 1000);
    ac.worker_stall_ms = (int)(o->worker_stall_timeout * 1000);
    if (o->preempt_signal) {
        int psig[1], np = 0;
        el_opts_signals(o->preempt_signal, psig, 1, &np);
        ac.preempt_signal = np ? psig[0] : 0;
    }

    if (o->metrics_addr || o->dashboard_addr) {
        char node[256];
        el_agent_fqdn(node, sizeof node);
        const char *const consts[] = {"run_id", ac.run_id, "node", node,
                                      "role",   ac.role,   NULL};
        rc = start_observers(run, consts, err, sizeof err);
        if (rc == EL_EUSAGE)
            return usage_error(err);
        if (rc) {
            el_log(EL_LOG_ERROR, "%s", err);
            return 1;
        }
        ac.dashboard = run->dash;
        ac.metrics = run->metrics;
        /* What alerts compare the job with (deploy/prometheus). */
        struct el_metric *g;
        if (el_metrics_register(run->metrics, &g, EL_METRIC_GAUGE,
                                "elrun_job_min_nodes", "--nnodes MIN.", NULL,
                                NULL, 0) == 0)
            el_metric_set(g, NULL, o->min_nodes);
        if (el_metrics_register(run->metrics, &g, EL_METRIC_GAUGE,
                                "elrun_job_max_nodes", "--nnodes MAX.", NULL,
                                NULL, 0) == 0)
            el_metric_set(g, NULL, o->max_nodes);
        if (el_metrics_register(run->metrics, &g, EL_METRIC_GAUGE,
                                "elrun_max_restarts", "--max-restarts.", NULL,
                                NULL, 0) == 0)
            el_metric_set(g, NULL, o->max_restarts);
    }
    start_events(run, &rc_cfg, &ac);
    if ((rc = el_agent_open(&run->agent, &ac))) {
        el_log(EL_LOG_ERROR, "cannot start the agent: %s", el_strerror(rc));
        return 1;
    }
    if ((rc = el_rdzv_open(&run->rdzv, &rc_cfg, err, sizeof err))) {
        if (rc == EL_EUSAGE)
            return usage_error(err);
        el_log(EL_LOG_ERROR, "rendezvous: %s", err);
        return 1;
    }
    struct el_agent_result res;
    if ((rc = el_agent_run(run->agent, run->rdzv, &res))) {
        el_log(EL_LOG_ERROR, "agent failed: %s", el_strerror(rc));
        el_agent_result_free(&res);
        return 1;
    }
    report(&res, binary, o->run_path || !o->no_python, o->script, run->own_ef);
    if (outcomes[res.outcome].close_job)
        el_rdzv_set_closed(run->rdzv);
    int exit_code = outcomes[res.outcome].exit_code;
    el_agent_result_free(&res);
    return exit_code;
}

/* The job's events (docs/EVENTS.md): kept in the rendezvous' store or
 * etcd (c10d, etcd), appended to <log-dir>/events.jsonl with --log-dir.
 * ELRUN_EVENTS=0 turns them off.  A failure to start them is one warning:
 * the job runs without. */
static void start_events(struct run *run, const struct el_rdzv_config *rc,
                         struct el_agent_config *ac)
{
    const struct el_opts *o = &run->o;
    ac->torch_events_console = strcmp(o->event_log_handler, "console") == 0;
    const char *env = getenv("ELRUN_EVENTS");
    if (env && (!strcmp(env, "0") || !strcmp(env, "off")))
        return;
    int shared = !o->standalone && (!strcmp(rc->backend, "c10d") ||
                                    !strcmp(rc->backend, "etcd") ||
                                    !strcmp(rc->backend, "etcd-v2"));
    char path[4200];
    if (o->log_dir) {
        mkdir_p(o->log_dir);
        snprintf(path, sizeof path, "%s/events.jsonl", o->log_dir);
    }
    if (!shared && !o->log_dir)
        return;
    /* The name the rendezvous knows the node by (its member lists). */
    char node[256], err[1400];
    if (o->local_addr)
        snprintf(node, sizeof node, "%s", o->local_addr);
    else if (gethostname(node, sizeof node))
        snprintf(node, sizeof node, "localhost");
    struct el_events_config ec = {.rdzv = shared ? rc : NULL,
                                  .node = node,
                                  .jsonl_path = o->log_dir ? path : NULL,
                                  .on_note = on_events_note};
    if (el_events_open(&run->events, &ec, err, sizeof err)) {
        el_log(EL_LOG_WARN, "events: %s; the job runs without them", err);
        run->events = NULL;
        return;
    }
    ac->events = run->events;
}

int cli_run_main(int argc, char **argv)
{
    struct run *run = calloc(1, sizeof *run);
    if (!run)
        return 1;
    int exit_code = run_main(run, argc, argv);
    run_free(run);
    free(run);
    return exit_code;
}
