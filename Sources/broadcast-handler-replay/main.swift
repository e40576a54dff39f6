import BroadcastHandlerKit
import BroadcastLogging
import BroadcastReplay

JournalLogHandler.bootstrap(level: .info)
runBroadcastHandler(ReplayHandler(), name: "broadcast-handler-replay", refusingRealtime: true)
