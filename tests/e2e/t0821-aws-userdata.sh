#!/usr/bin/env bash
# The user data of `elrun aws template` run on network-namespace hosts as if
# they were EC2 instances: one etcd instance (elh1), three spot workers
# (elh2-4) and a fourth that the Auto Scaling group adds later (elh5), a
# shared directory in place of EFS.  The C example trains, survives a spot
# reclaim (EC2's interruption notice in the instance metadata, then the
# instance's shutdown: SIGTERM) and a scale-up, and finishes with the
# accuracy of an undisturbed run.
#
# What runs is the template's own user data (tests/aws/instance/user_data.py
# takes the Fn::Sub text out of the template and does CloudFormation's
# substitution), with ONE change to the text: the metadata service's address
# 169.254.169.254 becomes 127.0.0.1, where each simulated instance has its
# own fake of the metadata service (imds.py, IMDSv2 tokens) on its own
# network namespace's loopback.  What cannot run here is a shim, kept
# minimal (tests/aws/instance/, each file says what it does and does not):
#  - init.sh: PID 1 of the instance (own pid, mount, UTS namespaces in the
#    host's netns), the instance's own /usr/local/bin, /etc/default,
#    /etc/systemd/system, /var/log, /var/lib/etcd, /mnt; SIGTERM = shutdown;
#  - apt-get: installs nothing (no downloads), checks the package names;
#  - mount: `mount /mnt/efs` from the EFS fstab line = a bind of $T/efs;
#  - systemctl: runs the units (the user data's, Debian's etcd.service);
#  - aws: the real aws CLI with --endpoint-url to tests/e2e/py/aws_fake.py
#    in the hub, which STANDS IN FOR EC2 (DescribeInstances from the test's
#    list of instances, as the Auto Scaling groups would have them);
#  - the elrun binary is downloaded over HTTPS from the hub (a test CA,
#    CURL_CA_BUNDLE), as the user data does from --elrun-url.
# No cfn-signal: the template uses none.
. "$(dirname "$0")/lib.sh"
INFRA="$ROOT/tests/infra"
INST="$ROOT/tests/aws/instance"
TRAIN="$ROOT/$BUILD/examples/train_fmnist"
DATA=/usr/share/datasets/fashion-mnist
for b in ip unshare nsenter etcd openssl curl /usr/bin/aws /usr/bin/python3; do
    command -v $b >/dev/null || { test_skip 'the user data on simulated instances' "needs $b"; test_done; exit; }
done
if [[ $EUID -ne 0 || ! -x $TRAIN || ! -f $DATA/train-images-idx3-ubyte.gz ]]; then
    test_skip 'the user data on simulated instances' "needs root, $TRAIN and dataset-fashion-mnist"
    test_done; exit
fi
# T0821_KEEP=DIR keeps a copy of the instances' files (logs, state) there.
trap '[[ -n ${T0821_KEEP:-} ]] && cp -a "$T" "$T0821_KEEP" 2>/dev/null
      _cleanup; bash "$INFRA/netns-down.sh" >/dev/null 2>&1' EXIT
netns_hosts 5
hub() { ip netns exec elhub "$@"; }
FLEET=t0821
# 31400 steps, 20-40 s on three ranks here: the reclaim and the scale-up
# take 6-20 s of it (a case fails if the job ended before its fault).
ARGS="--epochs 200 --subset 20000 --hidden 64 --threads 1 --ckpt-every 500"

# EC2's stand-in and the download site, in the hub (10.77.0.254).
mkdir -p "$T/ec2" "$T/dl" "$T/efs"
: >"$T/ec2/instances"
AWS_FAKE_ADDR=10.77.0.254 hub /usr/bin/python3 "$ROOT/tests/e2e/py/aws_fake.py" "$T/ec2" 9>&- &
HUB_PIDS=$!
track_pid $!
test_pki "$T/pki" 10.77.0.254 elhub
cp "$ELRUN" "$T/dl/elrun"
hub /usr/bin/python3 "$INST/https_files.py" "$T/dl" 10.77.0.254 "$T/pki/server.pem" "$T/pki/server.key" 9>&- &
HUB_PIDS="$HUB_PIDS $!"
track_pid $!
wait_for_file "$T/ec2/port"
wait_for_file "$T/https.port"
EC2="http://10.77.0.254:$(cat "$T/ec2/port")"
URL="https://10.77.0.254:$(cat "$T/https.port")/elrun"
cd "$T" || exit 1
# EFS holds the program (docs/AWS.md: paths are relative to EFS's root).
cp "$TRAIN" "$T/efs/train_fmnist"

"$ELRUN" aws template --name $FLEET -j 2:4x1 --desired 3 --etcd 1 --spot --elrun-url "$URL" \
    -o "$T/tpl.json" --max-restarts 3 \
    --rdzv-conf last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=3 \
    --no-python ./train_fmnist $ARGS --ckpt-dir /mnt/efs/$FLEET/ckpt
