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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "elrun/agent.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"

#define RUN_PATH_BOOT \
    "import runpy, sys; sys.argv = sys.argv[1:]; " \
    "runpy.run_path(sys.argv[0], run_name='__main__')"

static int usage_error(const char *msg)
{
    fprintf(stderr, "elrun: error: %s\n", msg);
    return 2;
}

/* Is prog runnable: a path that is an executable file, or a name found
 * in PATH?  Fills why on failure. */
static int find_program(const char *prog, char *why, size_t cap)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) < 0) {
            snprintf(why, cap, "program '%s' does not exist; check the path",
                     prog);
            return -1;
        }
        if (S_ISDIR(st.st_mode) || access(prog, X_OK) < 0) {
            snprintf(why, cap, "program '%s' is not executable; chmod +x it "
                     "or drop --no-python to run it with python3", prog);
            return -1;
        }
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char full[4096];
        snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".", prog);
        if (stat(full, &st) == 0 && !S_ISDIR(st.st_mode) &&
            access(full, X_OK) == 0)
            return 0;
        path += n;
        if (*path == ':')
            path++;
    }
    snprintf(why, cap, "program '%s' was not found in PATH; give its path or "
             "fix PATH", prog);
    return -1;
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
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* The raw value of KEY in a k=v,k=v list (static buffer, valid until the
 * next call), or NULL. */
