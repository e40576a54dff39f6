import BroadcastHandlerKit
import BroadcastRecord
import Logging

LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
runBroadcastHandler(RecordHandler(), name: "broadcast-handler-record")
