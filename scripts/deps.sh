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
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
