# Shared by the README's two commands: install what is missing, find Swift.
# shellcheck shell=bash

# The Debian/Ubuntu packages the project needs to build, run its demo and run its tests.
BROADCASTD_PACKAGES=(python3 procps)

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_packages PKG...: installs those that dpkg does not know as installed.
ensure_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "==> installing ${missing[*]}" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_swift() {
    command -v swift >/dev/null || { [ -x /opt/swift/usr/bin/swift ] && export PATH=/opt/swift/usr/bin:$PATH; }
    command -v swift >/dev/null || { echo "Swift 6 is needed (https://swift.org/install/linux/)" >&2; exit 1; }
}
