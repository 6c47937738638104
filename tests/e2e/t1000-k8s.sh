#!/usr/bin/env bash
# The ElasticJob controller (`elrun k8s-controller`, src/k8s) on the
# Kubernetes simulator (tests/infra/k8s: an API server whose nodes run pods
# as real processes, each in its own network namespace), with Debian's
# kubectl 1.20.  The CRD and manifests are deploy/kubernetes as shipped; the
# images are mapped to build/elrun (entrypoint elrun) and the C example.
# The rendezvous is the etcd of deploy/kubernetes/etcd.yaml, in its own pod.
#
# Cases: a bad spec is rejected naming the field; TorchElastic's imagenet
# manifest, unchanged, trains to the end; kubectl scale 2 -> 3 -> 1 while
# training without restarting the survivor; a pod and then a node killed
# mid-run (worker-0 first) are replaced and the job ends; a Pending pod does
# not hold the job and below minReplicas the job fails saying why; two
# controllers at once and a SIGKILLed one restarted (no duplicate pods); a
# watch that gets 410 re-lists; the shipped Deployment runs in-cluster;
# deleting a job leaves nothing.  `elrun submit -s kubernetes`: the job
# trains to the end, status/logs/list/cancel through the API, --wait, the
# --dryrun document applied with kubectl, bad input and an unreachable API
# server as one line.
#   T1000_SUBMIT_ONLY=1   run only the set-up and the submit cases (which
#                         otherwise run last, on the shipped Deployment)
#
# It takes /run/lock/elrun-netns.lock (netns_hosts) like t0200/t0700: the
# simulator lives on the same bridge and hosts as their simulated hosts.
. "$(dirname "$0")/lib.sh"
INFRA="$ROOT/tests/infra"
KS="$INFRA/k8s"
DEPLOY="$ROOT/deploy/kubernetes"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"

if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
    test_skip "ElasticJob controller on the simulator" "needs root, iproute2 and nftables"
    test_done; exit
fi
KUBECTL=""
for c in /usr/local/lib/ksim/kubernetes-client/usr/bin/kubectl /usr/bin/kubectl; do
    [[ -x $c ]] && "$c" version --client 2>/dev/null | contains 'v1\.20\.' && { KUBECTL=$c; break; }
done
# Debian's kubectl 1.20 (kubernetes-client), unpacked aside when another
# package owns /usr/bin/kubectl (the simulator's install-deps.sh)
[[ -n $KUBECTL ]] || KUBECTL=$(bash "$KS/install-deps.sh" 2>"$T/install-deps.log") || KUBECTL=""
if [[ -z $KUBECTL || ! -x $TRAIN || ! -x /usr/bin/etcd ]]; then
    test_skip "ElasticJob controller on the simulator" \
        "needs kubectl 1.20 (bash tests/infra/k8s/install-deps.sh), etcd-server and $BUILD/examples/train_fmnist"
    test_done; exit
fi
if ss -Hltn 'sport = :6443' | contains .; then
    test_skip "ElasticJob controller on the simulator" "port 6443 is taken (another simulator?)"
    test_done; exit
fi

netns_hosts 3
export KSIM_BASE="$T/ksim"
trap 'for f in "$T"/ctl-*.pid; do [[ -s $f ]] && kill -KILL "$(cat "$f")" 2>/dev/null; done
      [[ -n ${T1000_KEEP:-} ]] && { mkdir -p "$T1000_KEEP"; cp -a "$T"/. "$T1000_KEEP"/ 2>/dev/null; }
      bash "$KS/k8s-stop.sh" >/dev/null 2>&1
      _cleanup
      bash "$INFRA/netns-down.sh" >/dev/null 2>&1' EXIT

