#!/usr/bin/env bash
# init.sh DIR IP USERDATA -- PID 1 of a simulated EC2 instance (t0821).
#
# Run as: netns-run.sh I unshare --mount --pid --fork --kill-child
#         --mount-proc --propagation private bash init.sh DIR IP USERDATA
# so the instance has the network of simulated host elhI, its own hostname,
# its own processes (this script is PID 1: when it ends, all of them end, as
# when an instance's power goes) and its own mounts.  Then it does what
# EC2 and cloud-init do at boot and no more:
#  - the instance's own disk: DIR/root/... is bound over each place the
#    user data writes (/usr/local/bin, /etc/systemd/system, /var/log,
#    /var/lib/etcd, /mnt: empty, as on a new image; /etc/default and
#    /etc/fstab: copies of this machine's), so nothing outside the
#    instance changes;
#  - the metadata service: imds.py on this host's own 127.0.0.1:80 (the
#    test rewrites the user data's metadata address to it);
#  - the shims of bin/ first in PATH (apt-get, systemctl, mount, aws: see
#    each), dummy AWS credentials, and the CLI's metadata look-up off;
#  - the user data runs as root with bash, its output in
#    /var/log/cloud-init-output.log, its exit status in DIR/userdata.status.
# SIGTERM is the instance's shutdown: every unit started is stopped as
# systemd does at power-off (KillSignal, TimeoutStopSec), then PID 1 ends.
set -euo pipefail
D=$1 IP=$2 UD=$3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R=$D/root
mkdir -p "$R" "$D/state"
mkdir -p "$R/etc/default"
cp -a /etc/default/. "$R/etc/default/"
for p in /usr/local/bin /etc/systemd/system /etc/default /var/log /var/lib/etcd /mnt; do
    mkdir -p "$R$p"
    /bin/mount --bind "$R$p" "$p"
done
cp /etc/fstab "$R/fstab"
/bin/mount --bind "$R/fstab" /etc/fstab

/usr/bin/python3 "$HERE/imds.py" "$D" "$IP" &
until [[ -s $D/imds.ready ]]; do
    kill -0 $! 2>/dev/null || { echo "init.sh: imds.py died" >&2; exit 1; }
    sleep 0.02
done

shutdown() {
    local u
    for u in $(cd "$D/state" && ls -- *.pid 2>/dev/null); do
        ELRUN_INSTANCE_STATE=$D/state "$HERE/bin/systemctl" stop "${u%.pid}" || true
    done
    echo "power off" >"$D/poweroff"
    exit 0
}
trap shutdown TERM

export PATH="$HERE/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export ELRUN_INSTANCE_STATE=$D/state
export AWS_ACCESS_KEY_ID=AKIDUMMY AWS_SECRET_ACCESS_KEY=dummy AWS_SESSION_TOKEN=dummy
export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_MAX_ATTEMPTS=1 AWS_PAGER= HOME=/root
st=0
bash "$UD" >>/var/log/cloud-init-output.log 2>&1 || st=$?
echo "$st" >"$D/userdata.status"
# An instance idles until it is stopped (the trap ends the wait).
while :; do
    sleep 3600 &
    wait $! || true
done
