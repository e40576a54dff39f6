# Shared by the README's two commands: install what is missing, find Swift.
# shellcheck shell=bash

# The Debian/Ubuntu packages the project needs to build, run its demo and run its tests:
#   build      pkg-config and libxcb with the MIT-SHM, XFixes, RandR, DAMAGE and Composite (window capture) extensions;
#              libavformat/libavcodec/libswscale (Debian's libavcodec drives libx264, libx265, SVT-AV1, libaom and
#              libopus: its libavcodec59 depends on them, no package of their own is needed) for `record`;
#              libpng for `broadcastctl snapshot`; libcurl (OpenSSL) for the recorder's upload; libsrt (GnuTLS, the one
#              libavformat links) for the stream handler's own SRT connections and their statistics
#   X servers  Xvfb, and Xvnc (TigerVNC), which RandR can resize, for the resize and output tests
#   X clients  xrandr, xdotool (pointer), xclock (the demo's moving content), python3-xlib (the tests' painter),
#              twm (a window manager: frames around the windows the window-capture tests capture and exclude)
#   ffmpeg     ffprobe describes what the demo wrote; the tests judge recordings and snapshots with it
#   install    make, and man-db/groff-base to check that the man pages render (`make install` test)
#   servers    srt-live-transmit (srt-tools) and nginx with its RTMP module, for the stream handler's tests;
#              nginx's own WebDAV module (PUT) for the recorder's upload tests; iproute2 (ip, tc) for the SRT loss test
#              (a token bucket filter in a network namespace of its own)
#   systemd    systemd-socket-activate and systemd-analyze, for the socket activation and unit file tests
#   Python     python3-venv and python3-wheel-whl: the tests install the Python package (python/) into a virtual
#              environment with pip, offline (setuptools and wheel from Debian's wheels), as a third party would
#   PipeWire   libpipewire and libdbus-1 (the portal) to build; pipewire, wireplumber, dbus-daemon, GStreamer's
#              pipewiresink (a video node) for the demo and tests; python3-dbus and python3-gi run the tests' stand-in portal
#   WebRTC     GStreamer's webrtcbin (gstreamer1.0-plugins-bad 1.22, libnice through gstreamer1.0-nice) for the stream
#              handler's WHIP destinations, and its headers to build (only the stream handler links GStreamer); the
#              tests' WHIP endpoint answers with webrtcbin too, through python3-gi (the gir1.2-gst* typelibs), and
#              decodes with openh264dec (in gstreamer1.0-plugins-bad)
BROADCASTD_PACKAGES=(python3 python3-venv python3-wheel-whl procps pkg-config systemd
    libxcb1-dev libxcb-shm0-dev libxcb-xfixes0-dev libxcb-randr0-dev libxcb-damage0-dev libxcb-composite0-dev
    libavformat-dev libavcodec-dev libswscale-dev libavutil-dev libpng-dev libcurl4-openssl-dev libsrt-gnutls-dev
    xvfb tigervnc-standalone-server x11-xserver-utils x11-apps xdotool python3-xlib twm xterm ffmpeg
    make man-db groff-base srt-tools nginx libnginx-mod-rtmp iproute2
    libpipewire-0.3-dev libdbus-1-dev pipewire pipewire-bin wireplumber dbus-daemon python3-dbus python3-gi
    gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-pipewire
    libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev gstreamer1.0-plugins-good
    gstreamer1.0-plugins-bad gstreamer1.0-nice gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0 gir1.2-gst-plugins-bad-1.0)

# free_display: prints a display number no X server uses (no lock file, no socket).
free_display() {
    local n
    for n in $(seq 90 199); do
        if [ ! -e "/tmp/.X$n-lock" ] && [ ! -e "/tmp/.X11-unix/X$n" ]; then echo "$n"; return 0; fi
    done
    echo "no free X display number between :90 and :199" >&2
    return 1
}

# start_xvfb N WxH: starts Xvfb on :N (the caller kills $XVFB_PID) and waits for its socket.
start_xvfb() {
    Xvfb ":$1" -screen 0 "${2}x24" -nolisten tcp -noreset >/dev/null 2>&1 &
    XVFB_PID=$!
    for _ in $(seq 200); do [ -S "/tmp/.X11-unix/X$1" ] && return 0; sleep 0.05; done
    echo "Xvfb :$1 did not start" >&2
    return 1
}

# start_pipewire DIR [silence]: a private PipeWire stack (dbus-daemon, pipewire, wireplumber) in DIR, with a null
# sink "demo_speakers" (the default sink) playing a 440 Hz tone and a microphone "demo_mic" (the default
# source, pw-loopback fed from the sink demo_mic_in) carrying 880 Hz; with `silence`, both play silence.
# Sets PIPEWIRE_PIDS (to kill) and exports PIPEWIRE_RUNTIME_DIR for PipeWire clients.
start_pipewire() {
    local dir=$1 silence=${2:-}
    mkdir -p "$dir"; chmod 700 "$dir"
    local env=(env XDG_RUNTIME_DIR="$dir" PIPEWIRE_RUNTIME_DIR="$dir" DBUS_SESSION_BUS_ADDRESS="unix:path=$dir/bus"
               XDG_CONFIG_HOME="$dir/config" XDG_STATE_HOME="$dir/state" HOME="$dir")
    PIPEWIRE_PIDS=()
    "${env[@]}" dbus-daemon --config-file="$(dirname "${BASH_SOURCE[0]}")/private-bus.conf" --address="unix:path=$dir/bus" --nofork --nopidfile >"$dir/dbus.log" 2>&1 &
    PIPEWIRE_PIDS+=($!)
    for _ in $(seq 100); do [ -S "$dir/bus" ] && break; sleep 0.05; done
    "${env[@]}" pipewire >"$dir/pipewire.log" 2>&1 &
    PIPEWIRE_PIDS+=($!)
    for _ in $(seq 100); do [ -S "$dir/pipewire-0" ] && break; sleep 0.05; done
    [ -S "$dir/pipewire-0" ] || { echo "pipewire did not start:" >&2; cat "$dir/pipewire.log" >&2; return 1; }
    "${env[@]}" wireplumber >"$dir/wireplumber.log" 2>&1 &
    PIPEWIRE_PIDS+=($!)
    "${env[@]}" pw-cli create-node adapter '{ factory.name=support.null-audio-sink node.name=demo_speakers
        media.class=Audio/Sink object.linger=true audio.position=[FL FR] priority.session=2000 }' >/dev/null
    "${env[@]}" pw-loopback --capture-props='media.class=Audio/Sink node.name=demo_mic_in audio.position=[FL FR] priority.session=100' \
        --playback-props='media.class=Audio/Source node.name=demo_mic audio.position=[FL FR] priority.session=2000' \
        >"$dir/loopback.log" 2>&1 &
    PIPEWIRE_PIDS+=($!)
    local f
    for f in 440:demo_speakers 880:demo_mic_in; do
        local input="sine=frequency=${f%%:*}:duration=600"
        [ "$silence" = silence ] && input="anullsrc=r=48000:cl=stereo:duration=600"
        ffmpeg -loglevel error -y -f lavfi -i "$input" -ac 2 -ar 48000 "$dir/tone-${f%%:*}.wav"
        sleep 0.3
        "${env[@]}" pw-play --target "${f#*:}" -P '{ node.dont-reconnect = true }' "$dir/tone-${f%%:*}.wav" >/dev/null 2>&1 &
        PIPEWIRE_PIDS+=($!)
    done
    export PIPEWIRE_RUNTIME_DIR=$dir
}

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
