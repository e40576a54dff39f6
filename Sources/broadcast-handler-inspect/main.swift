import BroadcastHandlerKit
import BroadcastInspect
import Logging

LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
runBroadcastHandler(InspectHandler(), name: "broadcast-handler-inspect")
