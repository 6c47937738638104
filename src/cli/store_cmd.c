/* store_cmd.c -- `elrun store`: run the store server on its own.
 *
 *   elrun store --listen HOST:PORT [limits...] [--secret-file PATH]
 *               [--metrics-addr HOST:PORT]
 *
 * Prints "listening on HOST:PORT" on stdout once it accepts connections
 * (port 0 picks a free port), logs one line per notable event on stderr,
 * and exits 0 on SIGINT or SIGTERM.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cli/cli.h"
#include "elrun/err.h"
#include "elrun/log.h"
#include "elrun/metrics.h"
#include "elrun/net.h"
#include "elrun/store.h"

static const char usage[] =
    "usage: elrun store --listen HOST:PORT [options]\n"
    "\n"
    "Run a key-value store that PyTorch's TCPStore clients (1.13 and 2.3+)\n"
    "and elrun's agents and workers can use.\n"
    "\n"
    "  --listen HOST:PORT     address to listen on; port 0 picks a free one\n"
    "                         [0.0.0.0:29400]\n"
    "  --max-key-len N        longest key in bytes [8192]\n"
    "  --max-value-len N      largest value in bytes [67108864]\n"
    "  --max-keys N           most keys in one request [131072]\n"
    "  --max-conn-buffer N    bytes one connection may hold, each of: its partial\n"
    "                         request, its unsent replies [value limit + 1 MiB]\n"
    "  --max-total-buffer N   the same summed over all connections; past it a\n"
    "                         connection holding over 128 KiB is closed [512 MiB]\n"
    "  --max-total-data N     bytes of keys and values stored; a write past it\n"
    "                         closes its connection (agents with the job\n"
    "                         secret are exempt) [1 GiB]\n"
    "  --stall-timeout MS     close a connection that holds a partial request or\n"
    "                         unread replies and makes no progress [60000]\n"
    "  --max-conns-per-peer N connections from one non-loopback address [512]\n"
    "  --max-conns-per-loopback N  from one loopback address, where every\n"
    "                         process of a one-machine job comes from [no limit]\n"
    "  --fd-reserve N         descriptors kept free for new clients: near the\n"
    "                         limit an idle connection is dropped for a new one\n"
    "                         (silent or stuck ones first) [32]\n"
    "  --secret-file PATH     the job secret (at least 16 bytes, a file only its\n"
    "                         owner can read): keys under /elrun/ may then be\n"
    "                         written only by agents that prove it [none]\n"
    "  --backlog N            listen backlog [65535, capped by net.core.somaxconn]\n"
    "  --metrics-addr HOST:PORT  serve Prometheus metrics at /metrics\n"
    "                         (port 0 picks one; see docs/METRICS.md)\n"
    "  -h, --help             this text\n";

static void log_event(void *arg, const char *msg)
{
    (void)arg;
    el_log(EL_LOG_WARN, "%s", msg);
}

/* The store's metrics, read at scrape time on the metrics thread from the
 * server's atomic counters (el_store_server_stats/_ops are thread-safe). */
struct store_metrics {
    struct el_store_server *srv;
    struct el_metric *conns, *keys, *bytes, *parked, *requests, *rejected, *ops;
};

static void store_op(void *arg, const char *op, uint64_t n)
{
    el_metric_set(arg, (const char *[]){op}, (double)n);
}

static void store_collect(void *arg)
{
    struct store_metrics *m = arg;
    struct el_store_server_stats st;
    el_store_server_stats(m->srv, &st);
    el_metric_set(m->conns, NULL, (double)st.connections);
    el_metric_set(m->keys, NULL, (double)st.keys);
    el_metric_set(m->bytes, NULL, (double)st.data);
    el_metric_set(m->parked, NULL, (double)st.parked);
    el_metric_set(m->requests, NULL, (double)st.requests);
    el_metric_set(m->rejected, NULL, (double)st.rejected);
    el_store_server_ops(m->srv, store_op, m->ops);
}

