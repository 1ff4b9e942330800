#!/usr/bin/env bash
# Installs the Debian packages that some tests run for real, when missing:
# prometheus (with promtool) for the dashboard and alert-rule tests, and
# chromium for the decision explorer's browser tests (driven by puppeteer-core,
# which downloads no browser of its own), and redis-server for the shared-quota
# tests (each starts its own on a loopback port: test/helpers/redis.ts).
set -euo pipefail
missing=()
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-tools: missing ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-test-tools: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
