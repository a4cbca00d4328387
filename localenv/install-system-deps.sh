#!/usr/bin/env bash
# Installs what the local environment takes from Debian's packages: Prometheus (its server binary only;
# the package's service is not started, localenv runs Prometheus itself through kwokctl).
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "localenv: prometheus is missing; install Debian's package as root: apt-get install prometheus" >&2
  exit 1
fi
echo "localenv: installing Debian's prometheus package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package may start its own service where an init system runs; it would hold port 9090 only.
if command -v service >/dev/null 2>&1; then service prometheus stop >/dev/null 2>&1 || true; fi
