#!/usr/bin/env bash
# Makes sure commands the make targets need are on PATH, installing the Debian package that provides a
# missing one when run as root (as localenv/build.sh does for the local environment's packages).
#
# Usage: tools/require_debian_packages.sh <command>=<package>...   e.g. chromedriver=chromium-driver
# A command is looked for on PATH rather than its package asked for: npm may come with NodeSource's
# nodejs, which no Debian package named npm records.
set -euo pipefail

log="${XDG_CACHE_HOME:-$HOME/.cache}/kai-scale-pipeline/build-logs/apt-tools.log"
missing=()
for pair in "$@"; do
  command -v "${pair%%=*}" >/dev/null 2>&1 || missing+=("${pair#*=}")
done
((${#missing[@]} == 0)) && exit 0
if [[ "$(id -u)" != 0 ]]; then
  echo "missing Debian packages: ${missing[*]}; install them: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
mkdir -p "$(dirname "$log")"
echo "installing Debian packages: ${missing[*]} (log: $log)" >&2
if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } \
  >"$log" 2>&1; then
  echo "apt-get install ${missing[*]} failed; see $log" >&2
  exit 1
fi
