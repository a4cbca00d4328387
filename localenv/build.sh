#!/usr/bin/env bash
# Builds the local environment's binaries from Go modules (never from downloaded release binaries)
# into a cache outside the repo, keyed by the pinned versions, so later runs reuse them.
#
# Usage: localenv/build.sh            build what is missing, print the bin directory
#        localenv/build.sh helm       helm alone (make check renders the Airflow chart with it)
#        localenv/build.sh debian-packages   the Debian packages alone (make local-images installs
#                                     them first: images.sh, beside this script, needs buildah)
# Env:   KAI_LOCALENV_CACHE           cache root (default ${XDG_CACHE_HOME:-~/.cache}/kai-scale-pipeline)
set -euo pipefail
# Each component is built inside $(...), where bash would otherwise turn errexit off.
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${KAI_LOCALENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kai-scale-pipeline}"
log_dir="$cache_root/build-logs"
mkdir -p "$log_dir"

# Pinned versions. kubernetes and etcd are pinned by the wrapper modules' go.mod files; kwok (the
# release the pipeline's setup installs), Prometheus, helm (the Airflow image's, which the tests
# install local charts with) and the cluster DNS, CoreDNS (whose image the node runs), are read where
# they are pinned (pinned, below), as is the pod sandbox, pause.
# The real node's network plugins.
CNI_PLUGINS_VERSION="v1.9.0"
# The real node's container runtime and runc (docs/local-environment.md, "Building the binaries",
# says why these).
CONTAINERD_VERSION="v2.3.7"
RUNC_VERSION="v1.3.6"
# Debian packages the real node needs: the iptables and nft commands (kube-proxy, the kubelet, the
# pod network's guard), libseccomp for runc (pods that ask for the RuntimeDefault seccomp profile), and
# buildah and mmdebstrap for localenv/images.sh (the runner image from its Dockerfile, without Docker),
# and PostgreSQL 15, the Airflow deployment's metadata database (localenv/postgres.py).
DEBIAN_PACKAGES=(iptables nftables libseccomp-dev pkg-config gcc libc6-dev buildah mmdebstrap git postgresql-15)
# The local OCI registry (CNCF distribution) that serves the node's images, and crane to pack them.
REGISTRY_VERSION="v3.1.2"
CRANE_VERSION="v0.22.1"
# The toolchain on the machine must build everything: never let go fetch another one.
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# Every binary is linked stripped (-s -w), so the debug information the compiler would make is thrown
# away: not making it takes 13 % off a cold build (docs/benchmarks.md, "Cold builds without DWARF").
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"

fail() {
  echo "localenv build: $*" >&2
  exit 1
}

[[ "${1:-}" == debian-packages ]] || command -v go >/dev/null 2>&1 ||
  fail "no Go toolchain on PATH: install Go >= 1.26 (kwok needs it) and retry"

# A version pinned in include/manifests/installs.yaml or localenv/pins.py, read by the venv's Python.
pinned() { # <name>
  local python="$here/../.venv/bin/python"
  [[ -x "$python" ]] || fail "no $python to read the pinned versions with: run make venv"
  "$python" -m localenv.pins "$1" || fail "cannot read the pinned version of $1"
}

module_version() { # <wrapper dir> <module path>: read from go.mod, so no module is loaded for it
  local version
  # Either form: "require <module> <version>" or a line of a require block.
  version="$(awk -v m="$2" '$1 == "require" && $2 == m {print $3; exit} $1 == m && $2 ~ /^v/ {print $2; exit}' \
    "$here/go/$1/go.mod")"
  [[ -n "$version" ]] || fail "$here/go/$1/go.mod does not require $2"
  echo "$version"
}

# A key that changes when a pin or the toolchain changes, so a stale binary is never reused.
content_key() { # <files...>
  { go version; cat "$@"; } | sha256sum | cut -c1-12
}

