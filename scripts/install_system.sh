#!/usr/bin/env bash
# Installs the system packages devicerl needs (headless Chromium + ChromeDriver) when they are
# missing and we are root on a Debian/Ubuntu machine. Elsewhere it only explains what to do:
# without a system Chromium, the browser device falls back to Playwright's managed browser.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[devicerl] installing chromium + chromium-driver through apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver >/dev/null
else
  echo "[devicerl] note: no system chromium found and not root with apt;" \
       "browser devices will use Playwright's managed browser if one is installed." >&2
fi
