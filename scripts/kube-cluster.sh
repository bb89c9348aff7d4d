#!/usr/bin/env bash
# A real single-node Kubernetes cluster for the tests of kubernetes_sandbox(),
# offline: etcd, containerd, runc and the CNI plugins from Debian; the
# Kubernetes server binaries and the agent-sandbox controller built from the
# Go module proxy; two images made here (no registry). Nothing outside the
# state directory is changed except a bridge (amlk0) and three kernel
# settings the kubelet writes, which "down" puts back.
#
#   scripts/kube-cluster.sh build        once per machine: binaries and images
#                                        into $AML_KUBE_DIR (about 30 minutes
#                                        on 2 cores, 450 MB)
#   scripts/kube-cluster.sh up [STATE]   start the cluster from the cache (under
#                                        a minute); prints its kubeconfig
#   scripts/kube-cluster.sh down [STATE] stop every process it started, by PID,
#                                        and remove what they left
#   scripts/kube-cluster.sh env [STATE]  print the exports the tests read
#
# The tests of providers/sandbox/kubernetes run against the cluster named by
# AML_TEST_KUBECONFIG, which "up" prints, and skip, saying so, without it.
# Needs root (containerd, the kubelet and the bridge) and Debian's apt-get.
set -euo pipefail

K8S_VERSION=${AML_KUBE_VERSION:-v1.34.4}
AGENT_SANDBOX_VERSION=${AML_AGENT_SANDBOX_VERSION:-v1.0.1}
CACHE=${AML_KUBE_DIR:-$HOME/.cache/aml-kube/$K8S_VERSION-$AGENT_SANDBOX_VERSION}
STATE_DEFAULT=${AML_KUBE_STATE:-${TMPDIR:-/tmp}/aml-kube}
NODE=amlnode
BRIDGE=amlk0
POD_CIDR=10.247.0.0/24
ETCD_PORT=${AML_KUBE_ETCD_PORT:-23890}
API_PORT=${AML_KUBE_API_PORT:-6543}
KUBELET_PORT=${AML_KUBE_KUBELET_PORT:-10350}
SERVERS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
PACKAGES=(etcd-server containerd runc containernetworking-plugins busybox-static openssl)
here=$(cd "$(dirname "$0")" && pwd)

