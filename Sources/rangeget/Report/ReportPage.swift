// ReportPage: a TraceReport written as one self-contained HTML page: inline
// CSS and SVG, no script, no link to anything. Per download: a header of
// figures and the mirrors (the colors' legend), a timeline with one lane per
// TCP connection, the rate over time, and a map of the file's bytes by
// mirror. Tooltips are SVG <title> elements. The markup is also well-formed
// XML (every element closed, only XML's entities), so tests parse it.

/// The page for a trace.
enum ReportPage {
    private static let width = PageShell.width
    private static let rowHeight = 20.0

    /// The page for `report`, read from `source` (the trace's path), written by `writer` (its `otherData`).
    static func html(_ report: TraceReport, source: String, writer: String?, eventsLeftOut: Int64?) -> String {
        let title = report.downloads.count == 1 ? report.downloads[0].name : source
        var header = "<h1>rangeget report</h1>\n"
        header += "<p class=\"source\">Trace <code>\(HTMLText.escaped(source))</code>"
        if let writer { header += ", written by rangeget \(HTMLText.escaped(writer))" }
        header += ": \(PageShell.count(report.downloads.count + report.downloadsLeftOut, "download")), "
        header += "\(PageShell.count(report.transferCount, "transfer")).</p>\n"
        if let eventsLeftOut, eventsLeftOut > 0 {
            header += "<p class=\"note\">The trace itself lacks \(eventsLeftOut) events: rangeget left them out "
            header += "when the trace reached its size limit.</p>\n"
        }
        if report.downloadsLeftOut > 0 {
            header += "<p class=\"note\">\(PageShell.count(report.downloadsLeftOut, "more download")) in the trace "
            header += "\(report.downloadsLeftOut == 1 ? "is" : "are") not drawn: the page draws the first "
            header += "\(report.downloads.count).</p>\n"
        }
        var body = ""
        if report.transferCount == 0 {
            body += "<p class=\"empty\">Nothing to draw: the trace has no transfers.</p>\n"
        }
        for download in report.downloads {
            body += section(download)
        }
        return PageShell.document(title: "rangeget report: " + title, header: header, body: body)
    }

    // MARK: - A download

    private static func section(_ download: DownloadReport) -> String {
        var html = "<section class=\"download\" data-process=\"\(download.process)\">\n"
        html += "<h2>\(HTMLText.escaped(download.name))</h2>\n"
        html += facts(download)
        for sentence in download.leftOut {
            html += "<p class=\"note\">\(HTMLText.escaped(sentence))</p>\n"
        }
        guard download.transferCount > 0 else {
            html += "<p class=\"empty\">Nothing to draw: this download has no transfers in the trace.</p>\n"
            return html + "</section>\n"
        }
        html += mirrorTable(download)
        html += "<h3>Connections</h3>\n" + markerLegend + timeline(download)
        html += "<h3>Rate</h3>\n" + rateChart(download)
        html += "<h3>The file, by mirror</h3>\n" + fileMap(download)
        return html + "</section>\n"
    }

    private static func facts(_ download: DownloadReport) -> String {
        var items: [(String, String)] = [
            ("Duration", Figure.seconds(download.seconds)),
            ("Received", ByteCount.format(download.bytes))
        ]
        if download.fileSize > 0 { items.append(("File size", ByteCount.format(download.fileSize))) }
        if download.seconds > 0 {
            items.append(("Average rate", Figure.rate(Double(download.bytes) / download.seconds)))
        }
        items.append(("TCP connections", String(download.tcpConnections)))
        items.append(("Transfers", String(download.transferCount)))
        for (name, label) in [("stolen", "Steals"), ("raced", "Races"), ("retry", "Retries"), ("stall", "Stalls")] {
            items.append((label, String(download.eventCounts[name] ?? 0)))
        }
        return PageShell.facts(items)
    }