static int store_metrics_register(struct el_metrics *reg,
                                  struct store_metrics *m)
{
    static const struct el_metric_def defs[] = {
#define O(f) offsetof(struct store_metrics, f)
        {O(conns), EL_METRIC_GAUGE, "elrun_store_connections",
         "Open client connections.", NULL},
        {O(keys), EL_METRIC_GAUGE, "elrun_store_keys", "Keys holding a value.",
         NULL},
        {O(bytes), EL_METRIC_GAUGE, "elrun_store_data_bytes",
         "Bytes of keys and values stored (what --max-total-data bounds).",
         NULL},
        {O(parked), EL_METRIC_GAUGE, "elrun_store_parked_requests",
         "Requests waiting for keys (GET, WAIT, WATCH ...).", NULL},
        {O(requests), EL_METRIC_COUNTER, "elrun_store_requests_total",
         "Requests served.", NULL},
        {O(rejected), EL_METRIC_COUNTER,
         "elrun_store_rejected_connections_total",
         "Connections closed for a bad request or a broken limit.", NULL},
        {O(ops), EL_METRIC_COUNTER, "elrun_store_ops_total",
         "Requests served by type (the wire protocol's names).", "op"},
#undef O
    };
    int rc = el_metrics_register_table(reg, m, defs,
                                       sizeof defs / sizeof defs[0], NULL, 0);
    if (rc < 0)
        return rc;
    return el_metrics_on_collect(reg, store_collect, m);
}

/* Set while /metrics is served: the hook goes before the server. */
static struct el_metrics *served_reg;
static struct store_metrics served;

static void on_signal(uv_signal_t *sig, int signum)
{
    struct el_store_server *srv = sig->data;
    el_log(EL_LOG_INFO, "received %s, shutting down", strsignal(signum));
    if (served_reg)
        el_metrics_off_collect(served_reg, store_collect, &served);
    el_store_server_close(srv);
    uv_close((uv_handle_t *)sig, NULL);
    uv_signal_t *other = sig + (signum == SIGINT ? 1 : -1);
    uv_close((uv_handle_t *)other, NULL);
}