static const char *conf_value(const char *conf, const char *key)
{
    static char v[1024];
    size_t kl = strlen(key);
    for (const char *p = conf; p && *p;) {
        size_t len = strcspn(p, ",");
        const char *k = p;
        while (*k == ' ')
            k++;
        if (strncmp(k, key, kl) == 0) {
            const char *e = k + kl;
            while (*e == ' ')
                e++;
            if (*e == '=') {
                e++;
                while (*e == ' ')
                    e++;
                snprintf(v, sizeof v, "%.*s", (int)(p + len - e), e);
                return v;
            }
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return NULL;
}

/* KEY's value in "k=v,k2=v2" as seconds: 0 and *out, -1 if absent, -2 (with
 * a message in err) if it is not a number of seconds. */
static int conf_seconds(const char *conf, const char *key, double *out,
                        char *err, size_t cap)
{
    const char *v = conf_value(conf, key);
    if (!v)
        return -1;
    char *end;
    double d = strtod(v, &end);
    while (*end == ' ')
        end++;
    if (end == v || *end || d < 0) {
        snprintf(err, cap, "--rdzv-conf %s=%s: expected seconds", key, v);
        return -2;
    }
    *out = d;
    return 0;
}

/* --rdzv-endpoint for etcd: members separated by commas, each HOST[:PORT]
 * (port 2379) or a URL, into "h:p,h2:p2".  0, or -1 with a message. */
static int etcd_endpoints(const char *spec, char *out, size_t cap, char *err,
                          size_t errlen)
{
    size_t len = 0;
    out[0] = '\0';
    if (!*spec) {
        snprintf(err, errlen, "the etcd rendezvous needs --rdzv-endpoint="
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
            snprintf(err, errlen, "--rdzv-endpoint: '%s' is not HOST[:PORT] "
                     "or a URL of an etcd member", part);
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
     * wants to see by default; the rest is detail. */
    el_log(strncmp(msg, "round ", 6) == 0 && strstr(msg, "nodes (joined")
               ? EL_LOG_WARN : EL_LOG_INFO, "%s", msg);
}

int cli_run_main(int argc, char **argv)
{
    struct el_opts o;
    char err[1400];
    el_log_init("elrun", EL_LOG_WARN);
    if (cli_job_slurm_env(argc, argv))
        return 2;
    if (el_opts_parse(&o, argc, argv, NULL, err, sizeof err) != 0)
        return usage_error(err);
    if (o.help) {
        fputs(el_opts_help, stdout);
        return 0;
    }
    if (o.version) {
        puts("elrun 0.1.0");
        return 0;
    }

    /* The workers' command line. */
    const char *python = getenv("PYTHON_EXEC");
    if (!python || !*python)
        python = "python3";
    int use_python = o.run_path || !o.no_python;
    const char *binary = use_python ? python : o.script;
    if (find_program(binary, err, sizeof err) != 0) {
        if (use_python) {
            char why[1500];
            snprintf(why, sizeof why, "%s (set PYTHON_EXEC or use "
                     "--no-python)", err);
            return usage_error(why);
        }
        return usage_error(err);
    }
    if (use_python && !o.module && access(o.script, R_OK) != 0) {
        snprintf(err, sizeof err, "training script '%s' cannot be read (%s); "
                 "check the path, or use -m for a module or --no-python for "
                 "a program", o.script, strerror(errno));
        return usage_error(err);
    }
    char **wargv = calloc((size_t)o.script_argc + 8, sizeof *wargv);
    if (!wargv)
        return 1;
    int n = 0;
    if (use_python) {
        wargv[n++] = (char *)python;
        wargv[n++] = "-u";
        if (o.run_path) {
            wargv[n++] = "-c";
            wargv[n++] = RUN_PATH_BOOT;
        } else if (o.module) {
            wargv[n++] = "-m";
        }
    }
    wargv[n++] = (char *)o.script;
    for (int i = 0; i < o.script_argc; i++)
        wargv[n++] = o.script_args[i];
    wargv[n] = NULL;

    /* Rendezvous. */
    char run_id[64], endpoints[2048];
    char *etcd_conf[7] = {0};
    struct el_rdzv_config rc = {0};
    char host[EL_HOST_MAX];
    int port = 0;
    double d;
    int r1;
    rc.run_id = o.rdzv_id;
    rc.min_nodes = o.min_nodes;
    rc.max_nodes = o.max_nodes;
    rc.node_rank = o.node_rank;
    rc.local_addr = o.local_addr;
    rc.on_event = on_rdzv_event;
    rc.join_timeout_ms = 600000;
    if (o.standalone) {
        if (strcmp(o.rdzv_backend, "static") || *o.rdzv_endpoint ||
            strcmp(o.rdzv_id, "none"))
            el_log(EL_LOG_INFO, "--standalone: ignoring the given "
                   "rendezvous backend, endpoint and id");
        uuid4(run_id);
        rc.run_id = run_id;
        rc.backend = "standalone";
        snprintf(host, sizeof host, "127.0.0.1");
        port = 0;
    } else if (strcmp(o.rdzv_backend, "static") == 0) {
        rc.backend = "static";
        if (*o.rdzv_endpoint) {
            if (el_addr_parse(o.rdzv_endpoint, -1, host, &port) != 0) {
                snprintf(err, sizeof err, "--rdzv-endpoint=%s: the static "
                         "rendezvous needs HOST:PORT", o.rdzv_endpoint);
                return usage_error(err);
            }
        } else {
            if (el_addr_parse(o.master_addr, 0, host, &port) != 0) {
                snprintf(err, sizeof err, "--master-addr=%s is not a host "
                         "name or address", o.master_addr);
                return usage_error(err);
            }
            port = o.master_port;
        }
        rc.join_timeout_ms = 900000;  /* torchrun's static store timeout */
    } else if (strcmp(o.rdzv_backend, "c10d") == 0) {
        rc.backend = "c10d";
        const char *ep = *o.rdzv_endpoint ? o.rdzv_endpoint : "localhost";
        if (el_addr_parse(ep, 29400, host, &port) != 0) {
            snprintf(err, sizeof err, "--rdzv-endpoint=%s: expected HOST or "
                     "HOST:PORT", ep);
            return usage_error(err);
        }
    } else if (strncmp(o.rdzv_backend, "etcd", 4) == 0) {
        rc.backend = "etcd";
        if ((r1 = etcd_endpoints(o.rdzv_endpoint, endpoints,
                                 sizeof endpoints, err, sizeof err)))
            return usage_error(err);
        rc.endpoints = endpoints;
        static const char *const keys[] = {"etcd_prefix", "protocol",
                                           "cacert", "cert", "key",
                                           "username", "password"};
        const char **dst[] = {&rc.etcd.prefix, &rc.etcd.protocol,
                              &rc.etcd.cacert, &rc.etcd.cert, &rc.etcd.key,
                              &rc.etcd.user, &rc.etcd.password};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const char *v = conf_value(o.rdzv_conf, keys[i]);
            if (v && !(*dst[i] = etcd_conf[i] = strdup(v)))
                return 1;
        }
    } else {
        snprintf(err, sizeof err, "--rdzv-backend=%s is not supported; use "
                 "--standalone, static, c10d or etcd", o.rdzv_backend);
        return usage_error(err);
    }
    rc.host = host;
    rc.port = port;
    r1 = conf_seconds(o.rdzv_conf, "timeout", &d, err, sizeof err);
    if (r1 == -2)
        return usage_error(err);
    if (r1 == 0)
        rc.join_timeout_ms = (int)(d * 1000);
    r1 = conf_seconds(o.rdzv_conf, "join_timeout", &d, err, sizeof err);
    if (r1 == -2)
        return usage_error(err);
    if (r1 == 0)
        rc.join_timeout_ms = (int)(d * 1000);
    r1 = conf_seconds(o.rdzv_conf, "read_timeout", &d, err, sizeof err);
    if (r1 == -2)
        return usage_error(err);
    if (r1 == 0)
        rc.io_timeout_ms = (int)(d * 1000);
    /* The elastic rendezvous' knobs, with torch's defaults. */
    rc.last_call_timeout_ms = 30000;
    rc.keep_alive_interval_ms = 5000;
    rc.keep_alive_max_attempt = 3;
    rc.max_restarts = o.max_restarts;
    const struct {
        const char *key;
        int *ms;
    } secs[] = {{"last_call_timeout", &rc.last_call_timeout_ms},
                {"keep_alive_interval", &rc.keep_alive_interval_ms},
                {"heartbeat_timeout", NULL},
                {"close_timeout", NULL}};
    for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) {
        r1 = conf_seconds(o.rdzv_conf, secs[i].key, &d, err, sizeof err);
        if (r1 == -2)
            return usage_error(err);
        if (r1 == 0 && secs[i].ms)
            *secs[i].ms = (int)(d * 1000);
    }
    r1 = conf_seconds(o.rdzv_conf, "keep_alive_max_attempt", &d, err,
                      sizeof err);
    if (r1 == -2)
        return usage_error(err);
    if (r1 == 0) {
        if (d < 1 || d != (int)d) {
            snprintf(err, sizeof err, "--rdzv-conf keep_alive_max_attempt="
                     "%g: expected a whole number >= 1", d);
            return usage_error(err);
        }
        rc.keep_alive_max_attempt = (int)d;
    }
    if (rc.keep_alive_interval_ms <= 0) {
        snprintf(err, sizeof err, "--rdzv-conf keep_alive_interval must be "
                 "more than 0 seconds");
        return usage_error(err);
    }
    const char *is_host = conf_value(o.rdzv_conf, "is_host");
    if (is_host) {
        if (strchr("1tTyY", is_host[0]))
            rc.is_host = 1;
        else if (strchr("0fFnN", is_host[0]))
            rc.is_host = -1;
        else {
            snprintf(err, sizeof err, "--rdzv-conf is_host=%s: expected "
                     "true or false", is_host);
            return usage_error(err);
        }
    }

    /* Worker output. */
    unsigned char *redir = calloc((size_t)o.nproc, 1);
    unsigned char *tee = calloc((size_t)o.nproc, 1);
    unsigned char *show = calloc((size_t)o.nproc, 1);
    int sigs[64], nsigs = 0;
    if (!redir || !tee || !show)
        return 1;
    el_opts_std_mask(o.redirects, redir, o.nproc);
    el_opts_std_mask(o.tee, tee, o.nproc);
    for (int i = 0; i < o.nproc; i++)
        redir[i] |= tee[i];
    el_opts_ranks_filter(o.local_ranks_filter, show, o.nproc);
    el_opts_signals(o.signals_to_handle, sigs, 64, &nsigs);

    if (o.nproc > 1 && !getenv("OMP_NUM_THREADS")) {
        setenv("OMP_NUM_THREADS", "1", 1);
        el_log(EL_LOG_WARN, "setting OMP_NUM_THREADS=1 for each worker to "
               "avoid overloading the system; set it yourself to tune");
    }
    /* The agent's own error file (if a scheduler gave one); the workers get
     * theirs from the agent. */
    const char *own_error_file = getenv("TORCHELASTIC_ERROR_FILE");
    char *own_ef = own_error_file && *own_error_file ? strdup(own_error_file)
                                                     : NULL;

    struct el_agent_config ac = {0};
    ac.argv = wargv;
    ac.nproc = o.nproc;
    ac.role = o.role;
    ac.run_id = rc.run_id;
    ac.max_restarts = o.max_restarts;
    ac.log_dir = o.log_dir;
    ac.redirect = redir;
    ac.tee = tee;
    ac.console = show;
    ac.prefix_template = getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
    ac.stop_grace_ms = (int)(o.stop_timeout * 1000);
    ac.exit_barrier_ms = (int)(o.exit_barrier_timeout * 1000);
    ac.signals = sigs;
    ac.nsignals = nsigs;
    ac.out_fd = 1;
    ac.err_fd = 2;
    ac.on_event = on_agent_event;

    struct el_agent *agent;
    int rcode = el_agent_open(&agent, &ac);
    if (rcode) {
        el_log(EL_LOG_ERROR, "cannot start the agent: %s", el_strerror(rcode));
        return 1;
    }
    struct el_rdzv *rdzv;
    rcode = el_rdzv_open(&rdzv, &rc, err, sizeof err);
    for (size_t i = 0; i < sizeof etcd_conf / sizeof etcd_conf[0]; i++)
        free(etcd_conf[i]); /* el_rdzv_open copied them */
    if (rcode) {
        el_agent_close(agent);
        if (rcode == EL_EUSAGE)
            return usage_error(err);
        el_log(EL_LOG_ERROR, "rendezvous: %s", err);
        return 1;
    }
    struct el_agent_result res;
    rcode = el_agent_run(agent, rdzv, &res);
    int exit_code = 1;
    if (rcode) {
        el_log(EL_LOG_ERROR, "agent failed: %s", el_strerror(rcode));
    } else {
        switch (res.outcome) {
        case EL_AGENT_SUCCEEDED:
            exit_code = 0;
            break;
        case EL_AGENT_FAILED: {
            const struct el_agent_failure *f = &res.failures[res.root];
            char fqdn[256];
            el_log(EL_LOG_ERROR, "failed (exitcode: %d) local_rank: %d "
                   "(pid: %d) of binary: %s", f->exitcode, f->local_rank,
                   (int)f->pid, binary);
            if (own_ef) {
                int w = el_agent_write_error_file(&res, own_ef);
                if (w)
                    el_log(EL_LOG_WARN, "cannot write the error file %s: %s",
                           own_ef, el_strerror(w));
            }
            el_agent_fqdn(fqdn, sizeof fqdn);
            char *box = el_agent_format_failures(&res, o.script, fqdn);
            if (box) {
                fprintf(stderr, "ChildFailedError: \n%s", box);
                fflush(stderr);
                free(box);
            }
            break;
        }
        case EL_AGENT_SIGNALED:
            el_log(EL_LOG_WARN, "stopped by signal %d (%s); workers "
                   "stopped", res.signal, sigabbrev_np(res.signal)
                   ? sigabbrev_np(res.signal) : "?");
            break;
        case EL_AGENT_RDZV_ERROR:
            el_log(EL_LOG_ERROR, "%s", res.errmsg);
            break;
        case EL_AGENT_EXEC_ERROR:
            el_log(EL_LOG_ERROR, "%s", res.errmsg);
            exit_code = 2;
            break;
        }
        /* As torch: a job that ended closes the rendezvous for everyone,
         * but an agent stopped by a signal leaves it open (a replacement
         * node may join), and so does one that could not join at all. */
        if (res.outcome != EL_AGENT_SIGNALED &&
            res.outcome != EL_AGENT_RDZV_ERROR)
            el_rdzv_set_closed(rdzv);
    }
    el_agent_result_free(&res);
    el_rdzv_close(rdzv);
    el_agent_close(agent);
    free(own_ef);
    free(wargv);
    free(redir);
    free(tee);
    free(show);
    return exit_code;
}
