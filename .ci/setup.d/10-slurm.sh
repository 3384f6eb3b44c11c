#!/usr/bin/env bash
# Installs Debian's Slurm 22.05 (controller, node daemon, accounting daemon, client), munge
# and MariaDB for the slow live-Slurm tests (tests/test_slurm_live.py). Idempotent and
# quiet: nothing happens when every daemon is already installed; the package index is
# refreshed at most once, and only when a package is unknown to apt.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
BINARIES=(slurmctld slurmd slurmdbd sacct sbatch munged mariadbd mariadb-install-db)

missing=0
for bin in "${BINARIES[@]}"; do
    if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
        missing=1
    fi
done
[ "$missing" -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

if ! apt-cache show "${PACKAGES[@]}" >/dev/null 2>&1; then
    $SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq
fi
$SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
