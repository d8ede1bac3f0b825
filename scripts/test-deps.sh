#!/usr/bin/env bash
# Debian packages the tests use beyond Python: chromium (headless check of the HTML report), poppler-utils
# (pdftotext, pdffonts and pdftoppm read the PDF report back) and Pango (WeasyPrint prints the PDF report with it;
# `ladder report` needs it too). Installs only what is missing; needs root.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
has_lib() {  # a shared library the dynamic loader finds (WeasyPrint loads Pango with cffi's dlopen)
    ldconfig -p 2>/dev/null | grep -F "$1" >/dev/null || compgen -G "/usr/lib/*/$1*" >/dev/null \
        || compgen -G "/usr/lib/$1*" >/dev/null
}
has_lib libpango-1.0.so.0 || missing+=(libpango-1.0-0)
has_lib libpangoft2-1.0.so.0 || missing+=(libpangoft2-1.0-0)
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "test-deps: missing ${missing[*]} and not root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1; apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
echo "test-deps: installed ${missing[*]}"
