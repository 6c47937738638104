#!/usr/bin/env bash
# ElasticJob controller figures (issue 15) on the Kubernetes simulator
# (tests/infra/k8s; pods are real processes in their own network
# namespaces), controller `elrun k8s-controller` as a plain process:
#   1. kubectl apply of an ElasticJob (N workers, min=max=N) -> every worker
#      pod Running, and -> every agent in the round of N and rank 0 of the C
#      example training; the anchor is the simulator's own time: N bare pods
#      (kubectl apply of N busybox pods) -> all Running;
#   2. a worker pod SIGKILLed (ksim pod kill) -> its replacement Running and
#      the job re-formed (the new pod's agent is in a round of N);
#   3. kubectl scale N -> N+1 (min 1, max N+1): the new pod Running, and
#      every agent in the round of N+1 with rank 0 training at N+1; then
#      N+1 -> N: the survivors re-formed at N;
#   4. the controller's RSS and CPU with JOBS jobs of one pod each (an image
#      that never pulls, so no process runs): idle before, after all are
#      reconciled, and CPU seconds over an idle minute.
# Prints medians over REPS runs.  Needs root (netns) and kubectl 1.20
# (tests/infra/k8s/install-deps.sh).  Takes the netns lock as the e2e tests
# do.  About 4 minutes with the defaults.
#   bench/k8s.sh
#   REPS=3 N=4 JOBS=50 bench/k8s.sh
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROOT=$PWD
ELRUN=$ROOT/$BUILD/elrun
TRAIN=$ROOT/$BUILD/examples/train_fmnist
KS=$ROOT/tests/infra/k8s
REPS=${REPS:-5}
N=${N:-2}
JOBS=${JOBS:-100}
IDLE_S=${IDLE_S:-60}
NS=bench
[[ $(id -u) == 0 ]] || { echo "bench/k8s.sh: needs root"; exit 1; }
KUBECTL=$(bash "$KS/install-deps.sh" 2>/dev/null) || { echo "bench/k8s.sh: no kubectl 1.20"; exit 1; }
D=$(mktemp -d /tmp/elrun-bench-k8s.XXXXXX)
export KSIM_BASE=$D/ksim
CTL=
exec 9>/run/lock/elrun-netns.lock
flock -w 600 9 || { echo "bench/k8s.sh: netns lock held for 10 min"; exit 1; }
trap '[[ -n $CTL ]] && kill -KILL $CTL 2>/dev/null; bash "$KS/k8s-stop.sh" >/dev/null 2>&1
      bash tests/infra/netns-down.sh >/dev/null 2>&1; rm -rf "$D"' EXIT
bash tests/infra/netns-down.sh >/dev/null 2>&1
bash tests/infra/netns-up.sh 3 >/dev/null 2>&1
echo "{\"elrun/*\": {\"entrypoint\": [\"$ELRUN\"]}}" >"$D/images.json"
KSIM_IMAGES="$D/images.json:$KS/images.json" bash "$KS/k8s-start.sh" >/dev/null 2>"$D/start.log" 9>&- ||
    { cat "$D/start.log"; exit 1; }
