/* chaos_cmd.c -- `elrun chaos`: inject faults into one running job's
 * processes on this host, to rehearse failure before trusting a job.
 *
 *   elrun chaos --rdzv-id=ID [--every 30s | --every 20s-60s | --at 10s,45s]
 *       [--seed N] [--count N] [--stop-for S] [--cut-for S]
 *       [--faults worker-kill,agent-kill,agent-stop,agent-term,link-cut]
 *
 * The job's processes are found in /proc: its agents are processes whose
 * command line has --rdzv-id=ID (or --rdzv_id, or PET_RDZV_ID=ID in their
 * environment) and that are no worker; its workers have
 * TORCHELASTIC_RUN_ID=ID in their environment and an agent of the job for
 * parent.  Nothing else is ever signalled.  Faults: worker-kill (SIGKILL a
 * worker), agent-kill (SIGKILL an agent and its workers: a lost node),
 * agent-stop (SIGSTOP an agent and its workers, SIGCONT after --stop-for: a
 * frozen node), agent-term (SIGTERM an agent: a preemption), link-cut (the
 * network interfaces of the network namespace an agent runs in go down for
 * --cut-for, then up again: a node that loses its link; only agents in a
 * namespace of their own, a netns host, qualify, never this tool's own
 * namespace).  One line per fault on stdout, with the time since the start.
 * It ends after --count faults (or the last --at), when the job has no agent
 * left on this host, or on SIGTERM/SIGINT; whatever it stopped is always
 * continued and every link it cut brought up again before it exits.
 *
 * The parsers (el__chaos_parse_*) are tested in tests/unit/test_chaos.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "elrun/net.h"

enum {
    F_WORKER_KILL = 1,
    F_AGENT_KILL = 2,
    F_AGENT_STOP = 4,
    F_AGENT_TERM = 8,
    F_LINK_CUT = 16
};

static const struct {
    const char *name;
    unsigned bit;
} fault_names[] = {
    {"worker-kill", F_WORKER_KILL}, {"agent-kill", F_AGENT_KILL},
    {"agent-stop", F_AGENT_STOP},   {"agent-term", F_AGENT_TERM},
    {"link-cut", F_LINK_CUT},
};
#define N_FAULTS 5
enum { K_WORKER_KILL, K_AGENT_KILL, K_AGENT_STOP, K_AGENT_TERM, K_LINK_CUT };

int el__chaos_parse_duration(const char *s, double *out);
int el__chaos_parse_every(const char *s, double *lo, double *hi);
int el__chaos_parse_at(const char *s, double *at, int max, int *n);
int el__chaos_parse_faults(const char *s, unsigned *mask);

/* "30", "30s", "500ms", "2m", "1.5s" -> seconds (>= 0).  0 or -EINVAL. */
int el__chaos_parse_duration(const char *s, double *out)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0)
        return -EINVAL;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
        ;
    else if (strcmp(end, "ms") == 0)
        v /= 1000;
    else if (strcmp(end, "m") == 0)
        v *= 60;
    else
        return -EINVAL;
    if (v > 1e7)
        return -EINVAL;
    *out = v;
    return 0;
}

/* "30s" (every 30 s) or "20s-60s" (uniformly between).  Both > 0, lo <= hi. */
int el__chaos_parse_every(const char *s, double *lo, double *hi)
{
    char a[64];
    const char *dash = s ? strchr(s, '-') : NULL;
    if (!s)
        return -EINVAL;
    if (!dash) {
        if (el__chaos_parse_duration(s, lo) || *lo <= 0)
            return -EINVAL;
        *hi = *lo;
        return 0;
    }
    size_t n = (size_t)(dash - s);
    if (n == 0 || n >= sizeof a)
        return -EINVAL;
    memcpy(a, s, n);
    a[n] = 0;
    if (el__chaos_parse_duration(a, lo) ||
        el__chaos_parse_duration(dash + 1, hi))
        return -EINVAL;
    return *lo > 0 && *lo <= *hi ? 0 : -EINVAL;
}