for r in etcd worker; do
    L=Etcd; [[ $r == worker ]] && L=Worker
    /usr/bin/python3 "$INST/user_data.py" "$T/tpl.json" ${L}LaunchTemplate FileSystemId=fs-0123456789abcdef0 \
        >"$T/$r.template.sh" || exit 1
    # the shim's one change to the text: the metadata address
    sed 's/169\.254\.169\.254/127.0.0.1/g' "$T/$r.template.sh" >"$T/$r.sh"
done

# instance I ROLE: the Auto Scaling group of ROLE launches an instance on
# host elhI: EC2 lists it (running, with the group's tags), and it boots
# with ROLE's user data.  Its files are $T/iI (root/ = its disk).
instance() {
    local i=$1 role=$2 d=$T/i$1
    mkdir -p "$d"
    echo "i-$i 10.77.0.$i running elrun:fleet=$FLEET,elrun:role=$role,Name=$FLEET-$role" >>"$T/ec2/instances"
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ELRUN_INSTANCE_EFS="$T/efs" \
        ELRUN_INSTANCE_AWS_ENDPOINT="$EC2" CURL_CA_BUNDLE="$T/pki/ca.pem" \
        bash "$INFRA/netns-run.sh" "$i" unshare --mount --pid --kill-child --mount-proc \
        --propagation private bash "$INST/init.sh" "$d" "10.77.0.$i" "$T/$role.sh" \
        >"$d/init.log" 2>&1 9>&- &
    echo $! >"$d/unshare.pid"
    track_pid $!
}
# booted I: instance I's user data ran to its end with status 0.
booted() {
    wait_until "[[ -s $T/i$1/userdata.status ]]" 120
    [[ $(cat "$T/i$1/userdata.status") == 0 ]] ||
        { echo "user data of instance $1 failed:"; tail -n 20 "$T/i$1/root/var/log/cloud-init-output.log"; return 1; }
}
wlog() { echo "$T/i$1/root/var/log/elrun-worker.log"; }
# in_logs REGEX: a line of some worker instance's agent log matches.
in_logs() { grep -Eqh -- "$1" "$T"/i[2-9]/root/var/log/elrun-worker.log 2>/dev/null; }
# gone I: instance I's processes have all ended.
gone() { ! kill -0 "$(cat "$T/i$1/unshare.pid")" 2>/dev/null; }
# etcd_health: the etcd instance answers /health, from the hub.
etcd_health() { hub curl -fsS -m 2 http://10.77.0.1:2379/health 2>/dev/null | contains '"health":"true"'; }

test_expect_success 'the user data is the template'"'"'s, changed only in the metadata address; it names the notice hook' '
    diff "$T/worker.template.sh" "$T/worker.sh" >d.out || true
    test "$(grep -c "^<" d.out)" = "$(grep -c 169.254.169.254 "$T/worker.template.sh")"
    test "$(grep "^<" d.out | grep -vc 169.254.169.254)" = 0
    grep -q -- "--preempt-notice-cmd /usr/local/bin/elrun-spot-notice" "$T/worker.template.sh"
    grep -q "http://169.254.169.254/latest/meta-data/spot/instance-action" "$T/worker.template.sh"
    # elrun'"'"'s own libraries are among the packages the worker installs
    pk=$(grep -o "apt-get install -y -qq .*>" "$T/worker.sh")
    for lib in $(ldd "$ELRUN" | awk "/=> \\//{print \$3}"); do
        # (merged /usr: dpkg knows some by one path, some by the other)
        p=$({ dpkg -S "$(readlink -f "$lib")" || dpkg -S "$lib"; } 2>/dev/null | head -1 | cut -d: -f1)
        [[ -n $p ]] || { echo "no package has $lib"; false; }
        [[ $p == libc6 ]] || [[ " $pk " == *" $p "* ]] || { echo "$lib ($p) is not installed by the user data"; false; }
    done
'

instance 1 etcd
test_expect_success 'the etcd instance boots from its user data: Debian'"'"'s etcd unit, the member named after its address' '
    booted 1
    wait_until etcd_health 30
    grep -qx "ETCD_NAME=e10-77-0-1" "$T/i1/root/etc/default/etcd"
    grep -qx "ETCD_INITIAL_CLUSTER=e10-77-0-1=http://10.77.0.1:2380" "$T/i1/root/etc/default/etcd"
    grep -q "etcd-server" "$T/i1/state/apt-get.installed"
    # IMDSv2: a token first, then the address with it
    grep -q "^PUT /latest/api/token 200" "$T/i1/imds.log"
    grep -q "^GET /latest/meta-data/local-ipv4 200" "$T/i1/imds.log"
    grep -q "\"Action\": \"DescribeInstances\"" "$T/ec2/requests.jsonl"
    test -d "$T/i1/root/var/lib/etcd/elrun/member"
'

for i in 2 3 4; do instance $i worker; done
test_expect_success 'three spot workers boot from theirs: EFS (the shared dir), elrun over HTTPS, etcd from describe-instances; the job trains on 3 nodes' '
    for i in 2 3 4; do booted $i; done
    for i in 2 3 4; do
        grep -q "^ExecStart=/usr/local/bin/elrun --nnodes=2:4 --nproc-per-node=1 --rdzv-backend=etcd --rdzv-endpoint=10.77.0.1:2379 --rdzv-id=$FLEET " "$T/i$i/root/etc/systemd/system/elrun-worker.service"
        cmp "$ELRUN" "$T/i$i/root/usr/local/bin/elrun"
    done
    wait_until "in_logs \"round [0-9]+: 3 nodes\"" 120
    wait_until "in_logs \"^epoch 2/200\"" 120
    test -d "$T/efs/$FLEET/ckpt"
    # the notice hook polls the metadata with a token; no notice yet
    wait_until "grep -q \"^GET /latest/meta-data/spot/instance-action 404\" \"$T/i4/imds.log\"" 10
    refute grep -q "/spot/instance-action 401" "$T/i4/imds.log"
    refute in_logs "preemption notice"
'

test_expect_success 'spot reclaim of instance 4: on the notice the workers checkpoint at once; at the shutdown (SIGTERM) the agent leaves (75) and the job goes on with 2' '
    echo "{\"action\": \"terminate\", \"time\": \"$(date -u -d "2 min" +%FT%TZ)\"}" >"$T/i4/spot-instance-action"
    wait_until "grep -q \"preemption notice (--preempt-notice-cmd exited 0): this node leaves the job in 110 s\" \"$(wlog 4)\"" 20
    wait_until "in_logs \"a node got a preemption notice: checkpointing step [0-9]+ now\"" 30
    s=$(cat "$T"/i[234]/root/var/log/elrun-worker.log | sed -n "s/.*a node got a preemption notice: checkpointing step \([0-9]*\) now.*/\1/p" | head -1)
    echo "checkpointed step $s on the notice"
    # the instance shuts down: its init stops elrun-worker (SIGTERM)
    kill -TERM "$(pgrep -P "$(cat "$T/i4/unshare.pid")")"
    wait_until "[[ -s $T/i4/poweroff ]]" 130
    test "$(cat "$T/i4/state/elrun-worker.service.status")" = 75
    grep -q "preempted: left the job after a preemption notice" "$(wlog 4)"
    sed -i "s/^i-4 \(.*\) running /i-4 \1 terminated /" "$T/ec2/instances"
    wait_until "gone 4" 20
    wait_until "grep -Eq \"round [0-9]+: 2 nodes\" \"$(wlog 2)\"" 60
    wait_until "grep -q \"resumed from checkpoint step\" \"$(wlog 2)\" \"$(wlog 3)\"" 60
    r=$(cat "$(wlog 2)" "$(wlog 3)" | sed -n "s/.*resumed from checkpoint step \([0-9]*\) .*/\1/p" | tail -1)
    echo "resumed from step $r"
    ((r >= s))
    refute in_logs "^final: "
'

instance 5 worker
test_expect_success 'scale-up: a new instance boots (host 5) and the job grows back to 3 nodes' '
    booted 5
    wait_until "grep -Eq \"round [0-9]+: 3 nodes \\(joined: elh5\" \"$(wlog 2)\"" 120
    refute in_logs "^final: "
'

test_expect_success 'the job finishes, with the accuracy of an undisturbed run' '
    for i in 2 3 5; do
        wait_until "[[ -s $T/i$i/state/elrun-worker.service.status ]]" 400
        test "$(cat "$T/i$i/state/elrun-worker.service.status")" = 0
    done
    f=$(cat "$T"/i[235]/root/var/log/elrun-worker.log | grep "^final: " | tail -1)
    echo "fleet:      $f"
    ELRUN_STANDALONE=1 "$TRAIN" $ARGS >ref.out 2>ref.err
    g=$(grep "^final: " ref.out)
    echo "undisturbed: $g"
    steps() { sed -n "s/.*(\([0-9]*\) steps).*/\1/p" <<<"$1"; }
    acc() { sed -n "s/^final: test accuracy \([0-9.]*\)%.*/\1/p" <<<"$1"; }
    test "$(steps "$f")" = "$(steps "$g")"
    [[ $f == *"world 3" ]]
    awk -v a="$(acc "$f")" -v b="$(acc "$g")" "BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != \"\" && b != \"\" && d <= 1.0) }"
'

test_expect_success 'every instance is stopped by its shutdown; nothing of them is left' '
    for i in 1 2 3 5; do kill -TERM "$(pgrep -P "$(cat "$T/i$i/unshare.pid")")"; done
    for i in 1 2 3 5; do wait_until "gone $i" 30; done
    for h in elh1 elh2 elh3 elh4 elh5; do test -z "$(ip netns pids $h)"; done
'
# shellcheck disable=SC2086
kill -TERM $HUB_PIDS 2>/dev/null
wait $HUB_PIDS 2>/dev/null
test_done
