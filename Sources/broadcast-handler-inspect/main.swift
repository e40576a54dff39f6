import BroadcastHandlerKit
import BroadcastInspect
import BroadcastLogging

JournalLogHandler.bootstrap(level: .info)
runBroadcastHandler(InspectHandler(), name: "broadcast-handler-inspect")
