#!/usr/bin/env bash
# Start a single-member etcd (3.4, Debian's etcd-server) for tests; print its client endpoint.
#
#   ep=$(bash etcd-start.sh)          # http://127.0.0.1:23790
#   ep=$(bash etcd-start.sh 24000)    # another instance on client port 24000
#
# Environment (all optional):
#   ETCD_PORT       client port (default 23790; the first argument wins)
#   ETCD_PEER_PORT  peer port (default client port + 10000)
#   ETCD_HOST       listen address (default 127.0.0.1). Anything else must be an address
#                   configured inside ETCD_NETNS (e.g. 10.77.0.254 in elhub, see netns-up.sh)
#   ETCD_NETNS      network namespace to run etcd in (default: none)
#   ETCD_BASE       parent of the instance dir (default ${TMPDIR:-/tmp}/elastic-etcd)
#   ETCD_ARGS       extra etcd flags, e.g. "--enable-v2" or "--heartbeat-interval 50 --election-timeout 500"
#   ETCD_KEEP_DATA  1 = reuse an existing data dir instead of starting empty
#   ETCD_START_TIMEOUT seconds to wait for /health (default 20)
#   ETCD_SCHEME     http (default) or https: clients connect with TLS; pass the
#                   certificate flags in ETCD_ARGS (--cert-file --key-file
#                   [--trusted-ca-file --client-cert-auth])
#   ETCD_HEALTH_CURL_ARGS  extra curl flags for the /health check over https
#                   (e.g. "--cacert ca.pem --cert client.pem --key client.key")
# Idempotent: if the instance already runs and is healthy, it just prints the endpoint.
# Stop with etcd-stop.sh [PORT].
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

port=${1:-${ETCD_PORT:-23790}}
peer=${ETCD_PEER_PORT:-$((port + 10000))}
host=${ETCD_HOST:-127.0.0.1}
ns=${ETCD_NETNS:-}
base=${ETCD_BASE:-${TMPDIR:-/tmp}/elastic-etcd}
dir=$base/single-$port
scheme=${ETCD_SCHEME:-http}
[[ $scheme == http || $scheme == https ]] || die "ETCD_SCHEME must be http or https"
ep=$scheme://$host:$port
timeout_s=${ETCD_START_TIMEOUT:-20}

command -v etcd >/dev/null || die "etcd not installed: apt-get install -y etcd-server etcd-client"
[[ $port =~ ^[0-9]+$ && $peer =~ ^[0-9]+$ ]] || die "bad port"
check_addr_allowed "$host" "$ns"

# shellcheck disable=SC2086
healthy() { in_ns "$ns" curl -fsS -m 1 ${ETCD_HEALTH_CURL_ARGS:-} "$ep/health" | grep -q '"health":"true"'; }

match="--data-dir $dir/data"
if [[ -f $dir/etcd.pid ]] && pid_alive "$(cat "$dir/etcd.pid")" "$match"; then
  if wait_until "$timeout_s" healthy; then
    log "already running (pid $(cat "$dir/etcd.pid"))"; echo "$ep"; exit 0
  fi
  die "etcd pid $(cat "$dir/etcd.pid") runs but is not healthy; see $dir/etcd.log"
fi
port_in_use "$port" "$ns" && die "port $port is already in use (not by our etcd)"
port_in_use "$peer" "$ns" && die "peer port $peer is already in use"

mkdir -p "$dir"
[[ ${ETCD_KEEP_DATA:-0} == 1 ]] || rm -rf "$dir/data"
t0=$(now_s)
rm -f "$dir/etcd.pid"
# shellcheck disable=SC2086
spawn_daemon "$dir/etcd.pid" "$dir/etcd.log" "$ns" etcd \
  --name "s$port" --data-dir "$dir/data" \
  --listen-client-urls "$ep" --advertise-client-urls "$ep" \
  --listen-peer-urls "http://$host:$peer" --initial-advertise-peer-urls "http://$host:$peer" \
  --initial-cluster "s$port=http://$host:$peer" --initial-cluster-token "single-$port" \
  --initial-cluster-state new \
  --logger zap --log-outputs stderr \
  ${ETCD_ARGS:-}
if ! wait_until "$timeout_s" healthy; then
  tail -n 20 "$dir/etcd.log" >&2 || true
  die "etcd did not become healthy within ${timeout_s}s"
fi
log "etcd $ep healthy after $(elapsed "$t0")s (pid $(cat "$dir/etcd.pid"), dir $dir)"
echo "$ep"
