import BroadcastHandlerKit
import BroadcastLogging
import BroadcastSharedEncoder

JournalLogHandler.bootstrap(level: .info)
runBroadcastHandler(SharedEncoderHandler(), name: "broadcast-encoder", refusingRealtime: true)