    /// The mirrors with their colors, bytes and transfers: the legend of every chart below.
    private static func mirrorTable(_ download: DownloadReport) -> String {
        var html = "<table class=\"mirrors\"><thead><tr><th>Mirror</th><th>URL</th>"
        html += "<th class=\"number\">Bytes</th><th class=\"number\">Share</th><th class=\"number\">Transfers</th>"
        html += "</tr></thead><tbody>\n"
        for mirror in download.mirrors {
            let share = download.bytes > 0 ? Double(mirror.bytes) * 100 / Double(download.bytes) : 0
            let label = mirror.index >= 0 ? "mirror \(mirror.index)" : "no mirror named"
            html += "<tr data-mirror=\"\(mirror.index)\"><td><span class=\"swatch\" "
            html += "style=\"background:\(MirrorColor.of(mirror.index))\"></span>\(label)</td>"
            html += "<td class=\"url\">\(HTMLText.escaped(mirror.url ?? "-"))</td>"
            html += "<td class=\"number\">\(ByteCount.format(mirror.bytes))</td>"
            html += "<td class=\"number\">\(Figure.fixed(share, 1))%</td>"
            html += "<td class=\"number\">\(mirror.transfers)</td></tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    // MARK: - The timeline

    /// A marker's shape at (`x`, `y`) for an instant named `name`, with
    /// `title` (escaped) as its tooltip.
    private static func marker(_ name: String, x: Double, y: Double, title: String) -> String {
        let (cx, cy) = (Figure.coordinate(x), Figure.coordinate(y))
        let tip = "<title>\(title)</title>"
        func point(_ dx: Double, _ dy: Double) -> String {
            Figure.coordinate(x + dx) + "," + Figure.coordinate(y + dy)
        }
        switch name {
        case "stolen":
            return "<path class=\"marker stolen\" d=\"M\(point(-5, -5))L\(point(5, -5))L\(point(0, 4))Z\" "
                + "fill=\"#1d2230\" stroke=\"#fff\" stroke-width=\"0.8\">\(tip)</path>"
        case "raced":
            return "<path class=\"marker raced\" d=\"M\(point(0, -6))L\(point(5, 0))L\(point(0, 6))L\(point(-5, 0))Z\" "
                + "fill=\"#7b3fe4\" stroke=\"#fff\" stroke-width=\"0.8\">\(tip)</path>"
        case "stall":
            return "<rect class=\"marker stall\" x=\"\(Figure.coordinate(x - 4.5))\" "
                + "y=\"\(Figure.coordinate(y - 4.5))\" "
                + "width=\"9\" height=\"9\" fill=\"#d62728\" stroke=\"#fff\" stroke-width=\"0.8\">\(tip)</rect>"
        case "retry":
            return "<path class=\"marker retry\" "
                + "d=\"M\(point(-4, -4))L\(point(4, 4))M\(point(4, -4))L\(point(-4, 4))\" "
                + "stroke=\"#d62728\" stroke-width=\"2.4\" stroke-linecap=\"round\">\(tip)</path>"
        case "first byte":
            return "<path class=\"marker first-byte\" d=\"M\(point(0, -7))L\(point(0, 6))\" stroke=\"#1d2230\" "
                + "stroke-width=\"1.5\">\(tip)</path>"
        default:
            return "<circle class=\"marker event\" cx=\"\(cx)\" cy=\"\(cy)\" r=\"3.5\" fill=\"#6b7186\" "
                + "stroke=\"#fff\" stroke-width=\"0.8\">\(tip)</circle>"
        }
    }

    private static var markerLegend: String {
        let kinds = [
            ("stolen", "steal (range taken from the connection)"), ("raced", "race (range fetched twice)"),
            ("stall", "stall"), ("retry", "retry"), ("first byte", "first byte"), ("notice", "other event")
        ]
        var html = "<div class=\"legend\">"
        for (kind, label) in kinds {
            html += "<span><svg width=\"14\" height=\"14\" viewBox=\"0 0 14 14\">"
            html += marker(kind, x: 7, y: 7, title: label) + "</svg>\(label)</span>"
        }
        html += "<span><svg width=\"22\" height=\"14\" viewBox=\"0 0 22 14\"><rect x=\"1\" y=\"5\" width=\"10\" "
        html += "height=\"4\" fill=\"#1d2230\"></rect><rect x=\"11\" y=\"5\" width=\"10\" height=\"4\" "
        html += "fill=\"#9aa0b4\"></rect></svg>TCP connect, then TLS</span>"
        return html + "</div>\n"
    }

    /// A frame whose x axis is the download's time (microseconds), from `top` to `bottom`.
    private static func timeFrame(_ download: DownloadReport, top: Double, bottom: Double) -> ChartFrame {
        ChartFrame(x: download.start, to: max(download.end, download.start + 1), top: top, bottom: bottom)
    }

    /// Ticks at round seconds.
    private static func timeTicks(_ frame: ChartFrame) -> [(value: Double, label: String)] {
        frame.xTicks(count: 8, scale: 1e6)
    }

    private static let timeTitle = "seconds from the trace's start"

    private static func timeline(_ download: DownloadReport) -> String {
        let rows = [download.row] + download.lanes
        let top = 6.0
        let axisY = top + Double(rows.count) * rowHeight + 4
        let scale = timeFrame(download, top: top, bottom: axisY)
        let height = axisY + 40
        var svg = ChartFrame.open("timeline", height: height, label: "one lane per TCP connection")
        for index in rows.indices {
            let y = top + Double(index) * rowHeight
            if index.isMultiple(of: 2) {
                svg += "<rect class=\"stripe\" x=\"0\" y=\"\(Figure.coordinate(y))\" width=\"\(Int(width))\" "
                svg += "height=\"\(Int(rowHeight))\"></rect>\n"
            }
        }
        svg += scale.verticalGrid(timeTicks(scale).map(\.value))
        for (index, lane) in rows.enumerated() {
            svg += self.lane(lane, y: top + Double(index) * rowHeight, scale: scale, isRow: index == 0)
        }
        svg += scale.bottomAxis(timeTicks(scale), title: timeTitle)
        return svg + "</svg>\n"
    }

    /// One row of the timeline: its label, its transfers as bars in their
    /// mirror's color, its phases as a strip under them, its markers.
    private static func lane(_ lane: ReportLane, y: Double, scale: ChartFrame, isRow: Bool) -> String {
        var svg = isRow ? "<g class=\"download-row\">" : "<g class=\"lane\" data-lane=\"\(lane.id)\">"
        let label = lane.name.count > 34 ? String(lane.name.prefix(33)) + "..." : lane.name
        svg += "<text x=\"8\" y=\"\(Figure.coordinate(y + 14))\">\(HTMLText.escaped(label))"
        svg += "<title>\(HTMLText.escaped(lane.name))</title></text>\n"
        for transfer in lane.transfers {
            let x = scale.x(transfer.start)
            let barWidth = max(1, scale.x(transfer.end) - x)
            svg += "<rect class=\"transfer\" x=\"\(Figure.coordinate(x))\" y=\"\(Figure.coordinate(y + 3))\" "
            svg += "width=\"\(Figure.coordinate(barWidth))\" height=\"12\" rx=\"1.5\" "
            svg += "fill=\"\(MirrorColor.of(transfer.mirrorIndex))\"><title>\(tooltip(transfer, lane: lane))"
            svg += "</title></rect>\n"
        }
        for phase in lane.phases {
            let x = scale.x(phase.start)
            let phaseWidth = max(1, scale.x(phase.end) - x)
            let isSync = phase.name == "sync"
            let color = phase.name == "connect" ? "#1d2230" : isSync ? "#b8bdcc" : "#9aa0b4"
            svg += "<rect class=\"phase\" x=\"\(Figure.coordinate(x))\" "
            svg += "y=\"\(Figure.coordinate(y + (isSync ? 3 : 15)))\" width=\"\(Figure.coordinate(phaseWidth))\" "
            svg += "height=\"\(isSync ? 12 : 4)\" fill=\"\(color)\"><title>\(HTMLText.escaped(phase.name)): "
            svg += "\(Figure.seconds((phase.end - phase.start) / 1e6))</title></rect>\n"
        }
        for instant in lane.markers {
            svg += marker(instant.name, x: scale.x(instant.at), y: y + 9, title: tooltip(instant)) + "\n"
        }
        return svg + "</g>\n"
    }

    private static func tooltip(_ transfer: TraceTransfer, lane: ReportLane) -> String {
        var lines = [HTMLText.escaped(transfer.name)]
        if let mirror = transfer.mirror { lines.append("mirror: " + HTMLText.escaped(mirror)) }
        if let connection = transfer.connection {
            lines.append("connection \(connection) on " + HTMLText.escaped(lane.name))
        }
        var carried = "\(Figure.seconds(transfer.duration / 1e6))"
        if let bytes = transfer.bytes {
            carried = ByteCount.format(bytes) + " in " + carried
            if transfer.duration > 0 { carried += ", " + Figure.rate(Double(bytes) / (transfer.duration / 1e6)) }
        }
        lines.append(carried)
        if let written = transfer.written { lines.append("written: [\(written.start), \(written.end))") }
        var outcome: [String] = []
        if let value = transfer.outcome { outcome.append(HTMLText.escaped(value)) }
        if let status = transfer.status { outcome.append("status " + HTMLText.escaped(status)) }
        if let http = transfer.http { outcome.append("HTTP/" + HTMLText.escaped(http)) }
        if !outcome.isEmpty { lines.append(outcome.joined(separator: ", ")) }
        var timing: [String] = []
        if transfer.newConnection == true { timing.append("new connection") }
        if let connect = transfer.connect, connect > 0 { timing.append("connect " + Figure.seconds(connect)) }
        if let tls = transfer.tls, tls > 0 { timing.append("TLS " + Figure.seconds(tls)) }
        if let firstByte = transfer.firstByte { timing.append("first byte " + Figure.seconds(firstByte)) }
        if !timing.isEmpty { lines.append(timing.joined(separator: ", ")) }
        return lines.joined(separator: "\n")
    }

    private static func tooltip(_ instant: TraceInstant) -> String {
        var lines = ["\(HTMLText.escaped(instant.name)) at \(Figure.seconds(instant.at / 1e6))"]
        for (key, value) in instant.details.prefix(12) {
            lines.append(HTMLText.escaped(key) + ": " + HTMLText.escaped(value))
        }
        return lines.joined(separator: "\n")
    }

    // MARK: - The rate

    private static func rateChart(_ download: DownloadReport) -> String {
        guard download.rates.contains(where: { !$0.points.isEmpty }) else {
            return "<p class=\"empty\">No rate samples in the trace.</p>\n"
        }
        let mebibyte = 1_048_576.0
        let highest = download.rates.flatMap { $0.points.map { $0.rate } }.max() ?? 0
        let (frame, values, step) = timeFrame(download, top: 12, bottom: 232).withValueTicks(
            highest: highest / mebibyte)
        var svg = ChartFrame.open("rate", height: 280, label: "rate over time")
        svg += frame.valueAxis(values, step: step, title: "MiB/s")
        svg += frame.verticalGrid(timeTicks(frame).map(\.value))
        svg += frame.bottomAxis(timeTicks(frame), title: timeTitle)
        // Mirrors first, the total over them.
        for series in download.rates.reversed() where !series.points.isEmpty {
            let isTotal = series.mirror == nil
            let name = series.mirror.map { "mirror \($0)" } ?? "total"
            svg += frame.line(
                series.points.map { ($0.at, $0.rate / mebibyte) },
                attributes: "class=\"series\" data-series=\"\(name)\"",
                color: isTotal ? "#1d2230" : MirrorColor.of(series.mirror), width: isTotal ? 2.2 : 1.6,
                title: "\(name): up to \(Figure.rate(series.points.map { $0.rate }.max() ?? 0))")
        }
        svg += "</svg>\n"
        return svg
            + PageShell.legend(
                download.rates.map { series in
                    (
                        series.mirror == nil ? "#1d2230" : MirrorColor.of(series.mirror),
                        series.mirror.map { "mirror \($0)" } ?? "total"
                    )
                })
    }

    // MARK: - The file's map

    private static func fileMap(_ download: DownloadReport) -> String {
        let size = max(download.fileSize, download.map.last?.range.end ?? 0)
        guard size > 0, !download.map.isEmpty else {
            return "<p class=\"empty\">No bytes written in the trace's transfers.</p>\n"
        }
        let (top, barHeight) = (8.0, 36.0)
        func x(_ offset: Int64) -> Double {
            PageShell.plotLeft + Double(offset) / Double(size) * (PageShell.plotRight - PageShell.plotLeft)
        }
        var svg = ChartFrame.open("file-map", height: 96, label: "the file's bytes by mirror")
        svg += "<text x=\"8\" y=\"\(Figure.coordinate(top + 22))\">\(ByteCount.format(size))</text>\n"
        svg +=
            "<rect x=\"\(PageShell.plotLeft)\" y=\"\(top)\" width=\"\(PageShell.plotRight - PageShell.plotLeft)\" height=\"\(barHeight)\" "
        svg += "fill=\"#eceef3\"><title>not written by a transfer in the trace</title></rect>\n"
        for piece in download.map {
            let left = x(piece.range.start)
            let connections = piece.connections.sorted().prefix(16).map(String.init).joined(separator: ", ")
            svg += "<rect class=\"range\" data-mirror=\"\(piece.mirror)\" data-bytes=\"\(piece.range.count)\" "
            svg += "x=\"\(Figure.coordinate(left))\" y=\"\(top)\" "
            svg += "width=\"\(Figure.coordinate(max(0.5, x(piece.range.end) - left)))\" height=\"\(barHeight)\" "
            svg += "fill=\"\(MirrorColor.of(piece.mirror))\"><title>bytes [\(piece.range.start), "
            svg += "\(piece.range.end)): \(ByteCount.format(piece.range.count)) from "
            svg += piece.mirror >= 0 ? "mirror \(piece.mirror)" : "no mirror named"
            if !connections.isEmpty {
                svg += ", connection\(piece.connections.count == 1 ? "" : "s") \(connections)"
                if piece.connections.count > 16 { svg += ", ..." }
            }
            svg += "</title></rect>\n"
        }
        let unit =
            [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")].first {
                size >= Int64($0.0)
            } ?? (1, "B")
        let axis = ChartFrame(x: 0, to: Double(size) / Double(unit.0), top: top, bottom: top + barHeight + 2)
        svg += axis.bottomAxis(axis.xTicks(count: 8), title: "offset in the file (\(unit.1))")
        return svg + "</svg>\n"
    }
}
