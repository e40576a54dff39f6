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
            ("srt://ingest.example:9000?streamid=KEY&latency=200&passphrase=PASS", "srt://ingest.example:9000?streamid=***&latency=200&passphrase=***"),
            ("https://u:p@origin/live/index.m3u8?token=T&Key=K&sig=S&apiKey=A&auth=X&n=1#frag", "https://***@origin/live/index.m3u8?token=***&Key=***&sig=***&apiKey=***&auth=***&n=1#frag"),
            ("http://origin/a@b/index.m3u8", "http://origin/a@b/index.m3u8"),
            ("srt://h:1?streamid", "srt://h:1?streamid"),
        ]
        for (url, shown) in cases { #expect(SecretURL.masked(url) == shown, "\(url)") }
        #expect(!SecretURL.masked("rtmp://a:KEY@h/KEYLESS?k=KEY").contains("KEY@"))
    }
}
