#!/usr/bin/env bash
# Builds the local environment's binaries from Go modules (never from downloaded release binaries)
# into a cache outside the repo, keyed by the pinned versions, so later runs reuse them.
#
# Usage: localenv/build.sh            build what is missing, print the bin directory
# Env:   KAI_LOCALENV_CACHE           cache root (default ${XDG_CACHE_HOME:-~/.cache}/kai-scale-pipeline)
set -euo pipefail
# Each component is built inside $(...), where bash would otherwise turn errexit off.
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${KAI_LOCALENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kai-scale-pipeline}"
log_dir="$cache_root/build-logs"
mkdir -p "$log_dir"

# Pinned versions. kubernetes and etcd are pinned by the wrapper modules' go.mod files.
KWOK_VERSION="v0.8.0"
# The helm of the Airflow image (docker/airflow/Dockerfile); the tests install local charts with it.
HELM_VERSION="v3.19.5"
# The toolchain on the machine must build everything: never let go fetch another one.
export GOTOOLCHAIN=local
export CGO_ENABLED=0

fail() {
  echo "localenv build: $*" >&2
  exit 1
}

command -v go >/dev/null 2>&1 ||
  fail "no Go toolchain on PATH: install Go >= 1.26 (kwok ${KWOK_VERSION} needs it) and retry"

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
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
}

build_etcd() {
  local version dir
  version="$(module_version etcd go.etcd.io/etcd/server/v3)"
  dir="$(wrapper_dir etcd "$version")"
  cached_build etcd "$version" "$dir" etcd \
    go_build_in etcd -ldflags "-s -w" -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3
}

build_prometheus() {
  local version dir minor patch release pkg=github.com/prometheus/common/version
  version="$(module_version prometheus github.com/prometheus/prometheus)"
  dir="$(wrapper_dir prometheus "$version")"
  # Module v0.3XX.Y is Prometheus 3.XX.Y; kwokctl reads the release from --version.
  minor="${version#v0.}"
  patch="${minor#*.}"
  minor="${minor%%.*}"
  release="3.$((minor - 300)).$patch"
  # remove_all_sd keeps only the file and HTTP service discovery kwokctl's configuration uses.
  cached_build prometheus "$version" "$dir" prometheus \
    go_build_in prometheus -tags remove_all_sd \
    -ldflags "-s -w -X $pkg.Version=$release -X $pkg.Branch=release -X $pkg.Revision=$version" \
    -o "$dir.tmp/prometheus" github.com/prometheus/prometheus/cmd/prometheus
}

build_kwok() {
  local dir
  dir="$cache_root/bin/kwok-$KWOK_VERSION-$(go env GOVERSION)"
  cached_build kwok "$KWOK_VERSION" "$dir" kwokctl \
    env GOBIN="$dir.tmp" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
}

build_helm() {
  local dir
  dir="$cache_root/bin/helm-$HELM_VERSION-$(go env GOVERSION)"
  cached_build helm "$HELM_VERSION" "$dir" helm \
    env GOBIN="$dir.tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >/dev/null
  # Not in bin/current: a worker without helm is the local environment's default; tests opt in.
  ln -sfn "$dir" "$cache_root/bin/helm"
}

# One directory of links, so the rest of the environment needs a single path.
bin_dir="$cache_root/bin/current"
kubernetes_dir="$(build_kubernetes)"
etcd_dir="$(build_etcd)"
prometheus_dir="$(build_prometheus)"
kwok_dir="$(build_kwok)"
build_helm
mkdir -p "$bin_dir"
for binary in "$kubernetes_dir"/* "$etcd_dir"/* "$prometheus_dir"/* "$kwok_dir"/*; do
  ln -sfn "$binary" "$bin_dir/$(basename "$binary")"
done
echo "$bin_dir"
