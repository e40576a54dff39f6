import BroadcastHandlerKit
import BroadcastLogging
import BroadcastRecord

JournalLogHandler.bootstrap(level: .info)
runBroadcastHandler(RecordHandler(), name: "broadcast-handler-record", refusingRealtime: true)
