// ReportPage: a TraceReport written as one self-contained HTML page: inline
// CSS and SVG, no script, no link to anything. Per download: a header of
// figures and the mirrors (the colors' legend), a timeline with one lane per
// TCP connection, the rate over time, and a map of the file's bytes by
// mirror. Tooltips are SVG <title> elements. The markup is also well-formed
// XML (every element closed, only XML's entities), so tests parse it.

/// The page for a trace.
enum ReportPage {
    /// The SVGs' width, and where their plots start and end: the timeline's
    /// lane labels take the left, and the charts share its time axis.
    private static let width = 1200.0
    private static let plotLeft = 230.0
    private static let plotRight = 1180.0
    private static let rowHeight = 20.0

    /// The page for `report`, read from `source` (the trace's path), written by `writer` (its `otherData`).
    static func html(_ report: TraceReport, source: String, writer: String?, eventsLeftOut: Int64?) -> String {
        let title = report.downloads.count == 1 ? report.downloads[0].name : source
        var page = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8"/>
            <meta name="viewport" content="width=device-width, initial-scale=1"/>
            <title>rangeget report: \(HTMLText.escaped(title))</title>
            <style>\(style)</style>
            </head>
            <body>
            <header>
            <h1>rangeget report</h1>
            <p class="source">Trace <code>\(HTMLText.escaped(source))</code>
            """
        if let writer { page += ", written by rangeget \(HTMLText.escaped(writer))" }
        page += ": \(count(report.downloads.count + report.downloadsLeftOut, "download")), "
        page += "\(count(report.transferCount, "transfer")).</p>\n"
        if let eventsLeftOut, eventsLeftOut > 0 {
            page += "<p class=\"note\">The trace itself lacks \(eventsLeftOut) events: rangeget left them out "
            page += "when the trace reached its size limit.</p>\n"
        }
        if report.downloadsLeftOut > 0 {
            page += "<p class=\"note\">\(count(report.downloadsLeftOut, "more download")) in the trace "
            page += "\(report.downloadsLeftOut == 1 ? "is" : "are") not drawn: the page draws the first "
            page += "\(report.downloads.count).</p>\n"
        }
        page += "</header>\n"
        if report.transferCount == 0 {
            page += "<p class=\"empty\">Nothing to draw: the trace has no transfers.</p>\n"
        }
        for download in report.downloads {
            page += section(download)
        }
        page += "</body>\n</html>\n"
        return page
    }

    private static let style = """
        body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2230;background:#fff;\
        max-width:1240px;margin:24px auto;padding:0 16px}
        h1{font-size:21px;margin:0 0 2px}
        h2{font-size:18px;margin:30px 0 4px;padding-top:16px;border-top:1px solid #d8dce6;word-break:break-all}
        h3{font-size:12px;margin:22px 0 6px;color:#59607a;text-transform:uppercase;letter-spacing:.06em}
        .source{color:#59607a;margin:0}
        code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
        .facts{display:flex;flex-wrap:wrap;gap:6px 32px;margin:10px 0}
        .facts dt{font-size:11px;color:#6b7186;text-transform:uppercase;letter-spacing:.05em}
        .facts dd{margin:0;font-size:17px;font-variant-numeric:tabular-nums}
        table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:4px 0}
        th{font-size:11px;color:#6b7186;text-transform:uppercase;letter-spacing:.05em;font-weight:600}
        th,td{padding:4px 12px 4px 0;text-align:left;border-bottom:1px solid #eceef3;vertical-align:top}
        td.number,th.number{text-align:right}
        td.url{word-break:break-all;max-width:640px}
        .swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:6px}
        .legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:12px;color:#3c4257;margin:6px 0}
        .legend svg{display:inline-block;vertical-align:-3px;margin-right:4px}
        svg{display:block;max-width:100%;height:auto}
        svg text{font:11px system-ui,sans-serif;fill:#3c4257}
        svg .axis-title{font-size:12px;fill:#59607a}
        svg .grid{stroke:#e6e8ee;stroke-width:1}
        svg .axis{stroke:#9aa0b4;stroke-width:1}
        svg .stripe{fill:#f6f7fa}
        .note{background:#fff7e0;border-left:3px solid #e0a800;padding:6px 10px;margin:8px 0}
        .empty{color:#59607a;font-style:italic}
        """

    /// `3 transfers`, `1 transfer`.
    private static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
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
        let cells = items.map { "<div><dt>\($0.0)</dt><dd>\($0.1)</dd></div>" }
        return "<dl class=\"facts\">" + cells.joined() + "</dl>\n"
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

    /// Where time `time` (microseconds) is across the plot.
    private struct TimeScale {
        let start: Double
        let end: Double

        init(_ download: DownloadReport) {
            start = download.start
            end = max(download.end, download.start + 1)
        }

        func x(_ time: Double) -> Double {
            ReportPage.plotLeft + (time - start) / (end - start) * (ReportPage.plotRight - ReportPage.plotLeft)
        }

        /// Ticks at round seconds: where, and their labels.
        var ticks: [(x: Double, label: String)] {
            let (values, step) = AxisTicks.between(start / 1e6, end / 1e6, count: 8)
            return values.map { (x($0 * 1e6), Figure.tick($0, step: step)) }
        }
    }

    private static func timeline(_ download: DownloadReport) -> String {
        let scale = TimeScale(download)
        let rows = [download.row] + download.lanes
        let top = 6.0
        let axisY = top + Double(rows.count) * rowHeight + 4
        let height = axisY + 40
        var svg = "<svg class=\"timeline\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" "
        svg += "width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" "
        svg += "aria-label=\"one lane per TCP connection\">\n"
        for index in rows.indices {
            let y = top + Double(index) * rowHeight
            if index.isMultiple(of: 2) {
                svg += "<rect class=\"stripe\" x=\"0\" y=\"\(Figure.coordinate(y))\" width=\"\(Int(width))\" "
                svg += "height=\"\(Int(rowHeight))\"></rect>\n"
            }
        }
        svg += timeGrid(scale, top: top, bottom: axisY)
        for (index, lane) in rows.enumerated() {
            svg += self.lane(lane, y: top + Double(index) * rowHeight, scale: scale, isRow: index == 0)
        }
        svg += timeAxis(scale, y: axisY)
        return svg + "</svg>\n"
    }

    private static func timeGrid(_ scale: TimeScale, top: Double, bottom: Double) -> String {
        scale.ticks.map { tick in
            let x = Figure.coordinate(tick.x)
            return "<line class=\"grid\" x1=\"\(x)\" y1=\"\(Figure.coordinate(top))\" x2=\"\(x)\" "
                + "y2=\"\(Figure.coordinate(bottom))\"></line>\n"
        }.joined()
    }

    private static func timeAxis(_ scale: TimeScale, y: Double) -> String {
        var svg = "<line class=\"axis\" x1=\"\(plotLeft)\" y1=\"\(Figure.coordinate(y))\" x2=\"\(plotRight)\" "
        svg += "y2=\"\(Figure.coordinate(y))\"></line>\n"
        for tick in scale.ticks {
            let x = Figure.coordinate(tick.x)
            svg += "<line class=\"axis\" x1=\"\(x)\" y1=\"\(Figure.coordinate(y))\" x2=\"\(x)\" "
            svg += "y2=\"\(Figure.coordinate(y + 4))\"></line>"
            svg += "<text x=\"\(x)\" y=\"\(Figure.coordinate(y + 16))\" text-anchor=\"middle\">\(tick.label)</text>\n"
        }
        svg += "<text class=\"axis-title\" x=\"\((plotLeft + plotRight) / 2)\" y=\"\(Figure.coordinate(y + 33))\" "
        svg += "text-anchor=\"middle\">seconds from the trace's start</text>\n"
        return svg
    }

    /// One row of the timeline: its label, its transfers as bars in their
    /// mirror's color, its phases as a strip under them, its markers.
    private static func lane(_ lane: ReportLane, y: Double, scale: TimeScale, isRow: Bool) -> String {
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
        let scale = TimeScale(download)
        let (top, bottom) = (12.0, 232.0)
        let mebibyte = 1_048_576.0
        let highest = download.rates.flatMap { $0.points.map { $0.rate } }.max() ?? 0
        let (values, step) = AxisTicks.between(0, max(highest / mebibyte, 0.001), count: 5)
        let ceiling = max(values.last ?? 1, highest / mebibyte, 0.001)
        func y(_ rate: Double) -> Double { bottom - rate / mebibyte / ceiling * (bottom - top) }
        var svg = "<svg class=\"rate\" viewBox=\"0 0 \(Int(width)) 280\" width=\"\(Int(width))\" height=\"280\" "
        svg += "role=\"img\" aria-label=\"rate over time\">\n"
        for value in values {
            let lineY = Figure.coordinate(y(value * mebibyte))
            svg += "<line class=\"grid\" x1=\"\(plotLeft)\" y1=\"\(lineY)\" x2=\"\(plotRight)\" y2=\"\(lineY)\"></line>"
            svg += "<text x=\"\(plotLeft - 8)\" y=\"\(Figure.coordinate(y(value * mebibyte) + 4))\" "
            svg += "text-anchor=\"end\">\(Figure.tick(value, step: step))</text>\n"
        }
        svg += "<line class=\"axis\" x1=\"\(plotLeft)\" y1=\"\(top)\" x2=\"\(plotLeft)\" y2=\"\(bottom)\"></line>\n"
        svg += "<text class=\"axis-title\" transform=\"translate(\(plotLeft - 52),\((top + bottom) / 2)) rotate(-90)\" "
        svg += "text-anchor=\"middle\">MiB/s</text>\n"
        svg += timeGrid(scale, top: top, bottom: bottom)
        svg += timeAxis(scale, y: bottom)
        // Mirrors first, the total over them.
        for series in download.rates.reversed() where !series.points.isEmpty {
            let points = series.points.map { Figure.coordinate(scale.x($0.at)) + "," + Figure.coordinate(y($0.rate)) }
            let isTotal = series.mirror == nil
            let color = isTotal ? "#1d2230" : MirrorColor.of(series.mirror)
            let name = series.mirror.map { "mirror \($0)" } ?? "total"
            svg += "<polyline class=\"series\" data-series=\"\(name)\" fill=\"none\" stroke=\"\(color)\" "
            svg += "stroke-width=\"\(isTotal ? 2.2 : 1.6)\" stroke-linejoin=\"round\" points=\""
            svg += points.joined(separator: " ") + "\"><title>\(name): up to "
            svg += "\(Figure.rate(series.points.map { $0.rate }.max() ?? 0))</title></polyline>\n"
        }
        svg += "</svg>\n"
        var legend = "<div class=\"legend\">"
        for series in download.rates {
            let color = series.mirror == nil ? "#1d2230" : MirrorColor.of(series.mirror)
            legend += "<span><span class=\"swatch\" style=\"background:\(color)\"></span>"
            legend += (series.mirror.map { "mirror \($0)" } ?? "total") + "</span>"
        }
        return svg + legend + "</div>\n"
    }

    // MARK: - The file's map

    private static func fileMap(_ download: DownloadReport) -> String {
        let size = max(download.fileSize, download.map.last?.range.end ?? 0)
        guard size > 0, !download.map.isEmpty else {
            return "<p class=\"empty\">No bytes written in the trace's transfers.</p>\n"
        }
        let (top, barHeight) = (8.0, 36.0)
        func x(_ offset: Int64) -> Double {
            plotLeft + Double(offset) / Double(size) * (plotRight - plotLeft)
        }
        var svg = "<svg class=\"file-map\" viewBox=\"0 0 \(Int(width)) 96\" width=\"\(Int(width))\" height=\"96\" "
        svg += "role=\"img\" aria-label=\"the file's bytes by mirror\">\n"
        svg += "<text x=\"8\" y=\"\(Figure.coordinate(top + 22))\">\(ByteCount.format(size))</text>\n"
        svg += "<rect x=\"\(plotLeft)\" y=\"\(top)\" width=\"\(plotRight - plotLeft)\" height=\"\(barHeight)\" "
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
        let axisY = top + barHeight + 2
        let unit =
            [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")].first {
                size >= Int64($0.0)
            } ?? (1, "B")
        let (values, step) = AxisTicks.between(0, Double(size) / Double(unit.0), count: 8)
        for value in values {
            let tickX = Figure.coordinate(plotLeft + value * Double(unit.0) / Double(size) * (plotRight - plotLeft))
            svg += "<line class=\"axis\" x1=\"\(tickX)\" y1=\"\(axisY)\" x2=\"\(tickX)\" y2=\"\(axisY + 4)\"></line>"
            svg += "<text x=\"\(tickX)\" y=\"\(axisY + 16)\" text-anchor=\"middle\">\(Figure.tick(value, step: step))"
            svg += "</text>\n"
        }
        svg += "<text class=\"axis-title\" x=\"\((plotLeft + plotRight) / 2)\" y=\"\(axisY + 33)\" "
        svg += "text-anchor=\"middle\">offset in the file (\(unit.1))</text>\n"
        return svg + "</svg>\n"
    }
}
