/* k8s_cmd.c -- `elrun k8s-controller`: the ElasticJob controller
 * (src/k8s, docs/KUBERNETES.md).  Parses its flags and runs the loop until
 * SIGTERM; exit 0 on a signal, 1 on a fatal error, 2 on bad usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "elrun/log.h"
#include "k8s/k8s_int.h"

static const char usage[] =
    "usage: elrun k8s-controller [options]\n"
    "  --kubeconfig FILE        API server and credentials [$KUBECONFIG, else\n"
    "                           the in-cluster service account]\n"
    "  --namespace NS           watch one namespace [all]\n"
    "  --leader-elect           elect one leader with a coordination.k8s.io Lease\n"
    "  --lease-namespace NS     [$POD_NAMESPACE, else the config's namespace]\n"
    "  --lease-name NAME        [elastic-job-controller]\n"
    "  --identity ID            holder identity [$POD_NAME, else HOST_PID]\n"
    "  --lease-duration S       [15]\n"
    "  --resync S               reconcile every job at least every S s [30]\n"
    "  --unschedulable-timeout S  fewer than minReplicas can be scheduled this\n"
    "                           long -> the job fails [60]\n"
    "  --watch-timeout S        end and resume each watch after S s [300]\n"
    "  --metrics-addr HOST:PORT Prometheus metrics there [none]\n";

/* A positive number of seconds, or -1. */
static double secs(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    return (*s && !*e && v > 0 && v < 1e7) ? v : -1;
}

int cli_k8s_main(int argc, char **argv)
{
    el_log_init("k8s-controller", EL_LOG_INFO);
    struct el__k8s_ctl_opts o = {
        .lease_s = 15, .resync_s = 30, .unschedulable_s = 60};
    static const struct option lo[] = {
        {"kubeconfig", required_argument, 0, 'k'},
        {"namespace", required_argument, 0, 'n'},
        {"leader-elect", no_argument, 0, 'l'},
        {"lease-namespace", required_argument, 0, 'L'},
        {"lease-name", required_argument, 0, 'N'},
        {"identity", required_argument, 0, 'i'},
        {"lease-duration", required_argument, 0, 'd'},
        {"resync", required_argument, 0, 'r'},
        {"unschedulable-timeout", required_argument, 0, 'u'},
        {"watch-timeout", required_argument, 0, 'w'},
        {"metrics-addr", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    double wt = 300;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        double *dst = NULL;
        switch (ch) {
        case 'k':
            o.kubeconfig = optarg;
            break;
        case 'n':
            o.namespace_ = optarg;
            break;
        case 'l':
            o.leader_elect = 1;
            break;
        case 'L':
            o.lease_ns = optarg;
            break;
        case 'N':
            o.lease_name = optarg;
            break;
        case 'i':
            o.identity = optarg;
            break;
        case 'd':
            dst = &o.lease_s;
            break;
        case 'r':
            dst = &o.resync_s;
            break;
        case 'u':
            dst = &o.unschedulable_s;
            break;
        case 'w':
            dst = &wt;
            break;
        case 'm':
            o.metrics_addr = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
        if (dst && (*dst = secs(optarg)) < 0) {
            fprintf(stderr,
                    "elrun k8s-controller: --%s %s: want a positive number "
                    "of seconds\n",
                    lo[(ch == 'd')   ? 6
                       : (ch == 'r') ? 7
                       : (ch == 'u') ? 8
                                     : 9]
                        .name,
                    optarg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "elrun k8s-controller: unexpected argument '%s'\n%s",
                argv[optind], usage);
        return 2;
    }
    o.watch_timeout_s = (int)(wt + 0.5);
    char err[600] = "";
    int rc = el__k8s_controller_run(&o, err, sizeof err);
    if (rc) {
        el_log(EL_LOG_ERROR, "%s", err);
        return 1;
    }
    return 0;
}