static int parse_size(const char *flag, const char *text, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || !*text || text[0] == '-' || v == 0) {
        fprintf(stderr, "elrun store: %s needs a positive integer, got '%s'\n",
                flag, text);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

/* Flags that set one size_t limit: opts[i] has the value SIZE0 + i. */
#define SIZE0 1000

int cli_store_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"max-key-len", required_argument, NULL, SIZE0 + 0},
        {"max-value-len", required_argument, NULL, SIZE0 + 1},
        {"max-keys", required_argument, NULL, SIZE0 + 2},
        {"max-conn-buffer", required_argument, NULL, SIZE0 + 3},
        {"max-total-buffer", required_argument, NULL, SIZE0 + 4},
        {"stall-timeout", required_argument, NULL, SIZE0 + 5},
        {"max-conns-per-peer", required_argument, NULL, SIZE0 + 6},
        {"max-conns-per-loopback", required_argument, NULL, SIZE0 + 7},
        {"fd-reserve", required_argument, NULL, SIZE0 + 8},
        {"max-total-data", required_argument, NULL, SIZE0 + 9},
        {"listen", required_argument, NULL, 'l'},
        {"secret-file", required_argument, NULL, 'S'},
        {"backlog", required_argument, NULL, 'B'},
        {"metrics-addr", required_argument, NULL, 'M'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    struct el_store_server_opts so = {0};
    struct el_store_limits *lim = &so.limits;
    size_t *const sizes[] = {
        &lim->max_key_len,        &lim->max_value_len,
        &lim->max_keys_per_req,   &lim->max_conn_buffer,
        &lim->max_total_buffer,   &lim->stall_timeout_ms,
        &lim->max_conns_per_peer, &lim->max_conns_per_loopback,
        &lim->fd_reserve,         &lim->max_total_data};
    const char *listen = "0.0.0.0:29400";
    const char *metrics_addr = NULL;
    char host[EL_HOST_MAX], flag[64];
    size_t backlog = 0;
    static uint8_t secret[EL_STORE_SECRET_MAX + 1];
    int c, rc;

    el_log_init("store", EL_LOG_INFO);
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c >= SIZE0 && c < SIZE0 + (int)(sizeof sizes / sizeof *sizes)) {
            snprintf(flag, sizeof flag, "--%s", opts[c - SIZE0].name);
            if (parse_size(flag, optarg, sizes[c - SIZE0]))
                return 2;
            continue;
        }
        switch (c) {
        case 'l':
            listen = optarg;
            break;
        case 'S': {
            char err[1200];
            if (el_store_read_secret(optarg, secret, sizeof secret,
                                     &so.secret_len, err, sizeof err)) {
                fprintf(stderr, "elrun store: %s\n", err);
                return 2;
            }
            so.secret = secret;
            break;
        }
        case 'B':
            if (parse_size("--backlog", optarg, &backlog))
                return 2;
            so.backlog = backlog > 1000000 ? 1000000 : (int)backlog;
            break;
        case 'M':
            metrics_addr = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fprintf(stderr,
                    "elrun store: unknown or incomplete option '%s'; "
                    "see 'elrun store --help'\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                "elrun store: unexpected argument '%s'; "
                "see 'elrun store --help'\n",
                argv[optind]);
        return 2;
    }
    if (el_addr_parse(listen, -1, host, &so.port) < 0) {
        fprintf(stderr,
                "elrun store: --listen needs HOST:PORT (for example "
                "127.0.0.1:29400, or port 0 for a free one), got '%s'\n",
                listen);
        return 2;
    }
    so.host = host;
    so.on_event = log_event;

    uv_loop_t *loop = uv_default_loop();
    struct el_store_server *srv;
    rc = el_store_server_open(&srv, loop, &so);
    if (rc < 0) {
        el_log(EL_LOG_ERROR, "cannot listen on %s: %s%s", listen,
               el_strerror(rc),
               rc == -EADDRINUSE ? " (choose another port, or port 0)" : "");
        return 1;
    }
    uv_signal_t sigs[2];
    uv_signal_init(loop, &sigs[0]);
    uv_signal_init(loop, &sigs[1]);
    sigs[0].data = sigs[1].data = srv;
    uv_signal_start(&sigs[0], on_signal, SIGINT);
    uv_signal_start(&sigs[1], on_signal, SIGTERM);

    printf("listening on %s%s%s:%d\n", strchr(host, ':') ? "[" : "", host,
           strchr(host, ':') ? "]" : "", el_store_server_port(srv));
    fflush(stdout);
    el_log(EL_LOG_INFO, "store listening on port %d%s",
           el_store_server_port(srv), so.secret ? ", with a job secret" : "");
    struct el_metrics *reg = NULL;
    struct el_metrics_server *msrv = NULL;
    struct store_metrics *sm = &served;
    sm->srv = srv;
    if (metrics_addr) {
        char err[512];
        rc = el_metrics_start(metrics_addr, NULL, &reg, &msrv, err, sizeof err);
        if (rc == 0 && (rc = store_metrics_register(reg, sm)) < 0)
            snprintf(err, sizeof err, "metrics: %s", el_strerror(rc));
        if (rc) {
            fprintf(stderr, "elrun store: %s\n", err);
            el_metrics_server_close(msrv);
            el_metrics_free(reg);
            return rc == EL_EUSAGE ? 2 : 1;
        }
        char mh[EL_HOST_MAX];
        int mp;
        el_addr_parse(metrics_addr, -1, mh, &mp);
        served_reg = reg;
        el_log_(EL_LOG_INFO, "metrics at http://%s%s%s:%d/metrics",
                strchr(mh, ':') ? "[" : "", mh, strchr(mh, ':') ? "]" : "",
                el_metrics_server_port(msrv));
    }
    uv_run(loop, UV_RUN_DEFAULT);
    /* The collect hook reads srv: stop scraping before it is freed. */
    el_metrics_server_close(msrv);
    el_metrics_free(reg);
    uv_loop_close(loop);
    return 0;
}