/* "10s,45s,1m": increasing offsets from the start, at most max. */
int el__chaos_parse_at(const char *s, double *at, int max, int *n)
{
    *n = 0;
    if (!s || !*s)
        return -EINVAL;
    const char *p = s;
    for (;;) {
        char tok[64];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof tok || *n >= max)
            return -EINVAL;
        memcpy(tok, p, len);
        tok[len] = 0;
        double v;
        if (el__chaos_parse_duration(tok, &v))
            return -EINVAL;
        if (*n > 0 && v < at[*n - 1])
            return -EINVAL;
        at[(*n)++] = v;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* "worker-kill,agent-stop" -> bits.  Unknown or empty names: -EINVAL. */
int el__chaos_parse_faults(const char *s, unsigned *mask)
{
    *mask = 0;
    if (!s || !*s)
        return -EINVAL;
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        unsigned bit = 0;
        for (int i = 0; i < N_FAULTS; i++)
            if (strlen(fault_names[i].name) == len &&
                strncmp(p, fault_names[i].name, len) == 0)
                bit = fault_names[i].bit;
        if (!bit)
            return -EINVAL;
        *mask |= bit;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* ---- the job's processes ---- */

#define MAX_PROCS 1024

struct proc {
    pid_t pid, ppid;
    char state;
    int agent; /* 1 agent, 0 worker */
};

/* Read /proc/PID/NAME (NUL-separated) into buf; returns its length or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    ssize_t n;
    while (got + 1 < cap && (n = read(fd, buf + got, cap - 1 - got)) > 0)
        got += (size_t)n;
    close(fd);
    buf[got] = 0;
    return (ssize_t)got;
}

/* 1 when the NUL-separated list [buf, buf+len) holds the entry want. */
static int has_entry(const char *buf, ssize_t len, const char *want)
{
    for (const char *p = buf; p < buf + len; p += strlen(p) + 1)
        if (strcmp(p, want) == 0)
            return 1;
    return 0;
}

static int is_agent_cmdline(const char *buf, ssize_t len, const char *id)
{
    char a[512], b[512];
    snprintf(a, sizeof a, "--rdzv-id=%s", id);
    snprintf(b, sizeof b, "--rdzv_id=%s", id);
    const char *prev = NULL;
    int i = 0;
    for (const char *p = buf; p < buf + len; p += strlen(p) + 1, i++) {
        if (i == 1 && strcmp(p, "chaos") == 0)
            return 0;
        if (strcmp(p, a) == 0 || strcmp(p, b) == 0)
            return 1;
        if (prev &&
            (strcmp(prev, "--rdzv-id") == 0 ||
             strcmp(prev, "--rdzv_id") == 0) &&
            strcmp(p, id) == 0)
            return 1;
        prev = p;
    }
    return 0;
}

static int scan(const char *id, struct proc *out, int max)
{
    static char cmd[65536], env[262144];
    char want_env[512], want_pet[512];
    snprintf(want_env, sizeof want_env, "TORCHELASTIC_RUN_ID=%s", id);
    snprintf(want_pet, sizeof want_pet, "PET_RDZV_ID=%s", id);
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    pid_t self = getpid();
    while ((de = readdir(d)) && n < max) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self)
            continue;
        ssize_t cl = read_proc((pid_t)pid, "cmdline", cmd, sizeof cmd);
        ssize_t el = read_proc((pid_t)pid, "environ", env, sizeof env);
        if (cl <= 0 || el < 0)
            continue;
        int worker = has_entry(env, el, want_env);
        int agent =
            !worker &&
            (is_agent_cmdline(cmd, cl, id) ||
             (has_entry(env, el, want_pet) && !has_entry(cmd, cl, "chaos")));
        if (!worker && !agent)
            continue;
        char stat[1024];
        if (read_proc((pid_t)pid, "stat", stat, sizeof stat) <= 0)
            continue;
        const char *rp = strrchr(stat, ')');
        char st = 0;
        int ppid = 0;
        if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2)
            continue;
        out[n++] = (struct proc){(pid_t)pid, (pid_t)ppid, st, agent};
    }
    closedir(d);
    /* A worker is a direct child of one of the job's agents. */
    int m = 0;
    for (int i = 0; i < n; i++) {
        int keep = out[i].agent;
        for (int j = 0; j < n && !keep; j++)
            keep = out[j].agent && out[j].pid == out[i].ppid;
        if (keep)
            out[m++] = out[i];
    }
    return m;
}

