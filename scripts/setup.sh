#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Prepares a fresh Debian 12 machine: installs the missing packages listed
# in scripts/debian-packages (apt-get, as root or through sudo) and
# generates the configure script.  Safe to run again: it only does what is
# missing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)

missing=""
for pkg in $(sed 's/#.*//' "$top/scripts/debian-packages"); do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    case "$status" in
    *"ok installed") ;;
    *) missing="$missing $pkg" ;;
    esac
done

if [ -n "$missing" ]; then
    echo "setup: installing:$missing"
    # check-packages: optional sudo (only a user who is not root needs it)
    if [ "$(id -u)" -eq 0 ]; then
        sudo=""
    elif command -v sudo > /dev/null; then
        sudo="sudo"
    else
        echo "setup: need root (or sudo) to install:$missing" >&2
        exit 1
    fi
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
        --no-install-recommends $missing
fi

if [ -f "$top/config.status" ]; then
    echo "setup: $top is configured in place; builds go to build/*." >&2
    echo "setup: run 'make distclean' in $top first." >&2
    exit 1
fi
# configure is generated again when it is missing or older than its sources.
stale=no
[ -x "$top/configure" ] || stale=yes
for f in "$top/configure.ac" "$top"/config/scimq_*.m4; do
    [ "$f" -nt "$top/configure" ] && stale=yes
done
if [ "$stale" = yes ]; then
    echo "setup: autoreconf"
    (cd "$top" && autoreconf -fi)
fi
