@testable import BroadcastDaemon
import Testing

@Suite struct RedactionTests {
    @Test func urlsLoseTheirSecretsInLogs() {
        #expect(redactedURL("file:///tmp/a.json") == "file:///tmp/a.json")
        #expect(redactedURL("srt://ingest.example:9000?streamid=KEY") == "srt://ingest.example:9000?…")
        #expect(redactedURL("rtmp://user:KEY@live.example/app/stream") == "rtmp://…@live.example/app/stream")
        #expect(redactedURL("rtmps://u:p@host/x?y=1#z") == "rtmps://…@host/x?…")
        #expect(!redactedURL("rtmp://a:KEY@h/KEYLESS?k=KEY").contains("KEY@"))
    }
}
