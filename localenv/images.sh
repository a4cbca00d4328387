#!/usr/bin/env bash
# Builds the images the local environment makes from source and pushes them to an OCI registry,
# without Docker: with buildah, on base images made from Debian packages by mmdebstrap, from a KAI
# source tree:
# - the runner image (docker/runner/Dockerfile), its suite compiled from that tree;
# - KAI's own images (localenv/images/kai): its services and the chart's crd-upgrader hook image;
# - the fake GPU operator's (localenv/images/fake-gpu-operator), from its source archive;
# - kwok-operator's and its metrics proxy's (localenv/images/kwok-operator), from their Go modules.
# - the monitoring chart's (localenv/images/monitoring): prometheus-operator's and kube-state-metrics',
#   from their Go modules, and Prometheus' of the binaries localenv/build.sh builds;
# - Pyroscope's server (localenv/images/pyroscope), from its source archive;
# - the pipeline's Airflow image (docker/airflow/Dockerfile), on what stands here for the official
#   apache/airflow image (localenv/images/airflow), built from PyPI and the official Dockerfile's scripts.
# Every step runs once, keyed by its inputs, into the cache localenv/build.sh uses; a later run only pushes
# what the registry lacks.
#
# Usage: localenv/images.sh <registry>   e.g. 127.0.0.1:5000 (plain HTTP)
#        Images keep their upstream names under the registry, e.g.
#        <registry>/ghcr.io/kai-scale-pipeline/runner:<KAI_REF>, where the local node's containerd looks
#        for ghcr.io's images. Prints what it pushed, one key=value per line (see the end).
#        localenv/images.sh --build-only   builds into the cache, pushes and prints nothing (make's
#        local-images: the builds then happen before any test's time limit starts).
#        localenv/images.sh --build-only --without-local-binaries   builds only what needs none of
#        localenv/build.sh's binaries (kubectl, Prometheus, helm), so make runs it beside build.sh.
# Env:   KAI_LOCALENV_CACHE   cache root (default ${XDG_CACHE_HOME:-~/.cache}/kai-scale-pipeline)
#        KAI_SOURCE           KAI's source: a git checkout, or a `git archive` tarball of a commit
#                             (default: the snapshot in ../shared/vendor beside the repository)
#        KAI_COMMIT           KAI_SOURCE's commit, when it cannot be read from it
#        KAI_REF              the runner image's tag: by convention the KAI ref it was built from
#        KAI_LOCALENV_VENDOR_DIR  the source archives of the fake GPU operator and of the official
#                             Airflow Dockerfile (default ../shared/vendor)
# Needs: root (buildah's storage, mmdebstrap's chroot), buildah and mmdebstrap (Debian packages; build.sh
#        installs them), git, Go, and crane, kubectl, Prometheus and helm (localenv/build.sh builds them
#        into the cache).
# mmdebstrap runs its hooks with the chroot as "$1": the single quotes of the hooks are meant.
# shellcheck disable=SC2016
set -euo pipefail
shopt -s inherit_errexit

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cache_root="${KAI_LOCALENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kai-scale-pipeline}"
images_root="$cache_root/images"
log_dir="$cache_root/build-logs"

# Where KAI publishes its images (its README's install); here they are tagged with the commit built.
KAI_IMAGE_REPOSITORY="ghcr.io/kai-scheduler/kai-scheduler"
# The source archives of what the module proxy refuses (../shared/vendor/README.md): the fake GPU
# operator at the version include/manifests/installs.yaml pins.
VENDOR_DIR="${KAI_LOCALENV_VENDOR_DIR:-$(dirname "$repo")/shared/vendor}"
KAI_SOURCE="${KAI_SOURCE:-$(dirname "$repo")/shared/vendor/kai-scheduler-d5bc503a1463.tar.gz}"
KAI_REF="${KAI_REF:-main}"
# The Go of the suite's build base (KAI's go.mod asks for at least its `go` line), from the module proxy.
GO_VERSION="1.26.8"
DEBIAN_SUITE="bookworm"
DEBIAN_MIRRORS=(
  "deb http://deb.debian.org/debian $DEBIAN_SUITE main"
  "deb http://deb.debian.org/debian $DEBIAN_SUITE-updates main"
  "deb http://deb.debian.org/debian-security $DEBIAN_SUITE-security main"
)
# Modules of KAI's that the checksum database reachable here refuses (see the vendor snapshot's notes).
KAI_GONOSUMDB="github.com/run-ai"
# The trust store of the build's RUN steps, not copied into any image: behind a TLS-intercepting proxy
# (as on these machines) the host's store is the one that reaches PyPI and the module proxy.
CA_BUNDLE="/etc/ssl/certs/ca-certificates.crt"
export GOTOOLCHAIN=local
# As in localenv/build.sh: the binaries are linked stripped, so the compiler makes no debug information.
# The runner's suite is compiled with the same flags as KAI's services, so that it reuses their packages.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"

fail() {
  echo "localenv images: $*" >&2
  exit 1
}

# What is pinned elsewhere, read there by the venv's Python (localenv/pins.py), one a line: the
# runner's repository (the pipeline's default KAI_SCALE_RUNNER_IMAGE), the fake GPU operator's and
# kwok-operator's releases (include/manifests/installs.yaml), kwok-operator's module and its version,
# Prometheus (whose binaries localenv/build.sh builds), the Pyroscope server the setup runs, the
# official image docker/airflow/Dockerfile builds on and the official Airflow chart's source archive.
python="$repo/.venv/bin/python"
[[ -x "$python" ]] || fail "no $python to read the pinned versions with: run make venv"
pinned="$("$python" -m localenv.pins runner-image fake-gpu-operator kwok-operator kwok-operator-module \
  kwok-operator-module-version prometheus pyroscope airflow-base-image airflow-chart-archive)" ||
  fail "cannot read the pinned versions (localenv/pins.py)"
{
  read -r RUNNER_IMAGE
  read -r FAKE_GPU_OPERATOR_VERSION
  read -r KWOK_OPERATOR_RELEASE
  read -r KWOK_OPERATOR_MODULE
  read -r KWOK_OPERATOR_VERSION
  read -r PROMETHEUS_TAG
  read -r PYROSCOPE_VERSION
  read -r AIRFLOW_BASE_IMAGE
  read -r AIRFLOW_CHART_ARCHIVE
} <<<"$pinned"
# The fake GPU operator's source archive is named by its git tag, v<release>.
FAKE_GPU_OPERATOR_VERSION="v$FAKE_GPU_OPERATOR_VERSION"