# The images: elrun/* is elrun.  TorchElastic's example image is played by
# elrun too: its entrypoint rewrites the script's path inside the image
# (/workspace/examples/imagenet/main.py, absent here) to a stand-in, and its
# "python" runs the C example for the script's --epochs.
cat >"$T/imagenet-entry.sh" <<EOF
#!/bin/bash
exec "$ROOT/$BUILD/elrun" "\${@/#\/workspace\/examples\/imagenet\/main.py/$T/main.py}"
EOF
cat >"$T/imagenet-python.sh" <<EOF
#!/bin/sh
# python3 -u $T/main.py --arch=.. --epochs=N ... DATA
ep=2
for a in "\$@"; do case \$a in --epochs=*) ep=\${a#--epochs=};; esac; done
exec "$TRAIN" --epochs "\$ep" --subset 3000 --threads 1
EOF
echo "# stands in for the image's imagenet/main.py" >"$T/main.py"
chmod +x "$T/imagenet-entry.sh" "$T/imagenet-python.sh"
cat >"$T/images.json" <<EOF
{ "elrun/*": {"entrypoint": ["$ROOT/$BUILD/elrun"]},
  "torchelastic/examples*": {"entrypoint": ["$T/imagenet-entry.sh"], "env": {"PYTHON_EXEC": "$T/imagenet-python.sh"}} }
EOF
# (not the lock's fd 9: whatever outlives this script must not hold the lock)
KSIM_IMAGES="$T/images.json:$KS/images.json" bash "$KS/k8s-start.sh" >"$T/ksim.env" 2>"$T/ksim.start" 9>&- ||
    { cat "$T/ksim.start"; echo "Bail out! the simulator did not start"; exit 1; }
export KUBECONFIG="$KSIM_BASE/kubeconfig"
kc() { "$KUBECTL" --cache-dir "$T/kcache" "$@"; }
ksim() { bash "$KS/ksim" "$@"; }
NS=elastic-job
kj() { kc -n $NS get elasticjob "$1" -o jsonpath="$2"; }
state() { kj "$1" '{.status.state}'; }
pod_uid() { kc -n $NS get pod "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
pod_phase() { kc -n $NS get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
npods() { kc -n $NS get pods -l "job-name=$1" -o name | wc -l; }
podlog() { kc -n $NS logs "$1" 2>/dev/null; }
# formed POD N: the pod's agent is in a round of N nodes (every agent logs it)
formed() { podlog "$1" | grep -E "round [0-9]+: $2 nodes" >/dev/null; }
# trains JOB N: the job's rank 0 (in any of its pods) logged an epoch at world N
joblogs() { local p; for p in $(kc -n $NS get pods -l "job-name=$1" -o name); do kc -n $NS logs "$p" 2>/dev/null || :; done; }
trains() { joblogs "$1" | grep "world $2\$" >/dev/null; }

# ctl NAME [ARGS]: a controller as a plain process (kubeconfig), on the lease
# that the shipped Deployment uses too.  Cases run in subshells: the pid is
# in $T/ctl-NAME.pid (ctlpid NAME), which the EXIT trap kills.
ctl() {
    local n=$1; shift
    "$ELRUN" k8s-controller --leader-elect --lease-namespace $NS --identity "$n" \
        --lease-duration 3 --unschedulable-timeout 4 --watch-timeout 3 "$@" \
        >>"$T/ctl-$n.log" 2>&1 9>&- &
    echo $! >"$T/ctl-$n.pid"
}
ctlpid() { cat "$T/ctl-$1.pid"; }

# job NAME REPLICAS MIN MAX EPOCHS [EXTRA YAML for the pod spec]
job() {
    cat <<EOF
apiVersion: elastic.pytorch.org/v1alpha1
kind: ElasticJob
metadata: {name: $1, namespace: $NS}
spec:
  rdzvEndpoint: "etcd-service:2379"
  minReplicas: $3
  maxReplicas: $4
  replicaSpecs:
    Worker:
      replicas: $2
      restartPolicy: ExitCode
      template:
        spec:
          terminationGracePeriodSeconds: 10
${6:-}
          containers:
          - name: elasticjob-worker
            image: elrun/elrun:0.1.0
            args: ["--nproc_per_node=1", "--rdzv_conf=last_call_timeout=2", "--max-restarts=3",
                   "--no-python", "$TRAIN", "--epochs", "$5", "--subset", "6000", "--threads", "1",
                   "--ckpt-dir", "$T/ckpt-$1", "--ckpt-every", "20"]
EOF
}
# gone JOB: no pod and no service of JOB is left
gone() { [[ -z $(kc -n $NS get pods,services -l "job-name=$1" -o name) ]]; }

test_expect_success 'the CRD, a namespace and etcd in its own pod' '
    kc apply -f "$DEPLOY/crd.yaml"
    wait_until "kc get crd elasticjobs.elastic.pytorch.org -o jsonpath={.status.conditions[*].type} | contains Established" 20
    kc create namespace $NS
    kc -n $NS apply -f "$DEPLOY/etcd.yaml"
    wait_until "[[ \$(kc -n $NS get endpoints etcd-service -o jsonpath={.subsets[0].addresses[0].ip}) ]]" 30
    ctl ctl-a --metrics-addr 127.0.0.1:0
    wait_until "grep -q \"leading as \\\"ctl-a\\\"\" $T/ctl-ctl-a.log" 20
'



# ---- elrun submit -s kubernetes (the job verbs through the API) ----------
# sub ARGS...: elrun submit -s kubernetes of the C example in $NS
KCFG="image=elrun/elrun:0.1.0,namespace=$NS"
sub() { "$ELRUN" submit -s kubernetes "$@"; }
# kst HANDLE: the state `elrun status` prints
kst() { "$ELRUN" status "$1" | sed -n "s/^    State: //p"; }
# owned NAME: what is left of job NAME (its pods, services, etcd)
owned() { kc -n $NS get pods,services -l "elrun/job=$1" -o name; }
# The cases, run at the end (after the controller's own: its metrics and
# event counts are theirs), or alone with T1000_SUBMIT_ONLY=1.
submit_cases() {
    test_expect_success 'submit -s kubernetes: the job trains to the end; status, logs, list; cancel leaves nothing' '
        h=$(sub -j 1:2x1 --cfg "$KCFG" --name sub --no-python "$TRAIN" --epochs 2 --subset 3000 --threads 1)
        echo "$h"
        [[ $h == kubernetes://elrun/$NS:sub-* ]]
        n=${h##*:}
        # the rendezvous is an etcd of its own, in its own pod, owned by the job
        [[ $(kj $n {.spec.rdzvEndpoint}) == $n-etcd:2379 ]]
        [[ $(kc -n $NS get pod $n-etcd -o jsonpath={.metadata.ownerReferences[0].name}) == "$n" ]]
        [[ -z $(kc -n $NS get pod $n-etcd -o jsonpath={.metadata.labels.job-name}) ]]
        wait_until "[[ \$(kst $h) == RUNNING ]]" 60
        "$ELRUN" status $h | tee "$T/sub.st1"
        grep -Eq "^ \*worker\[0\]:(RUNNING|PENDING)" "$T/sub.st1"
        grep -Eq "^  worker\[1\]:(RUNNING|PENDING)" "$T/sub.st1"
        wait_until "[[ \$(kst $h) == SUCCEEDED ]]" 180
        "$ELRUN" status $h | tee "$T/sub.st2"
        grep -Eq "^ \*worker\[0\]:SUCCEEDED on node-[0-9]" "$T/sub.st2"
        grep -q "UI URL: https://127.0.0.1:6443/apis/elastic.pytorch.org/v1alpha1/namespaces/$NS/elasticjobs/$n" "$T/sub.st2"
        "$ELRUN" status --json $h | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"state\"] == \"SUCCEEDED\" and len(d[\"roles\"][0][\"replicas\"]) == 2, d"
        "$ELRUN" logs $h >"$T/sub.logs"
        grep -q "^worker/0 " "$T/sub.logs"
        grep -q "^worker/1 " "$T/sub.logs"
        refute grep -v "^worker/[01] " "$T/sub.logs"
        "$ELRUN" logs $h --regex "^final:" | tee "$T/sub.final"
        grep -Eq "^worker/[01] final: test accuracy .*world 2" "$T/sub.final"
        # --tail N: the last N lines of the replica (rank 1 may log one line)
        for k in 0 1; do
            "$ELRUN" logs $h $k --tail 2 >"$T/sub.tail"
            grep "^worker/$k " "$T/sub.logs" | tail -2 | diff - "$T/sub.tail"
        done
        "$ELRUN" list -s kubernetes | tee "$T/sub.list"
        grep -Eq "^$h +sub +SUCCEEDED$" "$T/sub.list"
        "$ELRUN" cancel $h
        [[ -z $(owned $n) ]]
        refute kc -n $NS get elasticjob $n 2>/dev/null
        refute "$ELRUN" status $h 2>"$T/sub.gone"
        grep -q "^elrun status: error: no job $h: the API server https://127.0.0.1:6443 has no ElasticJob $NS/$n" "$T/sub.gone"
    '

    test_expect_success 'submit -s kubernetes --wait on an etcd given; cancel mid-run; --dryrun applies with kubectl' '
        st=0; timeout 300 "$ELRUN" submit -s kubernetes --wait -j 1x1 --cfg "$KCFG,rdzv_endpoint=etcd-service:2379" --name waited \
            --no-python "$TRAIN" --epochs 1 --subset 3000 --threads 1 >"$T/w.out" 2>"$T/w.err" || st=$?
        cat "$T/w.out" "$T/w.err"
        ((st == 0))
        grep -q "job finished: SUCCEEDED" "$T/w.err"
        n=$(sed "s/.*://" "$T/w.out")
        refute kc -n $NS get pod $n-etcd 2>/dev/null
        "$ELRUN" cancel "$(cat "$T/w.out")"
        # cancel while it trains: every pod goes, and status says the job is gone
        h=$(sub -j 2x1 --cfg "$KCFG" --name long --no-python "$TRAIN" --epochs 100000 --subset 3000 --threads 1)
        n=${h##*:}
        wait_until "[[ \$(kst $h) == RUNNING ]] && [[ \$(kc -n $NS get pods -l job-name=$n --field-selector=status.phase=Running -o name | wc -l) == 2 ]]" 60
        "$ELRUN" cancel $h
        [[ -z $(owned $n) ]]
        # the dry run: one document kubectl applies as it is; the job runs
        sub --dryrun -j 1x1 --cfg "$KCFG" --name dry --no-python "$TRAIN" --epochs 1 --subset 3000 --threads 1 >"$T/dry.json"
        n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"items\"][0][\"metadata\"][\"name\"])" "$T/dry.json")
        refute kc -n $NS get elasticjob $n 2>/dev/null
        kc apply -f - <"$T/dry.json"
        wait_until "[[ \$(state $n) == Succeeded ]]" 120
        kc delete -f "$T/dry.json"
        wait_until "[[ -z \$(owned $n) ]]" 30
    '

    test_expect_success 'submit -s kubernetes: bad input and an unreachable API server are one line, exit 2' '
        # one CMD...: exit 2 and one line on stderr (TEST_TRACE lines aside)
        one() { local st=0; "$@" 2>"$T/one.err" >/dev/null || st=$?; cat "$T/one.err"; ((st == 2)) && [[ $(grep -vc "^+" "$T/one.err") == 1 ]]; }
        one sub --no-python "$TRAIN"
        grep -q "needs --cfg image=IMAGE" "$T/one.err"
        one sub --cfg "$KCFG,queue=x" --no-python "$TRAIN"
        grep -q "cfg queue: not an option of the kubernetes scheduler; it knows image, namespace" "$T/one.err"
        one sub --cfg "image=x,namespace=Bad_NS" --no-python "$TRAIN"
        grep -q "namespace=.Bad_NS. is not a Kubernetes namespace" "$T/one.err"
        one "$ELRUN" status kubernetes://elrun/sub
        grep -q "is not a job handle" "$T/one.err"
        sed "s|server: .*|server: https://127.0.0.1:1|" "$KUBECONFIG" >"$T/down.kubeconfig"
        one env KUBECONFIG="$T/down.kubeconfig" "$ELRUN" submit -s kubernetes --cfg "$KCFG" --no-python "$TRAIN"
        grep -q "^elrun submit: error: cannot reach the Kubernetes API server https://127.0.0.1:1: .*(check KUBECONFIG" "$T/one.err"
        for v in status cancel logs; do
            one env KUBECONFIG="$T/down.kubeconfig" "$ELRUN" $v kubernetes://elrun/$NS:x
            grep -q "^elrun $v: error: cannot reach the Kubernetes API server https://127.0.0.1:1" "$T/one.err"
        done
        one env KUBECONFIG="$T/down.kubeconfig" "$ELRUN" list -s kubernetes
        # without -s, a cluster that cannot be asked only leaves its jobs out
        env KUBECONFIG="$T/down.kubeconfig" "$ELRUN" list >"$T/list.out" 2>"$T/list.err"
        grep -q "^APP HANDLE" "$T/list.out"
        grep -q "kubernetes jobs left out" "$T/list.err"
    '
}
[[ -n ${T1000_SUBMIT_ONLY:-} ]] && { submit_cases; test_done; exit; }

test_expect_success 'a bad ElasticJob is rejected, naming the fields' '
    cat >"$T/bad.yaml" <<EOF
apiVersion: elastic.pytorch.org/v1alpha1
kind: ElasticJob
metadata: {name: bad, namespace: $NS}
spec:
  rdzvEndpoint: "etcd-service:2379"
  minReplicas: 0
  replicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: Sometimes
      template:
        spec:
          containers:
          - name: w
EOF
    refute kc apply -f "$T/bad.yaml" 2>"$T/bad.err"
    cat "$T/bad.err"
    grep -q "spec.minReplicas: Invalid value: 0" "$T/bad.err"
    grep -q "spec.replicaSpecs.Worker.restartPolicy: Unsupported value: \"Sometimes\"" "$T/bad.err"
    grep -q "spec.replicaSpecs.Worker.template.spec.containers\[0\].image: Required value" "$T/bad.err"
    refute kc -n $NS get elasticjob bad 2>/dev/null
    # what a schema cannot say: the controller fails the job naming the field
    job minmax 2 3 2 1 | kc apply -f -
    wait_until "[[ \$(state minmax) == Failed ]]" 20
    kj minmax "{.status.conditions[?(@.type==\"Failed\")].message}" >"$T/minmax.msg"
    cat "$T/minmax.msg"
    grep -q "spec.minReplicas: Invalid value: 3: must be less than or equal to spec.maxReplicas (2)" "$T/minmax.msg"
    [[ $(kj minmax "{.status.conditions[?(@.type==\"Failed\")].reason}") == InvalidSpec ]]
    [[ $(npods minmax) == 0 ]]
    kc -n $NS delete elasticjob minmax
'

test_expect_success 'TorchElastic'"'"'s imagenet manifest, unchanged, trains to the end' '
    kc apply -f "$DEPLOY/imagenet.yaml"
    wait_until "[[ \$(state imagenet) == Succeeded ]]" 180
    for i in 0 1; do
        p=imagenet-worker-$i
        kc -n $NS get pod $p -o jsonpath="{.spec.containers[0].args}" >"$T/args.$i"
        grep -q "^\[\"--rdzv_backend=etcd\",\"--rdzv_endpoint=etcd-service:2379\",\"--rdzv_id=imagenet\",\"--nnodes=1:2\",\"--nproc_per_node=1\",\"/workspace/examples/imagenet/main.py\"" "$T/args.$i"
        [[ $(pod_phase $p) == Succeeded ]]
        formed $p 2
        [[ $(kc -n $NS get service $p -o jsonpath={.spec.clusterIP}) == None ]]
        [[ $(kc -n $NS get pod $p -o jsonpath={.metadata.ownerReferences[0].kind}) == ElasticJob ]]
    done
    joblogs imagenet | grep "^final: test accuracy .*world 2" >/dev/null
    kc -n $NS get elasticjob imagenet >"$T/get.txt"
    cat "$T/get.txt"
    grep -Eq "^NAME +MIN +MAX +DESIRED +ACTIVE +STATE +AGE" "$T/get.txt"
    grep -Eq "^imagenet +1 +2 +2 +0 +Succeeded" "$T/get.txt"
    kc -n $NS get events --field-selector involvedObject.name=imagenet -o jsonpath="{.items[*].reason}" >"$T/ev"
    grep -q SuccessfulCreatePod "$T/ev"
    grep -q ElasticJobSucceeded "$T/ev"
    # the controller'"'"'s metrics
    port=$(sed -n "s/.*metrics on .* (port \([0-9]*\)).*/\1/p" "$T/ctl-ctl-a.log")
    curl -fsS -m 5 "http://127.0.0.1:$port/metrics" >"$T/metrics"
    grep -qx "elrun_k8s_jobs{state=\"Succeeded\"} 1" "$T/metrics"
    grep -qx "elrun_k8s_leader 1" "$T/metrics"
    awk "/^elrun_k8s_pods_created_total / { ok = \$2 >= 2 } END { exit !ok }" "$T/metrics"
    grep -q "^elrun_k8s_reconcile_seconds_count [1-9]" "$T/metrics"
'

test_expect_success 'deleting a job leaves nothing (pods and services are owned)' '
    kc -n $NS delete elasticjob imagenet
    wait_until "gone imagenet" 30
'

test_expect_success 'kubectl scale 2 -> 3 -> 1 while training: no surviving pod restarts' '
    job sc 2 1 3 100000 | kc apply -f -
    wait_until "formed sc-worker-0 2 && trains sc 2" 60
    u0=$(pod_uid sc-worker-0)
    kc -n $NS scale elasticjob/sc --replicas=3
    wait_until "[[ \$(pod_phase sc-worker-2) == Running ]]" 30
    wait_until "formed sc-worker-0 3 && trains sc 3" 60
    [[ $(kj sc {.status.replicas}) == 3 ]]
    kc -n $NS scale elasticjob/sc --replicas=1
    wait_until "[[ -z \$(pod_uid sc-worker-1)\$(pod_uid sc-worker-2) ]]" 30
    wait_until "formed sc-worker-0 1 && trains sc 1" 60
    # the same pod and the same container: re-formed, not restarted
    [[ $(pod_uid sc-worker-0) == "$u0" ]]
    [[ $(kc -n $NS get pod sc-worker-0 -o jsonpath={.status.containerStatuses[0].restartCount}) == 0 ]]
    podlog sc-worker-0 | grep "resumed from checkpoint" >/dev/null
    wait_until "[[ -z \$(kc -n $NS get services sc-worker-1 sc-worker-2 -o name 2>/dev/null) ]]" 20
    kc -n $NS get events --field-selector involvedObject.name=sc -o jsonpath="{.items[*].reason}" | contains ScaledDown
    kc -n $NS delete elasticjob sc
    wait_until "gone sc" 30
'

test_expect_success 'a pod killed, then worker-0'"'"'s node killed: replaced, the job trains to the end' '
    job pk 2 1 2 1500 | kc apply -f -
    wait_until "formed pk-worker-0 2 && trains pk 2" 60
    u1=$(pod_uid pk-worker-1)
    ksim pod kill $NS/pk-worker-1 >/dev/null
    wait_until "[[ \$(pod_uid pk-worker-1) && \$(pod_uid pk-worker-1) != $u1 ]]" 30
    wait_until "[[ \$(pod_phase pk-worker-1) == Running ]]" 30
    wait_until "formed pk-worker-1 2" 90
    # worker-0 is where torchrun-style jobs keep their store: not here
    node=$(kc -n $NS get pod pk-worker-0 -o jsonpath={.spec.nodeName})
    [[ $node != $(kc -n $NS get pod etcd -o jsonpath={.spec.nodeName}) ]]
    u0=$(pod_uid pk-worker-0)
    ksim node kill $node >/dev/null
    wait_until "[[ \$(pod_uid pk-worker-0) && \$(pod_uid pk-worker-0) != $u0 ]]" 40
    wait_until "[[ \$(state pk) == Succeeded ]]" 400
    ksim node restore $node >/dev/null
    [[ $(kj pk {.status.replicaStatuses.Worker.failed}) == 0 ]]   # neither counts against backoffLimit
    [[ $(kj pk {.status.restarts}) -ge 1 ]]
    joblogs pk | grep "^final:" | tee "$T/pk.final"
    awk "{ sub(/%/, \"\", \$4); exit !(\$4 >= 75) }" "$T/pk.final"
    kc -n $NS get events --field-selector involvedObject.name=pk -o jsonpath="{.items[*].reason}" | contains ElasticJobRestarting
    kc -n $NS delete elasticjob pk
    wait_until "gone pk" 30
'

test_expect_success 'a Pending pod does not hold the job; below minReplicas it fails saying why' '
    wait_until "[[ \$(kc get nodes --no-headers | grep -c \" Ready \") == 3 ]]" 20
    # 3 cpu each: one worker per node, so the fourth stays Pending
    job pend 4 2 4 100000 >"$T/pend.yaml"
    sed -i "s|^          - name: elasticjob-worker|          - name: elasticjob-worker\n            resources: {requests: {cpu: \"3\"}}|" "$T/pend.yaml"
    kc apply -f "$T/pend.yaml"
    wait_until "[[ \$(kj pend {.status.replicas}) == 3 ]]" 30
    [[ $(pod_phase pend-worker-3) == Pending ]]
    wait_until "formed pend-worker-0 3 && trains pend 3" 60
    [[ $(state pend) == Running ]]
    # the two nodes without etcd lost: their pods come back Pending, and 1 of
    # minReplicas 2 can run
    enode=$(kc -n $NS get pod etcd -o jsonpath={.spec.nodeName})
    for n in $(kc get nodes -o name | sed s,node/,,); do
        [[ $n == "$enode" ]] || { ksim node kill $n >/dev/null; echo $n >>"$T/killed"; }
    done
    wait_until "[[ \$(state pend) == Failed ]]" 60
    for n in $(cat "$T/killed"); do ksim node restore $n >/dev/null; done
    kj pend "{.status.conditions[?(@.type==\"Failed\")].message}" | tee "$T/pend.msg"
    grep -q "of minReplicas 2 Worker replicas can run" "$T/pend.msg"
    grep -q "cannot be scheduled: 0/3 nodes are available" "$T/pend.msg"
    [[ $(kj pend "{.status.conditions[?(@.type==\"Failed\")].reason}") == BelowMinReplicas ]]
    kc -n $NS delete elasticjob pend
    wait_until "gone pend" 30
'

test_expect_success 'two controllers at once: one acts; SIGKILLed, the other takes over; restarted, no duplicate pods' '
    ctl ctl-b
    wait_until "grep -q \"controller ctl-b\" $T/ctl-ctl-b.log" 10
    job ha 2 1 3 100000 | kc apply -f -
    wait_until "[[ \$(kc -n $NS get pods -l job-name=ha --field-selector=status.phase=Running -o name | wc -l) == 2 ]]" 30
    refute grep -q "leading as" "$T/ctl-ctl-b.log"
    refute grep -q "elastic-job/ha" "$T/ctl-ctl-b.log"
    u0=$(pod_uid ha-worker-0); u1=$(pod_uid ha-worker-1)
    kill -KILL "$(ctlpid ctl-a)"
    wait_until "grep -q \"leading as \\\"ctl-b\\\"\" $T/ctl-ctl-b.log" 20
    kc -n $NS scale elasticjob/ha --replicas=3
    wait_until "[[ \$(pod_phase ha-worker-2) == Running ]]" 30
    grep -q "created pod ha-worker-2" "$T/ctl-ctl-b.log"
    # the same pods (no duplicates, no re-creation by the new leader)
    [[ $(pod_uid ha-worker-0) == "$u0" && $(pod_uid ha-worker-1) == "$u1" ]]
    [[ $(npods ha) == 3 ]]
    # the leader SIGKILLed and restarted under its identity: picks up at once
    kill -KILL "$(ctlpid ctl-b)"
    ctl ctl-b
    wait_until "[[ \$(grep -c \"leading as \\\"ctl-b\\\"\" $T/ctl-ctl-b.log) == 2 ]]" 20
    kc -n $NS scale elasticjob/ha --replicas=2
    wait_until "[[ -z \$(pod_uid ha-worker-2) ]]" 30
    [[ $(pod_uid ha-worker-0) == "$u0" && $(pod_uid ha-worker-1) == "$u1" && $(npods ha) == 2 ]]
    [[ $(kc -n $NS get events --field-selector involvedObject.name=ha,reason=SuccessfulCreatePod -o name | wc -l) == 3 ]]
    kc -n $NS delete elasticjob ha
    wait_until "gone ha" 30
'

test_expect_success 'a watch resumed after the history is gone gets 410 and re-lists' '
    # The controller asks for bookmarks (the current resourceVersion every
    # second), so it resumes from an expired version only when something
    # was written after its last bookmark: write, compact at once, and give
    # it a watch period (--watch-timeout 3) to resume; up to 5 tries.
    for i in 1 2 3 4 5; do
        kc -n $NS create configmap w410-$i >/dev/null
        ksim compact >/dev/null
        end=$((SECONDS + 5))
        until grep -q ": listing again" "$T/ctl-ctl-b.log" || ((SECONDS >= end)); do sleep 0.05; done
        grep -q ": listing again" "$T/ctl-ctl-b.log" && break
    done
    grep ": listing again" "$T/ctl-ctl-b.log"
    job w410 1 1 1 1 | kc apply -f -
    wait_until "[[ \$(state w410) == Succeeded ]]" 90
    kc -n $NS delete elasticjob w410
    wait_until "gone w410" 30
'

test_expect_success 'SIGTERM: the controller stops at once and hands the lease over' '
    pid=$(ctlpid ctl-b)
    kill -TERM $pid
    wait_until "[[ ! -e /proc/$pid ]]" 5
    grep -q "released" "$T/ctl-ctl-b.log"
    [[ -z $(kc -n $NS get lease elastic-job-controller -o jsonpath={.spec.holderIdentity}) ]]
'

test_expect_success 'the shipped Deployment (in-cluster config, 2 replicas) runs a job' '
    kc apply -f "$DEPLOY/controller.yaml"
    wait_until "kc -n $NS get lease elastic-job-controller -o jsonpath={.spec.holderIdentity} | contains ^elastic-job-controller-" 60
    job dep 1 1 1 1 | kc apply -f -
    wait_until "[[ \$(state dep) == Succeeded ]]" 90
    leader=$(kc -n $NS get lease elastic-job-controller -o jsonpath={.spec.holderIdentity})
    kc -n $NS logs $leader | grep "API server https://10.77.0.254:443" >/dev/null
    kc -n $NS logs $leader | grep "elastic-job/dep: created pod dep-worker-0" >/dev/null
    kc -n $NS delete elasticjob dep
    wait_until "gone dep" 30
'

submit_cases
test_done
