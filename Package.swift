// swift-tools-version:6.0
import PackageDescription

// Library targets carry the logic; executables only parse arguments and call in.
//   BroadcastSystem      the one module that makes syscalls (sockets, SCM_RIGHTS, memfd, mmap, poll, spawn)
//   BroadcastLogging     swift-log output: human-readable, or with syslog priorities when stderr is the journal
//   BroadcastConfig      TOML configuration files checked against a program's keys; defaults < file < command line
//   BroadcastCore        the model: sample types and formats, the broadcast state machine, manifests, budget
//   BroadcastProtocol    the wire protocol of docs/protocol.md: framing, messages, a blocking peer connection
//   BroadcastCapture     the capture source interface, the synthetic source, BGRx → NV12/I420 conversion
//   BroadcastX11         X11 screen capture: XCB-SHM grabs in bands, XDamage, XFixes cursor, RandR outputs
//   BroadcastPortal      xdg-desktop-portal's ScreenCast and Camera over D-Bus (libdbus-1): dialogs, tokens, PipeWire remotes
//   BroadcastPipeWire    PipeWire (libpipewire): app audio and the microphone, and screens shared as video nodes
//   BroadcastDaemon      broadcastd's core: event loop, frame pool, handler supervisor, controller sessions
//   BroadcastDaemonSetup what broadcastd's settings build: its keys, the daemon, its capture sources, the watchers
//   BroadcastClient      what controllers and setup UIs call (broadcastctl, broadcast-setup)
//   BroadcastHandlerKit  the handler SDK (BroadcastSampleHandler)
//   BroadcastInspect     the built-in `inspect` handler
//   BroadcastEncoding    encoders (libavcodec: x264/x265/SVT-AV1, Opus, AAC; libswscale), keyframes by time, audio
//                        tracks, the encoding settings and `RecordingEncoder` that record, replay and stream share
//   BroadcastMedia       muxing through libavformat (files, network outputs, the replay ring's), paths, chapters
//   BroadcastImage       frames as 8-bit RGB (BT.709) and PNG files (libpng), for `broadcastctl snapshot`
//   BroadcastTimeline    samples onto a media timeline: segments across pauses, audio placement, drift and joins
//   BroadcastWebRTC      WebRTC out for the stream handler: GStreamer's webrtcbin (libnice, DTLS-SRTP, RTP/RTCP) fed with
//                        encoded packets, WHIP signalling (RFC 9725) through libcurl; only the stream handler links GStreamer
//   BroadcastStream      the built-in `stream` handler: SRT (libsrt, for its statistics)/RTMP/HLS through libavformat, WHIP
//                        (BroadcastWebRTC), one encode to many destinations, a GOP-dropping send queue per destination, reconnection
//   BroadcastUpload      HTTP through libcurl: PUT of a finished file (progress, retries with backoff); PUT and DELETE for HLS
//   BroadcastRecord      the built-in `record` handler: segments, audio timelines, A/V sync, upload when done
//   BroadcastReplay      the built-in `replay` handler: the last minutes encoded in a ring of GOPs, saved without re-encoding
//                        (record, replay and stream import no C module: libav stays in BroadcastEncoding and Media)
let package = Package(
    name: "broadcastd",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "broadcastd", targets: ["broadcastd"]),
        .executable(name: "broadcastctl", targets: ["broadcastctl"]),
        .executable(name: "broadcast-setup", targets: ["broadcast-setup"]),
        .executable(name: "broadcast-handler-inspect", targets: ["broadcast-handler-inspect"]),
        .executable(name: "broadcast-handler-record", targets: ["broadcast-handler-record"]),
        .executable(name: "broadcast-handler-stream", targets: ["broadcast-handler-stream"]),
        .executable(name: "broadcast-handler-replay", targets: ["broadcast-handler-replay"]),
        .executable(name: "broadcast-encoder", targets: ["broadcast-encoder"]),
        .library(name: "BroadcastHandlerKit", targets: ["BroadcastHandlerKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
    ],
    targets: [
        .target(name: "CBroadcastShims"),
        .systemLibrary(
            name: "CXCB", pkgConfig: "xcb xcb-shm xcb-xfixes xcb-randr xcb-damage",
            providers: [
                .apt([
                    "libxcb1-dev", "libxcb-shm0-dev", "libxcb-xfixes0-dev", "libxcb-randr0-dev", "libxcb-damage0-dev",
                ])
            ]),
        .systemLibrary(
            name: "CFFmpeg", pkgConfig: "libavformat libavcodec libswscale libavutil",
            providers: [.apt(["libavformat-dev", "libavcodec-dev", "libswscale-dev", "libavutil-dev"])]),
        .systemLibrary(
            name: "CSwscale", pkgConfig: "libswscale libavutil", providers: [.apt(["libswscale-dev", "libavutil-dev"])]),
        .systemLibrary(name: "CPipeWire", pkgConfig: "libpipewire-0.3", providers: [.apt(["libpipewire-0.3-dev"])]),
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // The GnuTLS flavour: the libsrt Debian's libavformat links, so that one libsrt is in the process
        // (BroadcastMedia's SRTConnection, for the stream handler).
        .systemLibrary(name: "CSRT", pkgConfig: "srt", providers: [.apt(["libsrt-gnutls-dev"])]),
        .systemLibrary(
            name: "CGStreamer",
            pkgConfig: "gstreamer-1.0 gstreamer-webrtc-1.0 gstreamer-sdp-1.0 gstreamer-app-1.0 gstreamer-rtp-1.0",
            providers: [
                .apt(["libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev", "libgstreamer-plugins-bad1.0-dev"])
            ]),
        .target(name: "BroadcastSystem", dependencies: ["CBroadcastShims"]),
        .target(
            name: "BroadcastLogging",
            dependencies: ["BroadcastSystem", .product(name: "Logging", package: "swift-log")]),
        .target(name: "BroadcastCore"),
        .target(
            name: "BroadcastConfig",
            dependencies: ["BroadcastCore", "BroadcastSystem", .product(name: "TOMLKit", package: "TOMLKit")]),
        .target(name: "BroadcastProtocol", dependencies: ["BroadcastCore", "BroadcastSystem"]),
        .target(
            name: "BroadcastProtocolFuzzing", dependencies: ["BroadcastProtocol", "BroadcastCore", "BroadcastSystem"]),
        .executableTarget(name: "broadcast-fuzz-protocol", dependencies: ["BroadcastProtocolFuzzing"]),
        // The tests' PipeWire video source: frames with crop and damage metadata, as a compositor sends them.
        .executableTarget(name: "pipewire-test-video-source", dependencies: ["CPipeWire"]),
        // The tests' beep player: a beep a second into the default sink, saying when PipeWire plays each.
        .executableTarget(name: "pipewire-test-beeps", dependencies: ["CPipeWire"]),
        .target(
            name: "BroadcastCapture",
            dependencies: [
                "BroadcastCore", "BroadcastSystem", .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastX11",
            dependencies: [
                "CXCB", "BroadcastCore", "BroadcastSystem", "BroadcastCapture",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastPortal",
            dependencies: [
                "CDBus", "BroadcastSystem", .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastPipeWire",
            dependencies: [
                "CPipeWire", "CSwscale", "BroadcastPortal", "BroadcastCore", "BroadcastCapture", "BroadcastSystem",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastDaemon",
            dependencies: [
                "BroadcastCore", "BroadcastProtocol", "BroadcastSystem", "BroadcastCapture", "BroadcastLogging",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastClient",
            dependencies: [
                "BroadcastCore", "BroadcastProtocol", "BroadcastSystem",
            ]),
        .target(
            name: "BroadcastHandlerKit",
            dependencies: [
                "BroadcastCore", "BroadcastProtocol", "BroadcastSystem", "BroadcastLogging",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(name: "BroadcastInspect", dependencies: ["BroadcastHandlerKit"]),
        .target(name: "BroadcastTimeline", dependencies: ["BroadcastCore"]),
        .target(
            name: "BroadcastEncoding",
            dependencies: [
                "CFFmpeg", "BroadcastCore", "BroadcastProtocol", "BroadcastTimeline", "BroadcastHandlerKit",
                "BroadcastSystem",
            ]),
        .target(
            name: "BroadcastMedia",
            dependencies: [
                "CFFmpeg", "CSRT", "BroadcastEncoding", "BroadcastCore", "BroadcastHandlerKit", "BroadcastProtocol",
                "BroadcastSystem",
            ]),
        .target(name: "BroadcastImage", dependencies: ["CPNG", "BroadcastCore"]),
        .target(
            name: "BroadcastUpload",
            dependencies: [
                "CCurl", "BroadcastCore", "BroadcastSystem", .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastRecord",
            dependencies: [
                "BroadcastHandlerKit", "BroadcastEncoding", "BroadcastMedia", "BroadcastUpload", "BroadcastTimeline",
                "BroadcastCore", "BroadcastProtocol", "BroadcastSystem",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // What broadcastd's settings build: its keys, the daemon's configuration, its capture sources, the watchers.
        .target(
            name: "BroadcastDaemonSetup",
            dependencies: [
                "BroadcastDaemon", "BroadcastConfig", "BroadcastCapture", "BroadcastCore", "BroadcastProtocol",
                "BroadcastSystem",
                "BroadcastX11", "BroadcastPipeWire", "BroadcastPortal", .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "broadcastd",
            dependencies: [
                "BroadcastDaemonSetup", "BroadcastDaemon", "BroadcastConfig", "BroadcastSystem", "BroadcastLogging",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "broadcastctl",
            dependencies: [
                "BroadcastClient", "BroadcastImage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(
            name: "broadcast-setup",
            dependencies: [
                "BroadcastClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(
            name: "broadcast-handler-inspect",
            dependencies: [
                "BroadcastInspect", "BroadcastHandlerKit", "BroadcastLogging",
            ]),
        .target(
            name: "BroadcastWebRTC",
            dependencies: [
                "CGStreamer", "CCurl", "BroadcastCore", .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "BroadcastStream",
            dependencies: [
                "BroadcastHandlerKit", "BroadcastEncoding", "BroadcastMedia", "BroadcastTimeline", "BroadcastCore",
                "BroadcastProtocol", "BroadcastSystem",
                "BroadcastWebRTC", "BroadcastUpload", .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "broadcast-handler-stream",
            dependencies: [
                "BroadcastStream", "BroadcastHandlerKit", "BroadcastLogging",
            ]),
        // broadcastd's shared encoder: one encode for the handlers that ask for the same (revision 2.9).
        .target(
            name: "BroadcastSharedEncoder",
            dependencies: [
                "BroadcastHandlerKit", "BroadcastEncoding", "BroadcastCore", "BroadcastProtocol", "BroadcastSystem",
            ]),
        .executableTarget(
            name: "broadcast-encoder",
            dependencies: ["BroadcastSharedEncoder", "BroadcastHandlerKit", "BroadcastLogging"]),
        .executableTarget(
            name: "broadcast-handler-record",
            dependencies: [
                "BroadcastRecord", "BroadcastHandlerKit", "BroadcastLogging",
            ]),
        .target(
            name: "BroadcastReplay",
            dependencies: [
                "BroadcastHandlerKit", "BroadcastEncoding", "BroadcastMedia", "BroadcastCore", "BroadcastProtocol",
                "BroadcastSystem",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "broadcast-handler-replay",
            dependencies: [
                "BroadcastReplay", "BroadcastHandlerKit", "BroadcastLogging",
            ]),
        .testTarget(
            name: "BroadcastUnitTests",
            dependencies: [
                "BroadcastCore", "BroadcastProtocol", "BroadcastSystem", "BroadcastCapture",
                "BroadcastClient", "BroadcastDaemon", "BroadcastInspect", "BroadcastX11",
                "BroadcastHandlerKit", "BroadcastRecord", "BroadcastEncoding", "BroadcastMedia", "BroadcastConfig",
                "BroadcastImage",
                "BroadcastTimeline", "BroadcastStream",
                "BroadcastProtocolFuzzing", "BroadcastPipeWire", "BroadcastPortal", "BroadcastUpload",
                "BroadcastReplay",
                "BroadcastWebRTC",
            ]),
        .testTarget(
            name: "BroadcastIntegrationTests",
            dependencies: [
                "BroadcastCore", "BroadcastProtocol", "BroadcastSystem", "BroadcastClient", "BroadcastInspect",
                "BroadcastCapture",
                "BroadcastPipeWire",
            ]),
    ]
)
