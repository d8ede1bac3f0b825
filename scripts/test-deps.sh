#!/usr/bin/env bash
# Debian packages the tests use beyond Python: chromium (headless check of the HTML report) and poppler-utils
# (pdftoppm renders the PDF report). Installs only what is missing; needs root.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "test-deps: missing ${missing[*]} and not root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1; apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
echo "test-deps: installed ${missing[*]}"