[[ ($# -eq 1 && ("$1" == --build-only || "$1" =~ ^[A-Za-z0-9.-]+(:[0-9]+)?$)) ||
  ($# -eq 2 && "$1" == --build-only && "$2" == --without-local-binaries) ]] ||
  fail "usage: localenv/images.sh <registry host:port> | --build-only [--without-local-binaries], e.g. localenv/images.sh 127.0.0.1:5000"
registry="$1"
[[ "$registry" == --build-only ]] && registry=""  # no registry: nothing is pushed
without_local_binaries="${2:+yes}"
[[ "$KAI_REF" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  fail "KAI_REF '$KAI_REF' cannot be an image tag (letters, digits, '_', '.', '-'; at most 128)"
[[ -e "$KAI_SOURCE" ]] ||
  fail "no KAI source at $KAI_SOURCE: set KAI_SOURCE to a KAI checkout or a \`git archive\` tarball of one"
[[ $EUID -eq 0 ]] || fail "run as root: buildah's image storage and mmdebstrap's chroot need it"
for tool in buildah mmdebstrap git; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool is not on PATH: install it (apt-get install --no-install-recommends $tool) and retry"
done
command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH: install Go >= 1.26 and retry"
[[ -r "$CA_BUNDLE" ]] || fail "no CA bundle at $CA_BUNDLE: install ca-certificates"
mkdir -p "$images_root" "$log_dir"

# A private image store in the cache, apart from the machine's own containers; its run-time state
# beside it, so that each cache has a store of its own and removing images/ removes all of it.
storage=(--root "$images_root/storage" --runroot "$images_root/run")
in_store() { # <buildah arguments...>
  buildah "${storage[@]}" "$@"
}
image_exists() { # <image>
  in_store inspect --type image "$1" >/dev/null 2>&1
}
# A new build replaces the one its key superseded: the store keeps one image per name.
remove_superseded() { # <image>
  local other
  for other in $(in_store images --format '{{.Name}}:{{.Tag}}' --filter "reference=${1%:*}"); do
    [[ "$other" == "$1" ]] || in_store rmi "$other" >/dev/null
  done
  in_store rmi --prune >/dev/null 2>&1 || true
}

# Pushes <image> as <target> and prints the manifest's digest. The registry's storage outlives
# `make local-down` (localenv/registry.py), so a push is skipped when the registry still holds, under
# <target>, what the last push of this very image wrote there: each push costs seconds, 19 of them
# most of a warm `make local-up`.
push_image() { # <local image> <target>
  local image="$1" target="$2" id record crane="$cache_root/bin/current/crane"
  [[ -n "$registry" ]] || return 0
  [[ -x "$crane" ]] || fail "no crane in $cache_root/bin/current: run localenv/build.sh"
  id="$(in_store inspect --type image --format '{{.FromImageID}}' "$image")"
  # One record per target and local image: the digest its last push wrote (buildah's digest file).
  record="$images_root/pushed/$(printf '%s\n' "$target" "$id" | sha256sum | cut -c1-16)"
  if [[ -s "$record" && "$("$crane" digest --insecure "$target" 2>/dev/null)" == "$(<"$record")" ]]; then
    cat "$record"
    return
  fi
  mkdir -p "${record%/*}"
  in_store push --quiet --tls-verify=false --digestfile "$record" "$image" "docker://$target" >&2 ||
    fail "pushing $image to $target failed"
  echo "pushed $target" >&2
  cat "$record"
}

key_of() { # <files...>: a key that changes when any of them changes
  cat "$@" | sha256sum | cut -c1-12
}

# Runs a step once: it writes into "<dir>.tmp", which becomes <dir> only when the step succeeds, so a
# cache directory holds a whole result or nothing. The step's output goes to a log named after <name>.
cached_step() { # <name> <dir> <file the dir must hold> <command...>
  local name="$1" dir="$2" file="$3" started=$SECONDS
  shift 3
  local log="$log_dir/$name.log"
  if [[ ! -e "$dir/$file" ]]; then
    echo "building $name (log: $log)" >&2
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    "$@" >"$log" 2>&1 || { rm -rf "$dir.tmp"; fail "building $name failed; see $log"; }
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    echo "built $name in $((SECONDS - started)) s" >&2
  fi
}

# --- KAI's source and its commit ---

kai_commit_of_source() {
  local commit="${KAI_COMMIT:-}"
  if [[ -z "$commit" && -d "$KAI_SOURCE/.git" ]]; then
    [[ -z "$(git -C "$KAI_SOURCE" status --porcelain)" ]] ||
      fail "the KAI checkout $KAI_SOURCE has local changes, so no commit describes it: commit or stash them"
    commit="$(git -C "$KAI_SOURCE" rev-parse HEAD)"
  elif [[ -z "$commit" && -f "$KAI_SOURCE" ]]; then
    # `git archive` of a commit records the commit in the tarball's header.
    # (Only its first block is read: a pipe would fail on gzip's SIGPIPE.)
    commit="$(git get-tar-commit-id < <(gzip -dcf "$KAI_SOURCE"))" || commit=""
  fi
  [[ "$commit" =~ ^[0-9a-f]{40}$ ]] ||
    fail "cannot tell the commit of $KAI_SOURCE: set KAI_COMMIT to it (40 hex digits)"
  echo "$commit"
}

extract_kai_source() { # <tarball> <dir>
  tar -xzf "$1" -C "$2" --strip-components=1 --no-same-owner
}

kai_source_dir() { # <commit>
  if [[ -d "$KAI_SOURCE" ]]; then
    echo "$KAI_SOURCE"
    return
  fi
  local dir="$images_root/kai-source/$1"
  cached_step "kai-source-${1:0:12}" "$dir" go.mod extract_kai_source "$KAI_SOURCE" "$dir.tmp"
  echo "$dir"
}

check_go_version() { # <KAI source dir>
  local wanted
  wanted="$(awk '$1 == "go" {print $2; exit}' "$1/go.mod")"
  [[ -n "$wanted" ]] || fail "$1/go.mod has no go line"
  [[ "$(printf '%s\n%s\n' "$wanted" "$GO_VERSION" | sort -V | head -1)" == "$wanted" ]] ||
    fail "KAI's go.mod asks for Go $wanted, the build base has $GO_VERSION: raise GO_VERSION in $0"
}

# --- Base images from Debian packages ---

# What every base has: Debian's minimal system, merged /usr as Debian's own images have it (without
# the usrmerge package and the Perl it pulls in), no documentation but the copyright files, no /dev
# (the runtime provides it), no resolv.conf or hostname of this machine.
debian_base_options=(
  --variant=minbase --mode=root --format=tar
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --customize-hook='rm "$1"/etc/resolv.conf "$1"/etc/hostname'
  --skip=output/dev
)

# Makes a base's root file system (rootfs.tar) and its package list with mmdebstrap, then imports it
# into the store as <image>.
debian_base() { # <name> <image> <config options for buildah config> -- <mmdebstrap options...>
  local name="$1" image="$2" config=() dir container
  shift 2
  while [[ "$1" != "--" ]]; do config+=("$1") && shift; done
  shift
  dir="$images_root/bases/$name-${image##*:}"
  [[ -e "$dir/rootfs.tar" ]] || rm -rf "$images_root/bases/$name-"*
  cached_step "$name-${image##*:}" "$dir" rootfs.tar \
    mmdebstrap "${debian_base_options[@]}" "$@" \
    --customize-hook="chroot \"\$1\" dpkg-query -W > '$dir.tmp/packages.txt'" \
    "$DEBIAN_SUITE" "$dir.tmp/rootfs.tar" "${DEBIAN_MIRRORS[@]}"
  if ! image_exists "$image"; then
    container="$(in_store from scratch)"
    if ! { in_store add "$container" "$dir/rootfs.tar" / >/dev/null &&
      in_store config "${config[@]}" "$container" &&
      in_store commit --quiet --rm "$container" "$image" >/dev/null; }; then
      in_store rm "$container" >/dev/null 2>&1
      fail "importing $dir/rootfs.tar as $image failed"
    fi
    remove_superseded "$image"
  fi
  echo "$image"
}

base_key() { # <mmdebstrap options...> ; <extra key material on stdin>
  { mmdebstrap --version; printf '%s\n' "${debian_base_options[@]}" "$@" "${DEBIAN_MIRRORS[@]}"; cat; } |
    sha256sum | cut -c1-12
}

python_base() {
  # python3 is 3.11 in bookworm; pip for the runner's install, passwd for its useradd. Debian marks
  # its Python as managed by apt; here it is the image's own, as in the official python images.
  local options=(
    --include=python3 --include=python3-pip --include=passwd --include=ca-certificates
    --customize-hook='rm "$1"/usr/lib/python3.11/EXTERNALLY-MANAGED'
  )
  debian_base python-base "localhost/kai-scale-pipeline/python-base:$DEBIAN_SUITE-$(base_key "${options[@]}" </dev/null)" \
    --env LANG=C.UTF-8 --cmd python3 -- "${options[@]}"
}

go_base() {
  # The Go distribution from the module proxy: checksummed by the Go checksum database and pinned by
  # version, unlike whatever the host's GOROOT holds. Its zip carries no file modes, so set the
  # commands' execute bits as the go command does when it runs a downloaded toolchain.
  local info sum options
  info="$(go mod download -json "golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64")" ||
    fail "downloading Go $GO_VERSION from the module proxy failed: $info"
  sum="$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$info")"
  # Passed to the hook by name, so that the key (the module's checksum) does not depend on where the
  # module cache is.
  local -x KAI_GO_TOOLCHAIN
  KAI_GO_TOOLCHAIN="$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")"
  [[ -d "$KAI_GO_TOOLCHAIN" && -n "$sum" ]] || fail "no Go $GO_VERSION toolchain in the module cache: $info"
  options=(
    --include=ca-certificates
    --customize-hook='cp -R "$KAI_GO_TOOLCHAIN" "$1/usr/local/go" && chmod -R u+w "$1/usr/local/go"'
    --customize-hook='chmod a+x "$1"/usr/local/go/bin/* "$1"/usr/local/go/pkg/tool/*/*'
  )
  debian_base go-base "localhost/kai-scale-pipeline/go-base:go$GO_VERSION-$DEBIAN_SUITE-$(base_key "${options[@]}" <<<"$sum")" \
    --env GOPATH=/go --env GOTOOLCHAIN=local \
    --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --workingdir /go -- "${options[@]}"
}

# --- The runner image ---

# The files the build copies from the repository (less what .dockerignore leaves out), and the
# Dockerfile.
runner_inputs() {
  echo "$repo/docker/runner/Dockerfile" "$repo/.dockerignore"
  (cd "$repo" && find packages/runner packages/model \
    \( -name build -o -name '*.egg-info' -o -name __pycache__ -o -name .mypy_cache -o -name .ruff_cache \) \
    -prune -o -type f -print | LC_ALL=C sort | sed "s|^|$repo/|")
}

build_runner() { # <image> <KAI source dir> <KAI commit> <go base> <python base>
  local go_cache
  go_cache="$(go env GOCACHE)"
  [[ "$go_cache" == /* ]] || fail "the runner's build mounts the host's Go build cache: GOCACHE is '$go_cache', not a directory"
  # (KAI's services, built before, create it; not when their binaries come from the cache.)
  mkdir -p "$go_cache"
  # Host networking for the RUN steps (module proxy, PyPI): no bridge on this machine. chroot isolation:
  # crun refuses this machine's hybrid cgroup hierarchy, and a build needs no cgroups. The host's module
  # and build caches are mounted into the RUN steps, never into the image: the suite is built with
  # -trimpath, so where the host's Go is the go base's (GO_VERSION) it reuses what KAI's services
  # compiled (kai_binaries, before it).
  in_store build --format docker --isolation chroot --network host --pull=never \
    --volume "$(go env GOMODCACHE):/go/pkg/mod" --volume "$go_cache:/root/.cache/go-build" \
    --volume "$CA_BUNDLE:$CA_BUNDLE:ro" \
    --build-context "kai-source=$2" --build-arg "KAI_COMMIT=$3" --build-arg "KAI_REF=$KAI_REF" \
    --build-arg "GO_IMAGE=$4" --build-arg "PYTHON_IMAGE=$5" \
    --build-arg "GOFLAGS=-mod=mod $GOFLAGS" --build-arg "GONOSUMDB=$KAI_GONOSUMDB" \
    --tag "$1" --file "$repo/docker/runner/Dockerfile" "$repo"
}

with_time() { # prefixes each line with the time it was written: the log shows how long each step took
  local line
  while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done
}

runner_image() { # <KAI source dir> <KAI commit> <go base> <python base>
  local key image log started=$SECONDS
  # shellcheck disable=SC2046 # one path per word: the repository's paths have no spaces
  # With the build's command (the function's text, without its comments) and buildah's version.
  key="$({ cat $(runner_inputs); printf '%s\n' "$2" "$3" "$4" "$KAI_REF" "$KAI_GONOSUMDB" "$GOFLAGS"; declare -f build_runner
    buildah --version; } | sha256sum | cut -c1-12)"
  image="localhost/kai-scale-pipeline/runner:$key"
  if ! image_exists "$image"; then
    log="$log_dir/runner-$key.log"
    echo "building the runner image $image (log: $log)" >&2
    build_runner "$image" "$@" 2>&1 | with_time >"$log" || fail "building the runner image failed; see $log"
    remove_superseded "$image"
    echo "built the runner image in $((SECONDS - started)) s" >&2
  fi
  echo "$image"
}

push_runner() { # <local image>
  local target="$registry/$RUNNER_IMAGE:$KAI_REF" digest
  digest="$(push_image "$1" "$target")"
  echo "$target@$digest"
}

# --- Images of static Go binaries, from localenv/images/<project>/Dockerfile ---

# The base of these images: Debian's minimal system, in place of the distroless and ubuntu bases of
# their upstream Dockerfiles (which this build cannot pull).
minimal_base() {
  debian_base minimal-base "localhost/kai-scale-pipeline/minimal-base:$DEBIAN_SUITE-$(base_key </dev/null)" --
}

# Static binaries of a Go source tree's main packages, built once into a cached directory. Further go
# build flags (-tags=...) may come before the packages; the last package names the step's file.
go_binaries() { # <name> <source dir> <out dir> <ldflags> [<go build flags...>] <packages...>
  local name="$1" source="$2" out="$3" ldflags="$4"
  shift 4
  # shellcheck disable=SC2016 # expanded by the inner bash
  cached_step "$name" "$out" "$(basename "${*: -1}")" bash -c 'cd "$0" && CGO_ENABLED=0 GOFLAGS="-mod=mod $GOFLAGS" GONOSUMDB="$1" \
    go build -trimpath -ldflags "$2" -o "$3/" "${@:4}"' "$source" "$KAI_GONOSUMDB" "$ldflags" "$out.tmp" "$@"
}

# Builds <project>'s Dockerfile target as a local image (once, keyed by the Dockerfile and the build's
# options, whose context directories are keyed by what they hold) and pushes it as <reference>.
project_image() { # <project> <target> <reference> <buildah build options...>
  local project="$1" target="$2" reference="$3" dir key image log
  shift 3
  dir="$here/images/$project"
  log="$log_dir/images-$project.log"
  key="$({ cat "$dir/Dockerfile"; printf '%s\n' "$target" "$@"; buildah --version; } | sha256sum | cut -c1-12)"
  # One local name per pushed repository: targets built once per service keep an image each.
  image="localhost/kai-scale-pipeline/$project-$(basename "${reference%:*}"):$key"
  if ! image_exists "$image"; then
    in_store build --format docker --isolation chroot --pull=never "$@" --target "$target" \
      --tag "$image" --file "$dir/Dockerfile" "$dir" >>"$log" 2>&1 ||
      fail "building the $project image $target failed; see $log"
    remove_superseded "$image"
  fi
  push_image "$image" "$registry/$reference" >/dev/null
}

# --- KAI's own images ---

# KAI's services, each an image of one static binary (localenv/images/kai's `service`). KAI's Makefile
# builds them with cgo; without it they build static (resourcereservation needs cgo and runs only on
# GPU nodes, which are KWOK's here: not built).
KAI_SERVICES=(scheduler binder podgrouper podgroupcontroller queuecontroller admission operator)
KAI_VERSION_PKG="github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/version"

check_kai_source() { # <KAI source dir>
  local missing=() path
  for path in go.mod deployments/kai-scheduler/Chart.yaml deployments/kai-scheduler/crds \
    deployments/crd-upgrader/apply-crds.sh NOTICE "${KAI_SERVICES[@]/#/cmd/}"; do
    [[ -e "$1/$path" ]] || missing+=("$path")
  done
  ((${#missing[@]} == 0)) ||
    fail "$KAI_SOURCE is not a KAI source tree: no ${missing[*]} in $1 (KAI_SOURCE must be a KAI checkout or a \`git archive\` of one)"
}

kai_binaries() { # <KAI source dir> <commit>: prints their directory
  local binaries tag="${2:0:12}" ldflags
  ldflags="-s -w -X $KAI_VERSION_PKG.gitCommit=$2 -X $KAI_VERSION_PKG.gitVersion=$tag"
  ldflags+=" -X $KAI_VERSION_PKG.gitTreeState=clean -X $KAI_VERSION_PKG.buildDate=1970-01-01T00:00:00Z"
  binaries="$images_root/kai-bin/$tag-$(go env GOVERSION)"
  go_binaries "kai-services-$tag" "$1" "$binaries" "$ldflags" "${KAI_SERVICES[@]/#/./cmd/}"
  echo "$binaries"
}

kai_images() { # <KAI source dir> <commit>
  local binaries base service tag="${2:0:12}"
  [[ -x "$cache_root/bin/current/kubectl" ]] || fail "no kubectl in $cache_root/bin/current: run localenv/build.sh"
  binaries="$(kai_binaries "$1" "$2")"
  # The hook image's kubectl: the one localenv/build.sh built from the Kubernetes module.
  cp -L "$cache_root/bin/current/kubectl" "$binaries/kubectl"
  base="$(minimal_base)"
  local contexts=(--build-context "kai-source=$1" --build-context "kai-bin=$binaries" --build-arg "BASE_IMAGE=$base")
  for service in "${KAI_SERVICES[@]}"; do
    project_image kai service "$KAI_IMAGE_REPOSITORY/$service:$tag" "${contexts[@]}" --build-arg "SERVICE=$service"
  done
  project_image kai crd-upgrader "$KAI_IMAGE_REPOSITORY/crd-upgrader:$tag" "${contexts[@]}"
}

# --- kwok-operator's images, from Go modules ---

# kwok-operator's release tag is not a semantic version, so its module (KWOK_OPERATOR_MODULE) is
# addressed by the commit's pseudo-version (KWOK_OPERATOR_VERSION): the one KAI's go.mod pins (the
# module proxy serves it with GONOSUMDB=github.com/run-ai).
KWOK_OPERATOR_IMAGE="docker.io/runaidevops/kwok-operator:$KWOK_OPERATOR_RELEASE"
# The metrics proxy its release manifest runs beside the manager.
KUBE_RBAC_PROXY_MODULE="github.com/brancz/kube-rbac-proxy"
KUBE_RBAC_PROXY_VERSION="v0.15.0"

module_dir() { # <module> <version>: its directory in the module cache, downloaded by version
  local info dir
  info="$(GONOSUMDB="$KAI_GONOSUMDB" go mod download -json "$1@$2")" || fail "downloading $1@$2 failed: $info"
  dir="$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")"
  [[ -d "$dir" ]] || fail "no directory for $1@$2 in the module cache: $info"
  echo "$dir"
}

kwok_operator_images() {
  local source binaries base
  base="$(minimal_base)"
  # Built inside the module cache: `go install` refuses kube-rbac-proxy (its replace directives, and
  # the proxy answers 403 for its version list), a build in its own module does not.
  source="$(module_dir "$KWOK_OPERATOR_MODULE" "$KWOK_OPERATOR_VERSION")"
  binaries="$images_root/kwok-operator-bin/${KWOK_OPERATOR_VERSION##*-}-$(go env GOVERSION)"
  go_binaries "kwok-operator-${KWOK_OPERATOR_VERSION##*-}" "$source" "$binaries" "-s -w" ./cmd
  project_image kwok-operator manager "$KWOK_OPERATOR_IMAGE" --build-context "bin=$binaries" \
    --build-arg "BASE_IMAGE=$base"
  source="$(module_dir "$KUBE_RBAC_PROXY_MODULE" "$KUBE_RBAC_PROXY_VERSION")"
  binaries="$images_root/kube-rbac-proxy-bin/$KUBE_RBAC_PROXY_VERSION-$(go env GOVERSION)"
  go_binaries "kube-rbac-proxy-$KUBE_RBAC_PROXY_VERSION" "$source" "$binaries" "-s -w" ./cmd/kube-rbac-proxy
  project_image kwok-operator kube-rbac-proxy "gcr.io/kubebuilder/kube-rbac-proxy:$KUBE_RBAC_PROXY_VERSION" \
    --build-context "bin=$binaries" --build-arg "BASE_IMAGE=$base"
}

# --- The monitoring chart's images, from Go modules ---

# What kube-prometheus-stack 62.7.0 (include/manifests/installs.yaml) runs: prometheus-operator (its
# appVersion, for the operator and its config reloader), Prometheus and kube-state-metrics, pushed
# under the names and tags the chart's values give them. (Not its admission webhook: the chart runs it
# only when asked, as this project does not.)
PROMETHEUS_OPERATOR_MODULE="github.com/prometheus-operator/prometheus-operator"
# The module proxy refuses v0.76.1, the chart's tag (403, by its pseudo-version too); v0.76.2 is
# v0.76.1 and one bug fix (its CHANGELOG: #6909), so it is built and pushed under the chart's tag.
PROMETHEUS_OPERATOR_VERSION="v0.76.2"
PROMETHEUS_OPERATOR_TAG="v0.76.1"
# Its go.mod replaces these nested modules by their directories, which its module zip leaves out.
PROMETHEUS_OPERATOR_SUBMODULES=(pkg/apis/monitoring pkg/client)
# Prometheus 2.X.Y (PROMETHEUS_TAG, module v0.X.Y), whose binaries localenv/build.sh builds (kwokctl
# runs them too); the image takes its configuration and console files from the module.
PROMETHEUS_MODULE="github.com/prometheus/prometheus"
PROMETHEUS_MODULE_VERSION="v0.${PROMETHEUS_TAG#v2.}"
KUBE_STATE_METRICS_MODULE="k8s.io/kube-state-metrics/v2"
KUBE_STATE_METRICS_VERSION="v2.13.0"

# Copies a module's tree and puts nested modules where its replace directives point: <path>=<dir>.
module_tree() { # <out dir> <module dir> <path=module dir...>
  local out="$1" nested
  cp -R "$2/." "$out"
  shift 2
  for nested in "$@"; do
    mkdir -p "$out/${nested%%=*}" && cp -R "${nested#*=}/." "$out/${nested%%=*}"
  done
  # The module cache's files are read-only; the cache's copy must be removable.
  chmod -R u+w "$out"
}

# The ldflags of the upstream builds: the version prometheus/common's version package reports
# (in --version and the build_info metric), the module version standing for the commit.
version_ldflags() { # <version> <module version>
  local pkg=github.com/prometheus/common/version
  echo "-s -w -X $pkg.Version=$1 -X $pkg.Revision=$2 -X $pkg.Branch=release"
}

# prometheus-operator's and kube-state-metrics'; Prometheus' is prometheus_image.
monitoring_images() {
  local base module source binaries nested=() path target
  base="$(minimal_base)"
  # (Each module's directory is assigned first: a failed download then stops the script.)
  module="$(module_dir "$PROMETHEUS_OPERATOR_MODULE" "$PROMETHEUS_OPERATOR_VERSION")"
  for path in "${PROMETHEUS_OPERATOR_SUBMODULES[@]}"; do
    nested+=("$path=$(module_dir "$PROMETHEUS_OPERATOR_MODULE/$path" "$PROMETHEUS_OPERATOR_VERSION")")
  done
  source="$images_root/sources/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
  cached_step "prometheus-operator-source-$PROMETHEUS_OPERATOR_VERSION" "$source" go.mod \
    module_tree "$source.tmp" "$module" "${nested[@]}"
  binaries="$images_root/prometheus-operator-bin/$PROMETHEUS_OPERATOR_VERSION-$(go env GOVERSION)"
  go_binaries "prometheus-operator-$PROMETHEUS_OPERATOR_VERSION" "$source" "$binaries" \
    "$(version_ldflags "${PROMETHEUS_OPERATOR_VERSION#v}" "$PROMETHEUS_OPERATOR_VERSION")" \
    ./cmd/prometheus-config-reloader ./cmd/operator
  for target in prometheus-operator prometheus-config-reloader; do
    project_image monitoring "$target" "quay.io/prometheus-operator/$target:$PROMETHEUS_OPERATOR_TAG" \
      --build-context "bin=$binaries" --build-arg "BASE_IMAGE=$base"
  done
  # Its main package is the module's root, and go build names the binary kube-state-metrics (its path
  # less the major version). The step's file is then ".": its directory exists only once it is built.
  source="$(module_dir "$KUBE_STATE_METRICS_MODULE" "$KUBE_STATE_METRICS_VERSION")"
  binaries="$images_root/kube-state-metrics-bin/$KUBE_STATE_METRICS_VERSION-$(go env GOVERSION)"
  go_binaries "kube-state-metrics-$KUBE_STATE_METRICS_VERSION" "$source" "$binaries" \
    "$(version_ldflags "$KUBE_STATE_METRICS_VERSION" "$KUBE_STATE_METRICS_VERSION")" .
  project_image monitoring kube-state-metrics \
    "registry.k8s.io/kube-state-metrics/kube-state-metrics:$KUBE_STATE_METRICS_VERSION" \
    --build-context "bin=$binaries" --build-arg "BASE_IMAGE=$base"
}

# Of the binaries localenv/build.sh builds (kwokctl runs them too) and the module's configuration and
# console files.
prometheus_image() {
  local source binaries
  source="$(module_dir "$PROMETHEUS_MODULE" "$PROMETHEUS_MODULE_VERSION")"
  binaries="$(dirname "$(readlink -f "$cache_root/bin/current/prometheus")")"
  [[ -x "$binaries/promtool" && "$("$binaries/prometheus" --version)" == *"version ${PROMETHEUS_TAG#v} "* ]] ||
    fail "no Prometheus ${PROMETHEUS_TAG#v} and its promtool in $cache_root/bin/current: run localenv/build.sh"
  project_image monitoring prometheus "quay.io/prometheus/prometheus:$PROMETHEUS_TAG" \
    --build-context "bin=$binaries" --build-context "prometheus-source=$source" \
    --build-arg "BASE_IMAGE=$(minimal_base)"
}

# --- The fake GPU operator's images ---

# Its components that run on a cluster of KWOK GPU nodes (localenv/images/fake-gpu-operator), tagged
# with the chart's version as its release tags them.
FAKE_GPU_OPERATOR_COMPONENTS=(status-updater kwok-gpu-device-plugin topology-server status-exporter)

fake_gpu_operator_images() {
  local source binaries base component archive="$VENDOR_DIR/fake-gpu-operator-$FAKE_GPU_OPERATOR_VERSION.tar.gz"
  [[ -f "$archive" ]] ||
    fail "no fake GPU operator source at $archive: put a \`git archive\` of run-ai/fake-gpu-operator $FAKE_GPU_OPERATOR_VERSION there or set KAI_LOCALENV_VENDOR_DIR"
  source="$images_root/sources/fake-gpu-operator-$FAKE_GPU_OPERATOR_VERSION"
  cached_step "fake-gpu-operator-source-$FAKE_GPU_OPERATOR_VERSION" "$source" go.mod \
    tar -xzf "$archive" -C "$source.tmp" --strip-components=1 --no-same-owner
  binaries="$images_root/fake-gpu-operator-bin/$FAKE_GPU_OPERATOR_VERSION-$(go env GOVERSION)"
  go_binaries "fake-gpu-operator-$FAKE_GPU_OPERATOR_VERSION" "$source" "$binaries" "-s -w" \
    ./cmd/status-updater ./cmd/kwok-gpu-device-plugin ./cmd/topology-server ./cmd/status-exporter \
    ./cmd/status-exporter-kwok
  base="$(minimal_base)"
  for component in "${FAKE_GPU_OPERATOR_COMPONENTS[@]}"; do
    project_image fake-gpu-operator "$component" \
      "ghcr.io/run-ai/fake-gpu-operator/$component:${FAKE_GPU_OPERATOR_VERSION#v}" \
      --build-context "bin=$binaries" --build-arg "BASE_IMAGE=$base"
  done
}

# --- Pyroscope's server image ---

# The module proxy refuses the dskit pseudo-version Pyroscope 2.2.1 pins (403 "not available"); this
# one, seven small commits later with the same go.mod, builds it (../shared/vendor/README.md).
PYROSCOPE_DSKIT_REPLACE="github.com/grafana/dskit=github.com/grafana/dskit@v0.0.0-20260703122047-de1ec7541c44"

extract_pyroscope_source() { # <archive> <dir>
  tar -xzf "$1" -C "$2" --strip-components=1 --no-same-owner &&
    (cd "$2" && go mod edit -replace "$PYROSCOPE_DSKIT_REPLACE")
}

# Under the name the chart runs (grafana/pyroscope on Docker Hub), tagged with the release that
# include/manifests/installs.yaml pins as the chart's image tag. Its cold build is the longest here
# (about 25 min on two busy cores: 1.3 GB of modules); cached like the others.
pyroscope_image() {
  local source binaries archive="$VENDOR_DIR/pyroscope-$PYROSCOPE_VERSION.tar.gz"
  [[ -f "$archive" ]] ||
    fail "no Pyroscope source at $archive: put the grafana/pyroscope snapshot of v$PYROSCOPE_VERSION there or set KAI_LOCALENV_VENDOR_DIR"
  source="$images_root/sources/pyroscope-$PYROSCOPE_VERSION-$(key_of <(echo "$PYROSCOPE_DSKIT_REPLACE"))"
  cached_step "pyroscope-source-$PYROSCOPE_VERSION" "$source" go.mod \
    extract_pyroscope_source "$archive" "$source.tmp"
  binaries="$images_root/pyroscope-bin/$PYROSCOPE_VERSION-$(go env GOVERSION)"
  go_binaries "pyroscope-$PYROSCOPE_VERSION" "$source" "$binaries" \
    "-s -w -X github.com/grafana/pyroscope/v2/pkg/util/build.Version=$PYROSCOPE_VERSION" \
    -tags=netgo ./cmd/pyroscope
  project_image pyroscope pyroscope "docker.io/grafana/pyroscope:$PYROSCOPE_VERSION" \
    --build-context "bin=$binaries" --build-context "pyroscope-source=$source" \
    --build-arg "BASE_IMAGE=$(minimal_base)"
}

# --- The pipeline's Airflow image ---

# The pipeline's Airflow image, under the name a deployment's values give it (deploy/airflow/values.yaml)
# and tagged by its inputs: a changed image is a new tag, which `helm upgrade` rolls out.
AIRFLOW_IMAGE="ghcr.io/kai-scale-pipeline/airflow"
# The official image docker/airflow/Dockerfile builds on (AIRFLOW_BASE_IMAGE, pinned above): what stands
# for it here gets its name, made of the official Dockerfile in the chart's archive (AIRFLOW_CHART_ARCHIVE).
# The official image's scripts that the chart relies on, inline in the official Dockerfile.
AIRFLOW_SCRIPTS=(entrypoint_prod.sh clean-logs.sh)

# Copies the heredoc `COPY <<"EOF" /<name>` of the official Dockerfile into <dir>/<name>, for each script.
official_scripts() { # <dir>
  local archive="$VENDOR_DIR/$AIRFLOW_CHART_ARCHIVE" dockerfile script
  dockerfile="$(tar -xzOf "$archive" apache-airflow/Dockerfile)" || return 1
  for script in "${AIRFLOW_SCRIPTS[@]}"; do
    awk -v start="COPY <<\"EOF\" /$script" '$0 == start {on = 1; next} on && $0 == "EOF" {exit} on' \
      <<<"$dockerfile" >"$1/$script"
    [[ "$(head -c 2 "$1/$script")" == "#!" ]] || { echo "no $script in the official Dockerfile" >&2; return 1; }
  done
}

airflow_base_image() {
  local options scripts base image log
  [[ -f "$VENDOR_DIR/$AIRFLOW_CHART_ARCHIVE" ]] ||
    fail "no official Airflow chart and Dockerfile at $VENDOR_DIR/$AIRFLOW_CHART_ARCHIVE: set KAI_LOCALENV_VENDOR_DIR"
  scripts="$images_root/airflow-scripts/$(key_of "$VENDOR_DIR/$AIRFLOW_CHART_ARCHIVE")"
  cached_step airflow-scripts "$scripts" clean-logs.sh official_scripts "$scripts.tmp"
  # The official image's Debian runtime for what it runs here: Python 3.11 with venv, dumb-init, and
  # the libstdc++ its entrypoint preloads.
  options=(--include=python3 --include=python3-venv --include=dumb-init --include=libstdc++6
    --include=ca-certificates --include=passwd --include=procps)
  base="$(debian_base airflow-os "localhost/kai-scale-pipeline/airflow-os:$DEBIAN_SUITE-$(base_key "${options[@]}" </dev/null)" \
    --env LANG=C.UTF-8 -- "${options[@]}")"
  # Keyed by the Dockerfile, the lock, the scripts and the base: the name is the official one, so the
  # key is kept as a label and checked.
  local key
  key="$(key_of "$here/images/airflow/Dockerfile" "$here/images/airflow/requirements.txt" "$scripts"/* <(echo "$base"))"
  if [[ "$(in_store inspect --type image --format '{{index .OCIv1.Config.Labels "kai-scale.stand-in-key"}}' "$AIRFLOW_BASE_IMAGE" 2>/dev/null)" != "$key" ]]; then
    log="$log_dir/airflow-base-$key.log"
    echo "building $AIRFLOW_BASE_IMAGE from PyPI (log: $log)" >&2
    mkdir -p "$images_root/uv-cache"
    in_store build --format docker --isolation chroot --network host --pull=never \
      --volume "$CA_BUNDLE:$CA_BUNDLE:ro" --volume "$images_root/uv-cache:/tmp/.cache/uv" \
      --build-context "scripts=$scripts" --build-arg "BASE_IMAGE=$base" --label "kai-scale.stand-in-key=$key" \
      --tag "$AIRFLOW_BASE_IMAGE" --file "$here/images/airflow/Dockerfile" "$here/images/airflow" 2>&1 |
      with_time >"$log" || fail "building $AIRFLOW_BASE_IMAGE failed; see $log"
    in_store rmi --prune >/dev/null 2>&1 || true
  fi
}

# The Airflow chart's statsd exporter (its statsd.enabled default), from its Go module, tagged as the
# chart's values name it.
STATSD_EXPORTER_MODULE="github.com/prometheus/statsd_exporter"
STATSD_EXPORTER_VERSION="v0.29.0"

statsd_exporter_image() {
  local source binaries
  source="$(module_dir "$STATSD_EXPORTER_MODULE" "$STATSD_EXPORTER_VERSION")"
  binaries="$images_root/statsd-exporter-bin/$STATSD_EXPORTER_VERSION-$(go env GOVERSION)"
  go_binaries "statsd-exporter-$STATSD_EXPORTER_VERSION" "$source" "$binaries" \
    "$(version_ldflags "${STATSD_EXPORTER_VERSION#v}" "$STATSD_EXPORTER_VERSION")" .
  project_image monitoring statsd-exporter "quay.io/prometheus/statsd-exporter:$STATSD_EXPORTER_VERSION" \
    --build-context "bin=$binaries" --build-arg "BASE_IMAGE=$(minimal_base)"
}

# The npm of the Airflow image's view-assets stage, from Debian (the official node image cannot be pulled).
node_base() {
  local options=(--include=npm --include=ca-certificates)
  debian_base node-base "localhost/kai-scale-pipeline/node-base:$DEBIAN_SUITE-$(base_key "${options[@]}" </dev/null)" \
    --env NODE_EXTRA_CA_CERTS="$CA_BUNDLE" -- "${options[@]}"
}

# What the Airflow image's build copies from the repository (less what .dockerignore leaves out).
airflow_inputs() {
  echo "$repo/docker/airflow/Dockerfile" "$repo/.dockerignore" "$repo/requirements.txt"
  (cd "$repo" && find dags plugins include packages/provider packages/model \
    \( -name build -o -name '*.egg-info' -o -name __pycache__ -o -name .mypy_cache -o -name .ruff_cache \
    -o -name node_modules -o -path packages/provider/src/kai_scale/views/static/vendor \) \
    -prune -o -type f -print | LC_ALL=C sort | sed "s|^|$repo/|")
}

airflow_image() {
  local helm="$cache_root/bin/helm/helm" node key image log started=$SECONDS
  [[ -x "$helm" ]] || fail "no helm in $cache_root/bin/helm: run localenv/build.sh"
  airflow_base_image
  node="$(node_base)"
  # shellcheck disable=SC2046 # one path per word: the repository's paths have no spaces
  key="$({ cat $(airflow_inputs) "$helm"; printf '%s\n' "$node"
    in_store inspect --type image --format '{{.FromImageID}}' "$AIRFLOW_BASE_IMAGE"; buildah --version; } |
    sha256sum | cut -c1-12)"
  image="localhost/kai-scale-pipeline/airflow:$key"
  if ! image_exists "$image"; then
    log="$log_dir/airflow-$key.log"
    echo "building the Airflow image $image (log: $log)" >&2
    in_store build --format docker --isolation chroot --network host --pull=never \
      --volume "$CA_BUNDLE:$CA_BUNDLE:ro" --build-arg "NODE_IMAGE=$node" \
      --build-context "helm-binary=$(dirname "$(readlink -f "$helm")")" \
      --tag "$image" --file "$repo/docker/airflow/Dockerfile" "$repo" 2>&1 | with_time >"$log" ||
      fail "building the Airflow image failed; see $log"
    remove_superseded "$image"
    echo "built the Airflow image in $((SECONDS - started)) s" >&2
  fi
  push_image "$image" "$registry/$AIRFLOW_IMAGE:$key" >/dev/null
  echo "$AIRFLOW_IMAGE:$key"
}

# A checkout is checked before anything else; a tarball once it is extracted.
[[ -d "$KAI_SOURCE" ]] && check_kai_source "$KAI_SOURCE"
commit="$(kai_commit_of_source)"
source_dir="$(kai_source_dir "$commit")"
check_kai_source "$source_dir"
check_go_version "$source_dir"
# First what needs none of localenv/build.sh's binaries (make local-images builds it beside them); the
# runner after KAI's services, whose compiled packages its suite reuses.
kai_binaries "$source_dir" "$commit" >/dev/null
fake_gpu_operator_images
kwok_operator_images
monitoring_images
pyroscope_image
go_image="$(go_base)"
python_image="$(python_base)"
runner="$(runner_image "$source_dir" "$commit" "$go_image" "$python_image")"
airflow_base_image
node_base >/dev/null
statsd_exporter_image
[[ -n "$without_local_binaries" ]] && exit 0
kai_images "$source_dir" "$commit"
prometheus_image
airflow_reference="$(airflow_image)"
[[ -n "$registry" ]] || exit 0
# What was pushed, for localenv/kai.py (one key=value per line).
runner_reference="$(push_runner "$runner")"
echo "runner=$runner_reference"
echo "kai_commit=$commit"
echo "kai_source=$source_dir"
echo "kai_image_repository=$KAI_IMAGE_REPOSITORY"
echo "kai_image_tag=${commit:0:12}"
echo "airflow_image=$airflow_reference"