# Runs a build command once: it writes into "<dir>.tmp", which becomes <dir> only when the command
# succeeds, so a cache directory holds a whole build or nothing. Prints <dir>.
cached_build() { # <name> <version> <dir> <binary the dir must hold> <command...>
  local name="$1" version="$2" dir="$3" binary="$4"
  shift 4
  local log="$log_dir/$name-$version.log"
  if [[ ! -x "$dir/$binary" ]]; then
    echo "building $name $version (log: $log)" >&2
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    "$@" >"$log" 2>&1 || { rm -rf "$dir.tmp"; fail "building $name $version failed; see $log"; }
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# The cache directory of a wrapper module's build, keyed by its pins and the toolchain.
wrapper_dir() { # <wrapper> <version>
  echo "$cache_root/bin/$1-$2-$(content_key "$here/go/$1/go.mod" "$here/go/$1/go.sum")"
}

go_build_in() { # <wrapper> <go build arguments...>: builds within the wrapper module
  (cd "$here/go/$1" && go build -trimpath "${@:2}")
}

build_kubernetes() {
  local version dir minor ldflags="" pkg
  version="$(module_version kubernetes k8s.io/kubernetes)"
  dir="$(wrapper_dir kubernetes "$version")"
  minor="${version#v1.}"
  minor="${minor%%.*}"
  # kwokctl picks each component's flags from its --version, so stamp the real release there.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  cached_build kubernetes "$version" "$dir" kubectl \
    go_build_in kubernetes -tags selinux,notest -ldflags "-s -w $ldflags" -o "$dir.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
}

build_etcd() {
  local version dir
  version="$(module_version etcd go.etcd.io/etcd/server/v3)"
  dir="$(wrapper_dir etcd "$version")"
  cached_build etcd "$version" "$dir" etcd \
    go_build_in etcd -ldflags "-s -w" -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3
}

# Prometheus 2.x, the release kube-prometheus-stack runs (localenv/pins.py): localenv/images.sh makes
# the chart's Prometheus image from these binaries. Built in its own module (go install refuses its
# replace directives) with upstream's build tags less builtinassets: the web UI's assets are built by
# npm and not in the module.
build_prometheus() {
  # Seen by prometheus_in_its_module, which cached_build calls.
  local dir PROMETHEUS_VERSION
  PROMETHEUS_VERSION="$(pinned prometheus)"
  dir="$cache_root/bin/prometheus-$PROMETHEUS_VERSION-$(go env GOVERSION)"
  cached_build prometheus "$PROMETHEUS_VERSION" "$dir" prometheus prometheus_in_its_module "$dir.tmp"
}

prometheus_in_its_module() { # <out dir>
  local module=github.com/prometheus/prometheus version="v0.${PROMETHEUS_VERSION#v2.}" info source
  local pkg=github.com/prometheus/common/version
  info="$(go mod download -json "$module@$version")"
  source="$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")"
  [[ -d "$source" ]] || { echo "no directory for $module@$version in the module cache: $info"; return 1; }
  (cd "$source" && GOFLAGS="-mod=mod $GOFLAGS" go build -trimpath -tags netgo,stringlabels \
    -ldflags "-s -w -X $pkg.Version=${PROMETHEUS_VERSION#v} -X $pkg.Revision=$version -X $pkg.Branch=release" \
    -o "$1/" ./cmd/prometheus ./cmd/promtool)
}

build_kwok() {
  local dir KWOK_VERSION
  KWOK_VERSION="$(pinned kwok)"
  dir="$cache_root/bin/kwok-$KWOK_VERSION-$(go env GOVERSION)"
  cached_build kwok "$KWOK_VERSION" "$dir" kwokctl \
    env GOBIN="$dir.tmp" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
}

build_helm() {
  local dir HELM_VERSION
  HELM_VERSION="$(pinned helm)"
  dir="$cache_root/bin/helm-$HELM_VERSION-$(go env GOVERSION)"
  cached_build helm "$HELM_VERSION" "$dir" helm \
    env GOBIN="$dir.tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >/dev/null
  # Not in bin/current: a worker without helm is the local environment's default; tests opt in.
  ln -sfn "$dir" "$cache_root/bin/helm"
}