/* ---- links: the network namespace of an agent ---- */

#define MAX_LINKS 8

/* A cut: a socket created inside the agent's network namespace (ioctls on
 * it act there, whatever namespace this process is in afterwards) and the
 * interfaces it took down. */
struct cut {
    int sock;
    int nlinks;
    char link[MAX_LINKS][IF_NAMESIZE];
};

/* 1 when PID's network namespace is not this process's own. */
static int own_netns(pid_t pid)
{
    char path[64];
    struct stat a, b;
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    if (stat(path, &a) != 0 || stat("/proc/self/ns/net", &b) != 0)
        return 0;
    return a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

static int set_up(int sock, const char *name, int up)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0)
        return -errno;
    if (up)
        ifr.ifr_flags |= IFF_UP;
    else
        ifr.ifr_flags &= ~IFF_UP;
    return ioctl(sock, SIOCSIFFLAGS, &ifr) != 0 ? -errno : 0;
}

/* Take down every interface but loopback that is up in PID's network
 * namespace.  0, or -errno with *what naming the step that failed; on
 * failure nothing stays down. */
static int cut_links(pid_t pid, struct cut *c, const char **what)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    c->sock = -1;
    c->nlinks = 0;
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    int rc = 0;
    struct if_nameindex *ifs = NULL;
    if (self < 0 || ns < 0) {
        rc = -errno;
        *what = "open the network namespace";
        goto out;
    }
    if (setns(ns, CLONE_NEWNET) != 0) {
        rc = -errno;
        *what = "enter the network namespace (needs CAP_SYS_ADMIN)";
        goto out;
    }
    c->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (c->sock < 0) {
        rc = -errno;
        *what = "open a socket";
    } else {
        ifs = if_nameindex();
    }
    if (setns(self, CLONE_NEWNET) != 0) {
        /* Cannot happen for a namespace we were in; do not go on in the
         * wrong one. */
        rc = -errno;
        *what = "come back to this tool's network namespace";
        goto out;
    }
    if (rc)
        goto out;
    for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", i->if_name);
        if (ioctl(c->sock, SIOCGIFFLAGS, &ifr) != 0 ||
            (ifr.ifr_flags & IFF_LOOPBACK) || !(ifr.ifr_flags & IFF_UP) ||
            c->nlinks >= MAX_LINKS)
            continue;
        if (set_up(c->sock, i->if_name, 0) == 0)
            snprintf(c->link[c->nlinks++], IF_NAMESIZE, "%s", i->if_name);
    }
    if (c->nlinks == 0) {
        rc = -ENODEV;
        *what = "find a link that is up";
    }
out:
    if (ifs)
        if_freenameindex(ifs);
    if (self >= 0)
        close(self);
    if (ns >= 0)
        close(ns);
    if (rc && c->sock >= 0) {
        close(c->sock);
        c->sock = -1;
    }
    return rc;
}

static void restore_links(struct cut *c)
{
    for (int i = 0; i < c->nlinks; i++)
        set_up(c->sock, c->link[i], 1);
    if (c->sock >= 0)
        close(c->sock);
    c->sock = -1;
    c->nlinks = 0;
}

/* ---- the loop ---- */

static volatile sig_atomic_t chaos_stop;
static void on_chaos_signal(int sig)
{
    chaos_stop = sig;
}

#define MAX_HELD 64
#define MAX_NODE 64

/* What is to be undone at a time: a frozen node (the agent and the workers
 * it had) to continue, or a cut link to bring up. */
