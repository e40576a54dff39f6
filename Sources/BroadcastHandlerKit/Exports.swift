// One import for handler authors: the sample types and formats, and JSONValue for results and service info.
@_exported import BroadcastCore

@_exported import enum BroadcastProtocol.JSONValue
