#!/usr/bin/env bash
# Install the Debian packages elrun needs to build, test and run its demo.
# Idempotent and quiet when everything is present; needs root (or sudo) only
# when something is missing.  ELRUN_SKIP_DEPS=1 skips the check entirely.
set -euo pipefail
[[ ${ELRUN_SKIP_DEPS:-0} == 1 ]] && exit 0

pkgs=(
  gcc make pkg-config          # toolchain
  libuv1-dev libjansson-dev    # store event loop, JSON (error files, rendezvous state)
  libcurl4-openssl-dev         # etcd v3 gateway (HTTP): headers; libcurl.so.4 is dlopen()ed by etcd jobs only
  nettle-dev                   # HMAC-SHA256 of the store's job-secret challenge
  etcd-server etcd-client      # a real etcd for the etcd tests
  openssl                      # test CA for etcd over TLS
  libopenblas-dev zlib1g-dev   # the training example: matrix products, gzip'd IDX files
  dataset-fashion-mnist        # the example's data set
  python3-torch                # the real PyTorch client and torchrun anchor in tests/benches
  procps iproute2 psmisc tmux  # ps/pgrep, ip netns, fuser; tmux for elrun status --watch (t0910)
  clang-format                 # scripts/format-check.sh
  slurmctld slurmd slurm-client munge  # a real Slurm for the job tests (t0810)
  libhttp-parser-dev prometheus # /metrics requests; promtool and a real Prometheus in tests
  awscli                       # the aws CLI elrun drives for -s aws_batch and elrun aws; t0820 (its CloudFormation validator is npm's: tests/aws)
  libyaml-dev nftables curl python3-yaml  # k8s-controller kubeconfigs (libyaml dlopen()ed); the k8s simulator (kubectl 1.20: tests/infra/k8s/install-deps.sh)
  xxd                          # the dashboard's page embedded as C arrays (scripts/embed-assets.sh)
  chromium nodejs              # the dashboard in a headless browser (t0920; playwright-core below)
)
# npm comes with nodejs where nodejs is not Debian's (NodeSource's includes
# it, and Debian's npm would conflict with it).
command -v npm >/dev/null || pkgs+=(npm)

# npm packages of the tests, pinned by each folder's package-lock.json
# (node_modules is not committed): tests/aws = the CloudFormation validator
# t0820 runs; tests/browser = playwright-core, the driver of Debian's
# chromium for the dashboard's test t0920 (it downloads no browser).  Done
# again only when a lock changed; a failure is one line and the tests that
# need the folder say so (t0820 fails, t0920 skips naming the reason).
npm_deps() {
  local root d
  root="$(cd "$(dirname "$0")/.." && pwd)"
  command -v npm >/dev/null || { echo "deps: no npm: tests/aws and tests/browser left out" >&2; return 0; }
  for d in "$root/tests/aws" "$root/tests/browser"; do
    cmp -s "$d/package-lock.json" "$d/node_modules/.elrun-installed-lock" && continue
    echo "deps: npm ci in ${d#"$root"/}"
    if (cd "$d" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null); then
      cp "$d/package-lock.json" "$d/node_modules/.elrun-installed-lock"
    else
      echo "deps: npm ci in ${d#"$root"/} failed" >&2
    fi
  done
}

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then npm_deps; exit 0; fi

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "deps: missing ${missing[*]}; run 'make deps' as root" >&2; exit 1; }
  sudo=(sudo)
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq
"${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
echo "deps: done"