struct held {
    int kind; /* K_AGENT_STOP or K_LINK_CUT */
    pid_t pid;
    int nw;
    pid_t workers[MAX_NODE];
    struct cut cut;
    double until;
};

static double now_s(void)
{
    return (double)el_now_ns() / 1e9;
}

static void undo_due(struct held *h, int *nh, double t0, int all)
{
    for (int i = 0; i < *nh;) {
        if (!all && now_s() < h[i].until) {
            i++;
            continue;
        }
        if (h[i].kind == K_AGENT_STOP) {
            for (int j = 0; j < h[i].nw; j++)
                kill(h[i].workers[j], SIGCONT);
            if (kill(h[i].pid, SIGCONT) == 0)
                printf("%8.1fs agent-cont pid %d (after agent-stop)\n",
                       now_s() - t0, (int)h[i].pid);
        } else {
            char names[MAX_LINKS * (IF_NAMESIZE + 1)] = "";
            for (int j = 0; j < h[i].cut.nlinks; j++)
                snprintf(names + strlen(names), sizeof names - strlen(names),
                         "%s%s", j ? "," : "", h[i].cut.link[j]);
            restore_links(&h[i].cut);
            printf("%8.1fs link-up pid %d (%s up again, after link-cut)\n",
                   now_s() - t0, (int)h[i].pid, names);
        }
        fflush(stdout);
        h[i] = h[--*nh];
    }
}

static int held_pid(const struct held *h, int nh, pid_t pid)
{
    for (int i = 0; i < nh; i++) {
        if (h[i].pid == pid)
            return 1;
        for (int j = 0; j < h[i].nw; j++)
            if (h[i].workers[j] == pid)
                return 1;
    }
    return 0;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "elrun chaos: %s\nusage: elrun chaos --rdzv-id=ID "
            "[--every 30s | --every 20s-60s | --at 10s,45s] [--seed N] "
            "[--count N] [--stop-for S] [--cut-for S] [--faults worker-kill,"
            "agent-kill,agent-stop,agent-term,link-cut]\n",
            msg);
    return 2;
}

