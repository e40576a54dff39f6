/// H.264 in Annex B (NAL units after start codes), as libx264 writes it: what a WHIP destination reads of it.
public enum AnnexB {
    /// H.264's profile-level-id for the SDP ("42c01f"): the three bytes after the SPS's NAL header in Annex B
    /// `extradata`.
    public static func profileLevelID(_ extradata: [UInt8]) -> String? {
        guard let sps = nalUnits(extradata[...]).first(where: { $0.first.map { $0 & 0x1f == 7 } ?? false }),
            sps.count >= 4
        else {
            return nil
        }
        return sps.dropFirst().prefix(3).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Whether an access unit (Annex B) carries an SPS before its first slice.
    public static func hasParameterSets(_ data: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index + 3 < data.count {
            guard data[index] == 0 && data[index + 1] == 0 && data[index + 2] == 1 else {
                index += 1
                continue
            }
            switch data[index + 3] & 0x1f {
            case 7: return true
            case 1, 5: return false
            default: index += 3
            }
        }
        return false
    }

    /// The NAL units of an Annex B byte stream, each without its start code.
    public static func nalUnits(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var starts: [(code: Int, payload: Int)] = []
        var index = bytes.startIndex
        while index + 2 < bytes.endIndex {
            if bytes[index] == 0 && bytes[index + 1] == 0 && bytes[index + 2] == 1 {
                let code = index > bytes.startIndex && bytes[index - 1] == 0 ? index - 1 : index
                starts.append((code, index + 3))
                index += 3
            } else {
                index += 1
            }
        }
        return starts.indices.map {
            bytes[starts[$0].payload..<($0 + 1 < starts.count ? starts[$0 + 1].code : bytes.endIndex)]
        }
    }
}
