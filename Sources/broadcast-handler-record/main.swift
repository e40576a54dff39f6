import BroadcastHandlerKit
import BroadcastRecord
import BroadcastLogging

JournalLogHandler.bootstrap(level: .info)
runBroadcastHandler(RecordHandler(), name: "broadcast-handler-record")
