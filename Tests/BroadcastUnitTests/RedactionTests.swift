import BroadcastCore
import Testing

@Suite struct RedactionTests {
    @Test func urlsLoseTheirSecretsWhereverTheyAreShown() {
        let cases: [(String, String)] = [
            ("file:///tmp/a.json", "file:///tmp/a.json"),
            ("/tmp/a@b?token=x.json", "/tmp/a@b?token=x.json"),
            ("rtmp://user:PASS@live.example/live/KEY", "rtmp://***@live.example/live/***"),
            ("rtmps://live.example:443/app/KEY?x=1", "rtmps://live.example:443/app/***?x=1"),
            ("rtmp://live.example/app", "rtmp://live.example/app"),
            ("rtmp://live.example/app/", "rtmp://live.example/app/"),
            ("rtmp://h/app/instance/KEY", "rtmp://h/app/instance/***"),
            (
                "srt://ingest.example:9000?streamid=KEY&latency=200&passphrase=PASS",
                "srt://ingest.example:9000?streamid=***&latency=200&passphrase=***"
            ),
            (
                "https://u:p@origin/live/index.m3u8?token=T&Key=K&sig=S&apiKey=A&auth=X&n=1#frag",
                "https://***@origin/live/index.m3u8?token=***&Key=***&sig=***&apiKey=***&auth=***&n=1#frag"
            ),
            ("http://origin/a@b/index.m3u8", "http://origin/a@b/index.m3u8"),
            ("srt://h:1?streamid", "srt://h:1?streamid"),
        ]
        for (url, shown) in cases { #expect(SecretURL.masked(url) == shown, "\(url)") }
        #expect(!SecretURL.masked("rtmp://a:KEY@h/KEYLESS?k=KEY").contains("KEY@"))
    }

    /// libavformat's messages quote URLs (the hls muxer's "Failed to open file '…'"): they reached the log whole.
    @Test func urlsInALibrarysMessageLoseTheirSecrets() {
        #expect(
            SecretURL.maskedURLs(in: "Failed to open file 'http://u:PASS@h:80/live/index1.m4s'")
                == "Failed to open file 'http://***@h:80/live/index1.m4s'")
        #expect(
            SecretURL.maskedURLs(in: "rtmp://h/app/KEY: I/O error; srt://h:1?passphrase=P failed")
                == "rtmp://h/app/***: I/O error; srt://h:1?passphrase=*** failed")
        #expect(SecretURL.maskedURLs(in: "no URL: a://, 100%") == "no URL: a://, 100%")
    }
}