int cli_chaos_main(int argc, char **argv)
{
    const char *id = NULL, *every = NULL, *at_s = NULL;
    const char *faults_s = "worker-kill,agent-kill,agent-stop,agent-term";
    long seed = (long)time(NULL), count = -1;
    double stop_for = 20, cut_for = 20;
    static const struct option lo[] = {{"rdzv-id", 1, 0, 'i'},
                                       {"rdzv_id", 1, 0, 'i'},
                                       {"rdzv-endpoint", 1, 0, 'e'},
                                       {"rdzv_endpoint", 1, 0, 'e'},
                                       {"every", 1, 0, 'v'},
                                       {"at", 1, 0, 'a'},
                                       {"seed", 1, 0, 's'},
                                       {"count", 1, 0, 'c'},
                                       {"stop-for", 1, 0, 'S'},
                                       {"cut-for", 1, 0, 'C'},
                                       {"faults", 1, 0, 'f'},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'i':
            id = optarg;
            break;
        case 'e':
            break; /* accepted: processes are found by the id */
        case 'v':
            every = optarg;
            break;
        case 'a':
            at_s = optarg;
            break;
        case 'f':
            faults_s = optarg;
            break;
        case 's':
            seed = strtol(optarg, &end, 10);
            if (*end || !*optarg)
                return usage("--seed: expected an integer");
            break;
        case 'c':
            count = strtol(optarg, &end, 10);
            if (*end || !*optarg || count < 1)
                return usage("--count: expected a number of faults >= 1");
            break;
        case 'S':
            if (el__chaos_parse_duration(optarg, &stop_for))
                return usage("--stop-for: expected a duration such as 20s");
            break;
        case 'C':
            if (el__chaos_parse_duration(optarg, &cut_for))
                return usage("--cut-for: expected a duration such as 20s");
            break;
        case 'h':
            usage("inject faults into one job's processes on this host");
            return 0;
        default:
            return usage("unknown option");
        }
    }
    if (optind < argc)
        return usage("unexpected argument (every value belongs to a flag)");
    if (!id || !*id)
        return usage("--rdzv-id=ID is required: the job whose processes get "
                     "the faults");
    if (!every == !at_s)
        return usage("give one of --every D (or LO-HI) and --at T1,T2,...");
    double lo_s = 0, hi_s = 0, at[256];
    int nat = 0;
    if (every && el__chaos_parse_every(every, &lo_s, &hi_s))
        return usage("--every: expected a duration such as 30s, or a range "
                     "such as 20s-60s");
    if (at_s && el__chaos_parse_at(at_s, at, 256, &nat))
        return usage("--at: expected increasing times such as 10s,45s (at "
                     "most 256)");
    unsigned mask;
    if (el__chaos_parse_faults(faults_s, &mask))
        return usage("--faults: expected a list of worker-kill, agent-kill, "
                     "agent-stop, agent-term, link-cut");
    unsigned kinds[N_FAULTS];
    int nk = 0;
    for (int i = 0; i < N_FAULTS; i++)
        if (mask & fault_names[i].bit)
            kinds[nk++] = (unsigned)i;
    if (count < 0 && at_s)
        count = nat;

    struct sigaction sa = {.sa_handler = on_chaos_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    srand48(seed);
    static struct proc procs[MAX_PROCS];
    static struct held held[MAX_HELD];
    int nheld = 0;
    double t0 = now_s();
    /* The job must show up within 30 s. */
    int n = 0;
    while (!chaos_stop && (n = scan(id, procs, MAX_PROCS)) == 0 &&
           now_s() - t0 < 30)
        usleep(100000);
    if (n == 0 && !chaos_stop) {
        fprintf(stderr,
                "elrun chaos: no process of job %s on this host "
                "(agents with --rdzv-id=%s, workers with "
                "TORCHELASTIC_RUN_ID=%s); start the job first\n",
                id, id, id);
        return 1;
    }
    printf("%8.1fs chaos on job %s: seed %ld, faults %s\n", 0.0, id, seed,
           faults_s);
    fflush(stdout);
    t0 = now_s();
    double next = at_s ? at[0] : lo_s + drand48() * (hi_s - lo_s);
    long done = 0;
    unsigned k = 0;
    long drawn = -1; /* the fault k was drawn for */
    while (!chaos_stop && (count < 0 || done < count)) {
        undo_due(held, &nheld, t0, 0);
        if (now_s() - t0 < next) {
            usleep(50000);
            continue;
        }
        n = scan(id, procs, MAX_PROCS);
        int agents = 0;
        for (int i = 0; i < n; i++)
            agents += procs[i].agent;
        if (agents == 0) {
            printf("%8.1fs job %s has no agent left on this host; done\n",
                   now_s() - t0, id);
            break;
        }
        /* --at: the faults in the order given, in turn (a script can
         * name exactly what happens when); --every: one at random. */
        if (drawn != done) {
            k = at_s ? kinds[done % nk] : kinds[lrand48() % nk];
            drawn = done;
        }
        int want_agent = k != K_WORKER_KILL;
        /* Candidates: running processes (not one this tool holds stopped
         * or cut off); a link-cut needs an agent in a netns of its own. */
        int cand[MAX_PROCS], nc = 0, shared_ns = 0;
        for (int i = 0; i < n; i++) {
            int busy = procs[i].state == 'T' || procs[i].state == 't' ||
                       held_pid(held, nheld, procs[i].pid);
            if (procs[i].agent != want_agent || busy)
                continue;
            if (k == K_LINK_CUT && !own_netns(procs[i].pid)) {
                shared_ns++;
                continue;
            }
            cand[nc++] = i;
        }
        double t = now_s() - t0;
        /* None to hit right now (all stopped, between a restart): retry
         * the same fault for up to 10 s before skipping it. */
        if (nc == 0 && t - next < 10) {
            usleep(200000);
            continue;
        }
        if (nc == 0 && shared_ns) {
            printf("%8.1fs link-cut: no agent of job %s runs in a network "
                   "namespace of its own (a netns host); this tool never "
                   "cuts its own namespace's links; skipped\n",
                   t, id);
        } else if (nc == 0) {
            printf("%8.1fs %s: no running %s of job %s; skipped\n", t,
                   fault_names[k].name, want_agent ? "agent" : "worker", id);
        } else if (nheld >= MAX_HELD &&
                   (k == K_AGENT_STOP || k == K_LINK_CUT)) {
            printf("%8.1fs %s: %d faults are held already; skipped\n", t,
                   fault_names[k].name, nheld);
        } else {
            struct proc *p = &procs[cand[lrand48() % nc]];
            /* A node's workers: the agent's children of the job. */
            pid_t w[MAX_NODE];
            int nw = 0;
            for (int i = 0; i < n && nw < MAX_NODE; i++)
                if (!procs[i].agent && procs[i].ppid == p->pid)
                    w[nw++] = procs[i].pid;
            int rc = 0;
            const char *what = "";
            struct held *h = &held[nheld];
            switch (k) {
            case K_WORKER_KILL:
                rc = kill(p->pid, SIGKILL) ? -errno : 0;
                break;
            case K_AGENT_KILL: /* the agent first: it restarts nothing */
                rc = kill(p->pid, SIGKILL) ? -errno : 0;
                for (int i = 0; i < nw && rc == 0; i++)
                    kill(w[i], SIGKILL);
                break;
            case K_AGENT_STOP: /* the agent first: it sees no child stop */
                rc = kill(p->pid, SIGSTOP) ? -errno : 0;
                for (int i = 0; i < nw && rc == 0; i++)
                    kill(w[i], SIGSTOP);
                if (rc == 0) {
                    *h = (struct held){.kind = K_AGENT_STOP,
                                       .pid = p->pid,
                                       .nw = nw,
                                       .until = now_s() + stop_for};
                    memcpy(h->workers, w, sizeof(pid_t) * (size_t)nw);
                    nheld++;
                }
                break;
            case K_AGENT_TERM:
                rc = kill(p->pid, SIGTERM) ? -errno : 0;
                break;
            case K_LINK_CUT:
                rc = cut_links(p->pid, &h->cut, &what);
                if (rc == 0) {
                    h->kind = K_LINK_CUT;
                    h->pid = p->pid;
                    h->nw = 0;
                    h->until = now_s() + cut_for;
                    nheld++;
                }
                break;
            }
            if (rc == 0 && k == K_LINK_CUT) {
                char names[MAX_LINKS * (IF_NAMESIZE + 1)] = "";
                for (int j = 0; j < h->cut.nlinks; j++)
                    snprintf(names + strlen(names),
                             sizeof names - strlen(names), "%s%s", j ? "," : "",
                             h->cut.link[j]);
                printf("%8.1fs link-cut pid %d (agent; %s down for %.1f s)\n",
                       t, (int)p->pid, names, cut_for);
            } else if (rc == 0 && (k == K_AGENT_KILL || k == K_AGENT_STOP)) {
                printf("%8.1fs %s pid %d (agent and %d worker%s)\n", t,
                       fault_names[k].name, (int)p->pid, nw,
                       nw == 1 ? "" : "s");
            } else if (rc == 0) {
                printf("%8.1fs %s pid %d (%s)\n", t, fault_names[k].name,
                       (int)p->pid, want_agent ? "agent" : "worker");
            } else {
                printf("%8.1fs %s pid %d: %s%s%s%s\n", t, fault_names[k].name,
                       (int)p->pid, *what ? "cannot " : "", what,
                       *what ? ": " : "", strerror(-rc));
            }
        }
        fflush(stdout);
        done++;
        if (at_s)
            next = done < nat ? at[done] : next;
        else
            next += lo_s + drand48() * (hi_s - lo_s);
    }
    /* Held faults wait for their time (unless told to quit). */
    while (!chaos_stop && nheld > 0) {
        undo_due(held, &nheld, t0, 0);
        usleep(50000);
    }
    undo_due(held, &nheld, t0, 1);
    return 0;
}