# Installs the Debian packages that are missing (as root, as on CI), or says which are missing.
require_debian_packages() {
  local missing=() package
  for package in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  ((${#missing[@]} == 0)) && return
  [[ "$(id -u)" == 0 ]] ||
    fail "missing Debian packages: ${missing[*]}; install them: sudo apt-get install ${missing[*]}"
  echo "installing Debian packages: ${missing[*]} (log: $log_dir/apt.log)" >&2
  # PostgreSQL's package would create and start a cluster of the machine's own: localenv runs its own.
  if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
    mkdir -p /etc/postgresql-common && echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
  fi
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } \
    >"$log_dir/apt.log" 2>&1 || fail "apt-get install ${missing[*]} failed; see $log_dir/apt.log"
}

build_containerd() {
  local dir module=github.com/containerd/containerd/v2
  dir="$cache_root/bin/containerd-$CONTAINERD_VERSION-$(go env GOVERSION)"
  cached_build containerd "$CONTAINERD_VERSION" "$dir" containerd \
    env GOBIN="$dir.tmp" go install -trimpath -ldflags "-s -w -X $module/version.Version=$CONTAINERD_VERSION" \
    -tags "no_btrfs no_devmapper no_zfs" \
    "$module/cmd/containerd@$CONTAINERD_VERSION" "$module/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

build_runc() {
  local dir
  dir="$cache_root/bin/runc-$RUNC_VERSION-$(go env GOVERSION)"
  # cgo: runc's nsenter is C; seccomp links libseccomp.
  cached_build runc "$RUNC_VERSION" "$dir" runc \
    env CGO_ENABLED=1 GOBIN="$dir.tmp" go install -trimpath -tags seccomp \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" "github.com/opencontainers/runc@$RUNC_VERSION"
}

# go install of <module>/<package>@<version> for each package, into a cached directory.
build_go_packages() { # <name> <version> <binary the dir must hold> <module> <packages...>
  local name="$1" version="$2" binary="$3" module="$4" dir package targets=()
  shift 4
  dir="$cache_root/bin/$name-$version-$(go env GOVERSION)"
  for package in "$@"; do targets+=("$module${package:+/$package}@$version"); done
  cached_build "$name" "$version" "$dir" "$binary" \
    env GOBIN="$dir.tmp" go install -trimpath -ldflags "-s -w" "${targets[@]}"
}

build_cni_plugins() {
  build_go_packages cni-plugins "$CNI_PLUGINS_VERSION" bridge github.com/containernetworking/plugins \
    plugins/main/bridge plugins/main/loopback plugins/ipam/host-local plugins/meta/portmap
}

# Kubernetes' pause, from build/pause/linux/pause.c of the pinned kubernetes module, as its Makefile
# builds it (static, -Os).
build_pause() {
  local version dir source PAUSE_VERSION
  version="$(module_version kubernetes k8s.io/kubernetes)"
  source="$(go env GOMODCACHE)/k8s.io/kubernetes@$version/build/pause/linux/pause.c"
  [[ -f "$source" ]] || fail "$source not found: build the kubernetes binaries first"
  command -v gcc >/dev/null 2>&1 || fail "no C compiler for the pause image: apt-get install gcc libc6-dev"
  PAUSE_VERSION="$(pinned pause)"
  dir="$cache_root/bin/pause-$PAUSE_VERSION"
  cached_build pause "$PAUSE_VERSION" "$dir" pause \
    gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_VERSION-kai-scale" -o "$dir.tmp/pause" "$source"
}

case "${1:-}" in
  "") ;;
  helm) build_helm; exit 0 ;;
  debian-packages) require_debian_packages; exit 0 ;;
  *) fail "usage: localenv/build.sh [helm | debian-packages]" ;;
esac

# One directory of links, so the rest of the environment needs a single path.
bin_dir="$cache_root/bin/current"
require_debian_packages
kubernetes_dir="$(build_kubernetes)"
etcd_dir="$(build_etcd)"
prometheus_dir="$(build_prometheus)"
kwok_dir="$(build_kwok)"
COREDNS_VERSION="$(pinned coredns)"
coredns_dir="$(build_go_packages coredns "$COREDNS_VERSION" coredns github.com/coredns/coredns "")"
cni_dir="$(build_cni_plugins)"
pause_dir="$(build_pause)"
containerd_dir="$(build_containerd)"
runc_dir="$(build_runc)"
registry_dir="$(build_go_packages registry "$REGISTRY_VERSION" registry \
  github.com/distribution/distribution/v3 cmd/registry)"
crane_dir="$(build_go_packages crane "$CRANE_VERSION" crane github.com/google/go-containerregistry cmd/crane)"
build_helm
mkdir -p "$bin_dir"
for binary in "$kubernetes_dir"/* "$etcd_dir"/* "$prometheus_dir"/* "$kwok_dir"/* "$registry_dir"/* \
  "$crane_dir"/* "$containerd_dir"/* "$runc_dir"/*; do
  ln -sfn "$binary" "$bin_dir/$(basename "$binary")"
done
# containerd is given the plugins' directory; the images' binaries are not for this machine's PATH.
ln -sfn "$cni_dir" "$bin_dir/cni"
mkdir -p "$bin_dir/images"
ln -sfn "$pause_dir/pause" "$bin_dir/images/pause"
ln -sfn "$coredns_dir/coredns" "$bin_dir/images/coredns"
echo "$bin_dir"