say() { printf 'kube-cluster: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

# packages installs what Debian serves, when a command is missing.
packages() {
  local missing=()
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  [[ -x /bin/busybox ]] || missing+=(busybox-static)
  command -v openssl >/dev/null || missing+=(openssl)
  [[ ${#missing[@]} == 0 ]] && return 0
  [[ $(id -u) == 0 ]] || die "needs root to install ${missing[*]}"
  say "installing ${missing[*]} with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
}

# ---------------------------------------------------------------- build

# scratch_module writes a module that requires k8s.io/kubernetes: its
# staging modules are published as k8s.io/<name> v0.<minor>.<patch>, and its
# own go.mod names them v0.0.0 with replacements that only hold inside its
# repository, so each is required and replaced at the published version.
scratch_module() {
  local dir=$1 staging proxy
  mkdir -p "$dir"
  proxy=$(go env GOPROXY); proxy=${proxy%%,*}
  [[ $proxy == direct || $proxy == off || -z $proxy ]] && die "GOPROXY names no proxy to read k8s.io/kubernetes@$K8S_VERSION's go.mod from"
  curl -fsSL "$proxy/k8s.io/kubernetes/@v/$K8S_VERSION.mod" -o "$dir/kubernetes.mod"
  staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$dir/kubernetes.mod" | grep -v '^k8s.io/sample-')
  local v="v0.${K8S_VERSION#v1.}"
  {
    echo "module amlkubebuild"
    echo
    sed -n 's/^go /go /p' "$dir/kubernetes.mod"
    sed -n 's/^godebug /godebug /p' "$dir/kubernetes.mod"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    for m in $staging; do echo "require $m $v"; done
    for m in $staging; do echo "replace $m v0.0.0 => $m $v"; done
  } >"$dir/go.mod"
  {
    echo '//go:build tools'
    echo
    echo 'package tools'
    echo
    for s in "${SERVERS[@]}" kubectl; do echo "import _ \"k8s.io/kubernetes/cmd/$s\""; done
  } >"$dir/tools.go"
  (cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
}

# image writes an OCI image archive of one layer made from a directory.
image() { # image REF ROOTFS OUT ENTRYPOINT_JSON
  local ref=$1 rootfs=$2 out=$3 entry=$4 w
  w=$(mktemp -d)
  mkdir -p "$w/blobs/sha256"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$w/layer" .
  blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); mv "$1" "$w/blobs/sha256/$d"; echo "$d"; }
  local lsize ldig csize cdig msize mdig
  lsize=$(stat -c %s "$w/layer"); ldig=$(blob "$w/layer")
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$entry" "$ldig" >"$w/config"
  csize=$(stat -c %s "$w/config"); cdig=$(blob "$w/config")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$cdig" "$csize" "$ldig" "$lsize" >"$w/manifest"
  msize=$(stat -c %s "$w/manifest"); mdig=$(blob "$w/manifest")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$mdig" "$msize" "$ref" "${ref##*:}" >"$w/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$w/oci-layout"
  tar -C "$w" -cf "$out" oci-layout index.json blobs
  rm -rf "$w"
}

# images makes the two images the cluster needs: localhost/aml-test/busybox:1
# (a shell, /tmp and two users) and localhost/aml-test/pause:1, the pods' sandbox
# process, a Go program built here (internal/kubetest/pause).
images() {
  local out=$1 w a
  w=$(mktemp -d)
  mkdir -p "$w/rootfs/bin" "$w/rootfs/etc" "$w/rootfs/tmp" "$w/rootfs/root" "$w/rootfs/workspace" "$w/pause"
  cp /bin/busybox "$w/rootfs/bin/busybox"
  for a in $(/bin/busybox --list); do [[ -e $w/rootfs/bin/$a ]] || ln -s busybox "$w/rootfs/bin/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$w/rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$w/rootfs/etc/group"
  chmod 1777 "$w/rootfs/tmp"
  (cd "$here/.." && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$w/pause/pause" ./internal/kubetest/pause)
  image localhost/aml-test/busybox:1 "$w/rootfs" "$out/busybox.tar" '["/bin/sh"]'
  image localhost/aml-test/pause:1 "$w/pause" "$out/pause.tar" '["/pause"]'
  rm -rf "$w"
}

build() {
  packages
  mkdir -p "$CACHE/bin" "$CACHE/images"
  local ld="-s -w" minor
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  local need=()
  for s in "${SERVERS[@]}" kubectl; do [[ -x $CACHE/bin/$s ]] || need+=("$s"); done
  if [[ ${#need[@]} -gt 0 ]]; then
    grep -q kubectl "$CACHE/module/tools.go" 2>/dev/null || scratch_module "$CACHE/module"
    for s in "${need[@]}"; do
      local t0=$SECONDS
      (cd "$CACHE/module" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$CACHE/bin/$s.tmp" "k8s.io/kubernetes/cmd/$s")
      mv "$CACHE/bin/$s.tmp" "$CACHE/bin/$s"
      say "built $s $K8S_VERSION in $((SECONDS - t0)) s"
    done
  fi
  if [[ ! -x $CACHE/bin/agent-sandbox-controller ]]; then
    local t0=$SECONDS
    GOBIN="$CACHE/bin" CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller@$AGENT_SANDBOX_VERSION"
    say "built agent-sandbox-controller $AGENT_SANDBOX_VERSION in $((SECONDS - t0)) s"
  fi
  if [[ ! -f $CACHE/crds/sandboxes.yaml ]]; then
    local src
    src=$(cd "$CACHE/module" && go mod download -json "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    mkdir -p "$CACHE/crds"
    cp "$src/k8s/crds/agents.x-k8s.io_sandboxes.yaml" "$CACHE/crds/sandboxes.yaml"
    for k in sandboxclaims sandboxtemplates sandboxwarmpools; do
      cp "$src/k8s/crds/extensions.agents.x-k8s.io_$k.yaml" "$CACHE/crds/$k.yaml"
    done
    chmod u+w "$CACHE"/crds/*.yaml
  fi
  images "$CACHE/images"
  touch "$CACHE/complete"
  say "cache ready in $CACHE ($(du -sh "$CACHE/bin" | cut -f1) of binaries)"
}

# ---------------------------------------------------------------- up and down

state_dir() { local s=${1:-$STATE_DEFAULT}; mkdir -p "$s"; cd "$s" && pwd; }

# start runs a server in the background, its output in logs/, its PID in pids/.
start() { # start NAME COMMAND...
  local name=$1; shift
  nice -n 5 "$@" >"$STATE/logs/$name.log" 2>&1 &
  echo $! >"$STATE/pids/$name"
}

# until_ok retries a command once a second for N seconds.
until_ok() { # until_ok WHAT N COMMAND...
  local what=$1 n=$2 i; shift 2
  for ((i = 0; i < n; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  say "gave up waiting for $what after $n s; the logs are in $STATE/logs" >&2
  return 1
}

kubeconfig() { # kubeconfig FILE USER
  local f=$STATE/kubeconfig/$1 token
  token=$(awk -F, -v u="$2" '$2 == u { print $1 }' "$STATE/pki/tokens.csv")
  "$KUBECTL" --kubeconfig="$f" config set-cluster aml --server="https://127.0.0.1:$API_PORT" --certificate-authority="$STATE/pki/apiserver/apiserver.crt" --embed-certs >/dev/null
  "$KUBECTL" --kubeconfig="$f" config set-credentials "$2" --token="$token" >/dev/null
  "$KUBECTL" --kubeconfig="$f" config set-context aml --cluster=aml --user="$2" >/dev/null
  "$KUBECTL" --kubeconfig="$f" config use-context aml >/dev/null
}

up() {
  [[ -f $CACHE/complete ]] || die "no cluster cache in $CACHE: build it once with scripts/kube-cluster.sh build (about 30 minutes)"
  [[ $(id -u) == 0 ]] || die "needs root: containerd, the kubelet and the bridge do"
  packages
  STATE=$(state_dir "${1:-}")
  if [[ -f $STATE/pids/kube-apiserver ]] && kill -0 "$(cat "$STATE/pids/kube-apiserver")" 2>/dev/null; then
    die "a cluster already runs from $STATE: scripts/kube-cluster.sh down $STATE first"
  fi
  local port
  for port in "$ETCD_PORT" "$API_PORT" "$KUBELET_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      die "port $port is taken (another cluster of this script? scripts/kube-cluster.sh down its state directory; AML_KUBE_*_PORT choose others)"
    fi
  done
  KUBECTL=$CACHE/bin/kubectl
  local node_ip
  node_ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  [[ -n $node_ip ]] || node_ip=$(hostname -I | awk '{print $1}')
  mkdir -p "$STATE"/{logs,pids,pki/apiserver,etcd,containerd,cni/conf,cni/ipam,kubelet,kubeconfig}
  local t0=$SECONDS

  # Credentials: static bearer tokens, and the service accounts' key pair.
  [[ -f $STATE/pki/sa.key ]] || openssl genrsa -out "$STATE/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$STATE/pki/sa.key" -pubout -out "$STATE/pki/sa.pub" 2>/dev/null
  token() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
  if [[ ! -f $STATE/pki/tokens.csv ]]; then
    {
      echo "$(token),admin,admin,\"system:masters\""
      echo "$(token),system:node:$NODE,kubelet,\"system:nodes\""
      echo "$(token),system:kube-controller-manager,kcm,\"system:masters\""
      echo "$(token),system:kube-scheduler,scheduler,\"system:masters\""
    } >"$STATE/pki/tokens.csv"
  fi

  start etcd etcd --name aml --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "aml=http://127.0.0.1:$((ETCD_PORT + 1))"
  until_ok etcd 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

  start kube-apiserver "$CACHE/bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address="$node_ip" --secure-port="$API_PORT" \
    --cert-dir="$STATE/pki/apiserver" --token-auth-file="$STATE/pki/tokens.csv" \
    --authorization-mode=Node,RBAC --allow-privileged=true --service-cluster-ip-range=10.97.0.0/16 \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$STATE/pki/sa.pub" --service-account-signing-key-file="$STATE/pki/sa.key" \
    --kubelet-preferred-address-types=InternalIP --profiling=false
  until_ok "the API server's certificate" 60 test -s "$STATE/pki/apiserver/apiserver.crt"
  kubeconfig admin admin
  kubeconfig kubelet "system:node:$NODE"
  kubeconfig controller-manager system:kube-controller-manager
  kubeconfig scheduler system:kube-scheduler
  local K=("$KUBECTL" --kubeconfig="$STATE/kubeconfig/admin")
  until_ok "the API server" 120 "${K[@]}" get --raw /readyz

  start kube-controller-manager "$CACHE/bin/kube-controller-manager" --kubeconfig="$STATE/kubeconfig/controller-manager" \
    --authentication-kubeconfig="$STATE/kubeconfig/controller-manager" --authorization-kubeconfig="$STATE/kubeconfig/controller-manager" \
    --secure-port=0 --leader-elect=false --service-account-private-key-file="$STATE/pki/sa.key" \
    --root-ca-file="$STATE/pki/apiserver/apiserver.crt" --use-service-account-credentials=false
  start kube-scheduler "$CACHE/bin/kube-scheduler" --kubeconfig="$STATE/kubeconfig/scheduler" \
    --authentication-kubeconfig="$STATE/kubeconfig/scheduler" --authorization-kubeconfig="$STATE/kubeconfig/scheduler" \
    --secure-port=0 --leader-elect=false

  # A containerd of its own (socket, root and state under $STATE). Without
  # CAP_SYS_RESOURCE runc cannot lower a container's oom_score_adj, hence
  # restrict_oom_score_adj. The pods' bridge has no gateway and no
  # masquerading: pods have addresses, the host's routes stay as they are.
  local sock=$STATE/containerd/sock
  cat >"$STATE/containerd/config.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/aml-test/pause:1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$STATE/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/conf"
EOF
  cat >"$STATE/cni/conf/10-aml.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "aml", "plugins": [{"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false,
  "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "dataDir": "$STATE/cni/ipam"}}]}
EOF
  start containerd containerd --config "$STATE/containerd/config.toml"
  until_ok containerd 30 ctr -a "$sock" version
  local t
  for t in "$CACHE"/images/*.tar; do ctr -a "$sock" -n k8s.io images import "$t" >/dev/null; done

  cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $KUBELET_PORT
readOnlyPort: 0
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
maxPods: 60
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  # The kubelet sets these kernel settings for itself; down puts them back.
  local k
  for k in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops; do
    echo "$k $(cat /proc/sys/$k)"
  done >"$STATE/sysctl"
  start kubelet "$CACHE/bin/kubelet" --config="$STATE/kubelet/config.yaml" --kubeconfig="$STATE/kubeconfig/kubelet" \
    --root-dir="$STATE/kubelet/root" --cert-dir="$STATE/kubelet/pki" --hostname-override="$NODE" --node-ip="$node_ip"

  # agent-sandbox: its four resource definitions and its controller, with
  # the extensions (claims, templates, warm pools).
  "${K[@]}" apply --server-side -f "$CACHE/crds/" >/dev/null
  for k in sandboxes.agents.x-k8s.io sandboxclaims.extensions.agents.x-k8s.io sandboxtemplates.extensions.agents.x-k8s.io sandboxwarmpools.extensions.agents.x-k8s.io; do
    until_ok "the $k definition" 60 "${K[@]}" wait --for=condition=Established "crd/$k" --timeout=5s
  done
  start agent-sandbox-controller "$CACHE/bin/agent-sandbox-controller" --kubeconfig="$STATE/kubeconfig/admin" \
    --leader-elect=false --extensions --metrics-bind-address=0 --health-probe-bind-address=127.0.0.1:0
  until_ok "node $NODE to be Ready" 120 sh -c "'$KUBECTL' --kubeconfig='$STATE/kubeconfig/admin' get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True"
  until_ok "the default service account" 60 "${K[@]}" get serviceaccount default
  say "cluster up in $((SECONDS - t0)) s from $STATE"
  env_of "$STATE"
}

env_of() {
  echo "export AML_TEST_KUBECONFIG=$1/kubeconfig/admin"
  echo "export AML_TEST_KUBE_STATE=$1"
}

down() {
  STATE=${1:-$STATE_DEFAULT}
  [[ -d $STATE ]] || { say "nothing to stop in $STATE"; return 0; }
  STATE=$(cd "$STATE" && pwd)
  KUBECTL=$CACHE/bin/kubectl
  [[ -x $KUBECTL ]] || KUBECTL=kubectl
  stop() { # stop NAME: TERM, then KILL after 10 s
    local f=$STATE/pids/$1 pid i
    [[ -f $f ]] || return 0
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for ((i = 0; i < 20; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
      say "stopped $1 ($pid)"
    fi
    rm -f "$f"
  }
  # The kubelet removes the pods (and their network) while it still runs.
  if [[ -f $STATE/pids/kubelet ]] && kill -0 "$(cat "$STATE/pids/kubelet")" 2>/dev/null; then
    timeout 60 "$KUBECTL" --kubeconfig="$STATE/kubeconfig/admin" delete pods --all -A --grace-period=0 --force --wait=true >/dev/null 2>&1 || true
  fi
  local n
  for n in agent-sandbox-controller kubelet kube-scheduler kube-controller-manager; do stop $n; done
  local sock=$STATE/containerd/sock t c
  if [[ -S $sock ]]; then
    for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 1
    for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true; done
    for c in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  for n in containerd kube-apiserver etcd; do stop $n; done
  grep -o " $STATE/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null && say "removed bridge $BRIDGE" || true
  if [[ -f $STATE/sysctl ]]; then
    local k v
    while read -r k v; do echo "$v" >"/proc/sys/$k" 2>/dev/null || true; done <"$STATE/sysctl"
    rm -f "$STATE/sysctl"
  fi
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  [[ ${2:-} == --purge ]] && rm -rf "$STATE"
  return 0
}

case ${1:-} in
build) build ;;
up) up "${2:-}" ;;
down) down "${2:-}" "${3:-}" ;;
env) env_of "$(state_dir "${2:-}")" ;;
cache) [[ -f $CACHE/complete ]] && echo "$CACHE" || exit 1 ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
