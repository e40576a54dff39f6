import BroadcastHandlerKit
import BroadcastLogging
import BroadcastStream

JournalLogHandler.bootstrap(level: .info)
runBroadcastHandler(StreamHandler(), name: "broadcast-handler-stream", refusingRealtime: true)
