#!/usr/bin/env bash
# Installs the Debian packages that provide the given commands or files when
# they are missing. Usage: deps.sh NEED:PACKAGE ...  (NEED is a command name or
# an absolute path). Needs root for apt-get; prints what it installs.
set -euo pipefail
missing=()
for spec in "$@"; do
  need=${spec%%:*} pkg=${spec#*:}
  if [[ $need == /* ]]; then [[ -e $need ]] && continue
  else command -v "$need" >/dev/null 2>&1 && continue
  fi
  missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "deps: missing packages ${missing[*]}: run as root, or apt-get install them" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh cloud VM runs unattended-upgrades at boot, which holds the dpkg
# and apt lists locks for minutes: wait for them (up to 20 minutes) rather
# than fail, and say so.
apt_wait() {
  local out
  for i in $(seq 1 120); do
    if out=$(apt-get -o DPkg::Lock::Timeout=10 "$@" 2>&1); then return 0; fi
    if ! grep -qiE 'could not get lock|unable to acquire|is another process using it' <<<"$out"; then
      echo "$out" >&2
      return 1
    fi
    [[ $i == 1 ]] && echo "deps: another apt-get or dpkg (unattended-upgrades?) holds the lock: waiting for it" >&2
    sleep 10
  done
  echo "deps: the apt lock was held for 20 minutes: try again when unattended-upgrades is done" >&2
  return 1
}
apt_wait update -qq
# What the tests install must not start services (openssh-server would start
# an sshd on every interface): policy-rc.d refuses every start while it
# runs (invoke-rc.d's convention), and a service it brings is left disabled.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt_wait install -y -qq --no-install-recommends "${missing[@]}"
for pkg in "${missing[@]}"; do
  if [[ $pkg == openssh-server ]] && command -v systemctl >/dev/null; then
    systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true
  fi
  # The tests start their own Prometheus, on 127.0.0.1 and a port of their own.
  if [[ $pkg == prometheus ]] && command -v systemctl >/dev/null; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
done
echo "deps: installed ${missing[*]}" >&2
