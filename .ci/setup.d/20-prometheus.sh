#!/usr/bin/env bash
# Installs Debian's prometheus (2.42: prometheus + promtool) for the slow Prometheus
# connector tests. Idempotent and quiet; refreshes the package index only when needed.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

if ! apt-cache show prometheus >/dev/null 2>&1; then
    $SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq
fi
$SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends prometheus >/dev/null
