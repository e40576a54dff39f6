@testable import BroadcastReplay
import Testing

/// The replay handler's settings.
@Suite struct ReplayLogicTests {
    @Test func lengthAndMaxMemoryAreReadAndTheRestIsRecordsSettings() throws {
        let options = try ReplayOptions(setupInfo: ["length": "120", "maxMemory": "64M", "crf": "30", "audio": "app"])
        #expect(options.length == 120_000_000_000 && options.maxMemory == 64 << 20)
        let defaults = try ReplayOptions(setupInfo: [:])
        #expect(defaults.length == 30_000_000_000 && defaults.maxMemory == 256 << 20 && !defaults.onDisk)
        #expect(try ReplayOptions(setupInfo: ["buffer": "disk"]).onDisk)
        #expect(ReplayOptions.bytes("512K") == 512 << 10 && ReplayOptions.bytes("2G") == 2 << 30 && ReplayOptions.bytes("1000") == 1000)
        #expect(ReplayOptions.bytes("lots") == nil && ReplayOptions.bytes("-1M") == nil)
        for (key, value, message) in [("length", "0", "length '0': seconds to keep, 1-3600"),
                                      ("maxMemory", "1K", "maxMemory '1K': bytes of encoded video and audio kept, e.g. 256M or 2G (64K-64G)"),
                                      ("upload", "https://x/", "replay does not upload; upload a saved file with the record handler's tools"),
                                      ("buffer", "tape", "buffer 'tape': memory, or disk (a ring of files in $XDG_CACHE_HOME/broadcastd)"),
                                      ("colour", "red", "unknown setup field 'colour'")] {
            #expect(throws: Error.self, "\(key)") { try ReplayOptions(setupInfo: [key: value]) }
            do { _ = try ReplayOptions(setupInfo: [key: value]) } catch { #expect(error.description == message) }
        }
    }
}
