/// Which bands of a frame need grabbing again: a band is `bandRows` rows of the capture area.
struct DirtyBands {
    private(set) var bands: [Bool]
    let bandRows: Int
    let height: Int

    init(height: Int, bandRows: Int) {
        self.height = height
        self.bandRows = bandRows
        bands = Array(repeating: true, count: (height + bandRows - 1) / bandRows)
    }

    var count: Int { bands.count }
    var isEmpty: Bool { !bands.contains(true) }
    subscript(band: Int) -> Bool { bands[band] }

    /// The rows of `band`.
    func rows(_ band: Int) -> Range<Int> { band * bandRows..<min(height, (band + 1) * bandRows) }

    mutating func markAll() { for i in bands.indices { bands[i] = true } }
    mutating func clear() { for i in bands.indices { bands[i] = false } }

    /// Marks the bands that rows `top..<bottom` (capture-area coordinates, may exceed it) touch.
    mutating func mark(rows top: Int, _ bottom: Int) {
        let top = max(0, top)
        let bottom = min(height, bottom)
        guard bottom > top else { return }
        for band in top / bandRows...(bottom - 1) / bandRows { bands[band] = true }
    }
}