export KUBECONFIG=$KSIM_BASE/kubeconfig
kc() { "$KUBECTL" --cache-dir "$D/kcache" "$@"; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f\n", (b - a) * 1000}'; }

# wait_pods SEL N: until N pods of selector SEL are Running (polls the API)
TOKEN=$(cat "$KSIM_BASE/admin.token")
api() { curl -fsS --cacert "$KSIM_BASE/pki/ca.crt" -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:6443$1"; }
running() { api "/api/v1/namespaces/$NS/pods?labelSelector=$1&fieldSelector=status.phase%3DRunning" | grep -o '"phase":"Running"' | wc -l; }
wait_running() { local d=$((SECONDS + 120)); until (($(running "$1") >= $2)); do ((SECONDS < d)) || return 1; sleep 0.01; done; }
# wait_log POD REGEX: until the pod's current container log matches
logfile() { ls "$KSIM_BASE"/pods/"${NS}_$1"_*/logs/elasticjob-worker/0.log 2>/dev/null | tail -1; }
wait_log() {
    local d=$((SECONDS + 120)) f
    until f=$(logfile "$1") && [[ -n $f ]] && grep -qE "$2" "$f"; do ((SECONDS < d)) || return 1; sleep 0.01; done
}

# wait_logs JOB REGEX: until the log of one of the job's pods matches
wait_logs() {
    local d=$((SECONDS + 120))
    until grep -qE "$2" "$KSIM_BASE"/pods/"${NS}_$1"-worker-*/logs/elasticjob-worker/0.log 2>/dev/null; do
        ((SECONDS < d)) || return 1; sleep 0.01
    done
}

kc apply -f deploy/kubernetes/crd.yaml >/dev/null
kc create namespace $NS >/dev/null
kc -n $NS apply -f deploy/kubernetes/etcd.yaml >/dev/null
until [[ -n $(kc -n $NS get endpoints etcd-service -o jsonpath='{.subsets[0].addresses[0].ip}' 2>/dev/null) ]]; do sleep 0.1; done
"$ELRUN" k8s-controller --namespace $NS >"$D/ctl.log" 2>&1 9>&- &
CTL=$!

job() { # NAME N EPOCHS [IMAGE]
    cat <<EOF
apiVersion: elastic.pytorch.org/v1alpha1
kind: ElasticJob
metadata: {name: $1, namespace: $NS}
spec:
  rdzvEndpoint: "etcd-service:2379"
  replicaSpecs:
    Worker:
      replicas: $2
      template:
        spec:
          terminationGracePeriodSeconds: 5
          containers:
          - name: elasticjob-worker
            image: ${4:-elrun/elrun:0.1.0}
            args: ["--nproc_per_node=1", "--no-python", "$TRAIN", "--epochs", "$3",
                   "--subset", "3000", "--threads", "1", "--ckpt-dir", "$D/ckpt-$1", "--ckpt-every", "20"]
EOF
}

echo "1. kubectl apply -> $N workers Running / training (medians of $REPS; anchor: $N bare pods Running)"
: >"$D/run" ; : >"$D/train" ; : >"$D/bare"
for r in $(seq "$REPS"); do
    job a$r "$N" 100000 >"$D/a.yaml"
    t0=$(now); kc apply -f "$D/a.yaml" >/dev/null
    wait_running "job-name%3Da$r" "$N" || { echo "  run $r: not running"; continue; }
    t1=$(now)
    for i in $(seq 0 $((N - 1))); do wait_log "a$r-worker-$i" "round [0-9]+: $N nodes" || echo "  run $r: worker $i not in the round"; done
    wait_logs "a$r" "rank 0 of $N " || echo "  run $r: rank 0 not training"
    t2=$(now)
    ms "$t0" "$t1" >>"$D/run"; ms "$t0" "$t2" >>"$D/train"
    kc -n $NS delete elasticjob a$r --wait=true >/dev/null
    : >"$D/bare.yaml"
    for i in $(seq 0 $((N - 1))); do
        printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: b%s-%s, namespace: %s, labels: {bare: b%s}}\nspec: {terminationGracePeriodSeconds: 1, containers: [{name: c, image: busybox, command: [sleep, "3600"]}]}\n---\n' \
            "$r" "$i" "$NS" "$r" >>"$D/bare.yaml"
    done
    t0=$(now); kc apply -f "$D/bare.yaml" >/dev/null
    wait_running "bare%3Db$r" "$N"; t1=$(now)
    ms "$t0" "$t1" >>"$D/bare"
    kc -n $NS delete pod -l bare=b$r --wait=true >/dev/null
done
printf '  apply -> all Running   %6s ms   (bare pods: %s ms, the simulator and kubectl)\n' "$(median <"$D/run")" "$(median <"$D/bare")"
printf '  apply -> training      %6s ms   (+ agents: etcd rendezvous, worker start, data load)\n' "$(median <"$D/train")"

echo "2. pod SIGKILLed -> replacement Running / job re-formed ($N workers, medians of $REPS)"
job k "$N" 100000 | kc apply -f - >/dev/null
wait_running "job-name%3Dk" "$N"
for i in $(seq 0 $((N - 1))); do wait_log "k-worker-$i" "round [0-9]+: $N nodes"; done
: >"$D/rep"; : >"$D/ref"
v=k-worker-$((N - 1))
for r in $(seq "$REPS"); do
    old=$(kc -n $NS get pod $v -o jsonpath='{.metadata.uid}')
    t0=$(now); bash "$KS/ksim" pod kill $NS/$v >/dev/null
    d=$((SECONDS + 60))
    until u=$(kc -n $NS get pod $v -o jsonpath='{.metadata.uid} {.status.phase}' 2>/dev/null) &&
        [[ $u == *Running && ${u% *} != "$old" ]]; do ((SECONDS < d)) || break; sleep 0.01; done
    t1=$(now)
    wait_log "$v" "round [0-9]+: $N nodes" || echo "  run $r: not re-formed"
    t2=$(now)
    ms "$t0" "$t1" >>"$D/rep"; ms "$t0" "$t2" >>"$D/ref"
done
printf '  kill -> replacement Running  %6s ms  (delete seen, pod deleted, created, started)\n' "$(median <"$D/rep")"
printf '  kill -> job re-formed        %6s ms  (+ the new agent joins, every worker restarts)\n' "$(median <"$D/ref")"
kc -n $NS delete elasticjob k --wait=true >/dev/null

M=$((N + 1))
echo "3. kubectl scale $N -> $M -> $N while training (medians of $REPS)"
job g "$N" 100000 | sed "s/^  replicaSpecs:/  minReplicas: 1\n  maxReplicas: $M\n  replicaSpecs:/" | kc apply -f - >/dev/null
wait_running "job-name%3Dg" "$N"
for i in $(seq 0 $((N - 1))); do wait_log "g-worker-$i" "round [0-9]+: $N nodes"; done
: >"$D/up"; : >"$D/grown"; : >"$D/down"
# rounds POD M: how many times the pod's agent logged a round of M nodes
rounds() { local f; f=$(logfile "$1"); [[ -n $f ]] || { echo 0; return; }; grep -cE "round [0-9]+: $2 nodes" "$f" || :; }
# r0 M: how many times rank 0 of a world of M started, in the job's logs
r0() { cat "$KSIM_BASE"/pods/"${NS}"_g-worker-*/logs/elasticjob-worker/0.log 2>/dev/null | grep -c "rank 0 of $1 " || :; }
for r in $(seq "$REPS"); do
    before=$(rounds g-worker-0 "$M"); trained=$(r0 "$M")
    t0=$(now); kc -n $NS scale elasticjob/g --replicas=$M >/dev/null
    wait_running "job-name%3Dg" "$M" || { echo "  run $r: no new pod"; continue; }
    t1=$(now)
    d=$((SECONDS + 120))
    until (($(rounds g-worker-0 "$M") > before)) && wait_log "g-worker-$N" "round [0-9]+: $M nodes"; do
        ((SECONDS < d)) || { echo "  run $r: not grown"; break; }; sleep 0.01
    done
    d=$((SECONDS + 120))
    until (($(r0 "$M") > trained)); do ((SECONDS < d)) || { echo "  run $r: rank 0 not training at $M"; break; }; sleep 0.01; done
    t2=$(now)
    ms "$t0" "$t1" >>"$D/up"; ms "$t0" "$t2" >>"$D/grown"
    before=$(rounds g-worker-0 "$N")
    t0=$(now); kc -n $NS scale elasticjob/g --replicas=$N >/dev/null
    d=$((SECONDS + 120))
    until (($(rounds g-worker-0 "$N") > before)); do ((SECONDS < d)) || { echo "  run $r: not shrunk"; break; }; sleep 0.01; done
    t1=$(now)
    ms "$t0" "$t1" >>"$D/down"
    # the removed pod is gone before the next rep (it keeps its name)
    d=$((SECONDS + 60))
    while kc -n $NS get pod g-worker-$N >/dev/null 2>&1; do ((SECONDS < d)) || break; sleep 0.05; done
done
printf '  scale up -> new pod Running       %6s ms  (the controller sees the scale, creates the pod; the pod start is the simulator'"'"'s: ~ the bare pods above)\n' "$(median <"$D/up")"
printf '  scale up -> grown job training    %6s ms  (+ the new agent joins, the round of %s forms, the workers restart and load data)\n' "$(median <"$D/grown")" "$M"
printf '  scale down -> job re-formed at %s  %6s ms  (SIGTERM to the highest pod, its agent leaves, the survivors form a round of %s)\n' "$N" "$(median <"$D/down")" "$N"
kc -n $NS delete elasticjob g --wait=true >/dev/null

echo "4. controller RSS and CPU with $JOBS jobs (1 pod each, image never pulled)"
rss() { awk '/^VmRSS/ {print $2}' /proc/$CTL/status; }
cpu() { awk '{printf "%.2f\n", ($14 + $15) / 100}' /proc/$CTL/stat; }
r0=$(rss); c0=$(cpu)
for j in $(seq "$JOBS"); do job m$j 1 1 registry.invalid/none:1; echo "---"; done >"$D/many.yaml"
t0=$(now); kc apply -f "$D/many.yaml" >/dev/null
d=$((SECONDS + 300))
until (($(api "/api/v1/namespaces/$NS/pods?labelSelector=group-name%3Delastic.pytorch.org" | grep -o '"replica-index":"0"' | wc -l) >= JOBS)) &&
    (($(grep -c 'm[0-9]*: created pod' "$D/ctl.log") >= JOBS)); do ((SECONDS < d)) || break; sleep 0.1; done
t1=$(now); r1=$(rss); c1=$(cpu)
sleep "$IDLE_S"
r2=$(rss); c2=$(cpu)
printf '  RSS: %s kB idle with no job, %s kB with %s jobs reconciled, %s kB after %s s idle\n' "$r0" "$r1" "$JOBS" "$r2" "$IDLE_S"
printf '  apply of %s jobs -> every pod created: %s ms, controller CPU %s s\n' "$JOBS" "$(ms "$t0" "$t1")" \
    "$(awk -v a="$c0" -v b="$c1" 'BEGIN {printf "%.2f", b - a}')"
printf '  CPU over %s s idle with %s jobs: %s s (resync every 30 s, watch bookmarks)\n' "$IDLE_S" "$JOBS" \
    "$(awk -v a="$c1" -v b="$c2" 'BEGIN {printf "%.2f", b - a}')"
