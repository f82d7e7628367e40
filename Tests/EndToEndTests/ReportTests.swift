// `rangeget report TRACE -o PAGE.html` (issue 42): a trace drawn as one
// self-contained page, checked as XML: one lane element per traced TCP
// connection, one bar per transfer, each marker on the lane of the
// connection it names, the trace's text escaped, nothing loaded from
// anywhere. And the trace is untrusted input: every hostile or broken file
// here gets one line on stderr and exit 2 (not a trace) or 4 (cannot read
// or write), never a crash or a page of garbage.
import Foundation
import FoundationXML
import XCTest

final class ReportTests: EndToEndTestCase {
    /// Runs `rangeget report` on a trace whose bytes are `data`; the run and the page's path.
    private func report(_ data: Data, arguments: [String] = []) throws -> (run: Run, page: String) {
        let trace = path("trace.json")
        try data.write(to: URL(fileURLWithPath: trace))
        let page = path("trace.html")
        let run = try CLI.run(["report", trace] + arguments, in: directory, timeout: 60)
        return (run, page)
    }

    private func report(_ text: String) throws -> Run { try report(Data(text.utf8)).run }

    func testATraceIsDrawnOneLanePerTCPConnectionWithEveryTransferAndMarker() throws {
        let trace = SyntheticTrace.standard
        let (run, pagePath) = try report(trace.data)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
        let html = try String(contentsOfFile: pagePath, encoding: .utf8)
        let page = try PageOutline(html)

        XCTAssertEqual(Set(page.lanes), trace.transferLanes, "one lane element per lane with a transfer")
        XCTAssertEqual(page.lanes.count, trace.transferLanes.count, "no lane twice")
        XCTAssertEqual(page.count(ofClass: "transfer"), trace.transferCount, "one bar per transfer")
        XCTAssertEqual(page.count(ofClass: "range"), 30, "the file's map: one range per piece (the mirrors alternate)")
        // Each marker on the lane of the connection it names, when it happened.
        XCTAssertEqual(page.markers["stolen"], [SyntheticTrace.lanes[2]!])
        XCTAssertEqual(page.markers["raced"], [SyntheticTrace.lanes[3]!])
        XCTAssertEqual(page.markers["stall"], [SyntheticTrace.lanes[4]!], "the stall, not also its retry")
        XCTAssertEqual(page.markers["retry"], [SyntheticTrace.lanes[5]!])
        XCTAssertEqual(page.markers["first-byte"]?.count, 30)
        XCTAssertEqual(page.markers["event"], [0, 0, 0], "probed, connection count, mirror dropped; no checkpoint")
        XCTAssertEqual(page.count(ofClass: "phase"), 11, "connect and TLS on five lanes, and the sync")
        XCTAssertEqual(page.count(ofClass: "series"), 4, "the total and three mirrors")
        // The header's figures.
        XCTAssertTrue(html.contains("<dt>TCP connections</dt><dd>5</dd>"), html)
        XCTAssertTrue(html.contains("<dt>Transfers</dt><dd>31</dd>"))
        XCTAssertTrue(html.contains("<dt>File size</dt><dd>30.0 MiB</dd>"))
        XCTAssertTrue(html.contains("<dt>Steals</dt><dd>1</dd>"))
        XCTAssertTrue(html.contains("<dt>Duration</dt><dd>2.50 s</dd>"), "first event (2 ms) to last sample (2.5 s)")
        for (index, url) in SyntheticTrace.mirrors.enumerated() {
            XCTAssertTrue(page.text.contains(url), "the legend names mirror \(index): \(url)")
        }
        XCTAssertTrue(html.contains("MiB/s") && html.contains("seconds from the trace"), "labelled axes")

        // The trace's text is escaped wherever it lands.
        XCTAssertFalse(html.contains(SyntheticTrace.hostile))
        XCTAssertFalse(html.contains("<b>"))
        XCTAssertTrue(html.contains("big&lt;b&gt;&amp;&quot;&#39;.iso"), "the file name, escaped")
        XCTAssertTrue(html.contains("https://b.example/&lt;b&gt;&amp;&quot;&#39;/big.iso"), "the mirror URL, escaped")
        XCTAssertTrue(page.text.contains(SyntheticTrace.fileName), "and reads back as it was")
        assertSelfContained(html)
    }

    /// Nothing the page would load: no script, stylesheet, image, font or link.
    private func assertSelfContained(_ html: String, file: StaticString = #filePath, line: UInt = #line) {
        for reference in ["<script", "src=", "href=", "url(", "@import", "<link", "<img", "<iframe", "<object"] {
            XCTAssertFalse(html.lowercased().contains(reference), "the page has \(reference)", file: file, line: line)
        }
        // URLs appear only as text: each one is preceded by text, never by an attribute's quote.
        XCTAssertNil(html.firstMatch(of: /="(https?:)/), "a URL in an attribute", file: file, line: line)
    }

    /// The file's map: each range says its mirror and bytes; per mirror
    /// they add up to what its transfers wrote, and in all to the file.
    func testTheFileMapsBytesPerMirrorAddUpToWhatTheTransfersWrote() throws {
        let trace = SyntheticTrace.standard
        let (run, pagePath) = try report(trace.data)
        XCTAssertEqual(run.status, 0, run.stderr)
        let html = try String(contentsOfFile: pagePath, encoding: .utf8)
        var mapped: [Int: Int64] = [:]
        for match in html.matches(of: /<rect class="range" data-mirror="(-?\d+)" data-bytes="(\d+)"/) {
            mapped[Int(match.1)!, default: 0] += Int64(match.2)!
        }
        var written: [Int: Int64] = [:]
        for event in trace.events where event["cat"] as? String == "transfer" {
            let args = event["args"] as! SyntheticTrace.Object
            // Int64 for the pieces, Int for the refused transfer's [0, 0].
            let range = (args["written"] as! [Any]).map { $0 as? Int64 ?? Int64($0 as! Int) }
            if range[1] > range[0] { written[args["mirrorIndex"] as! Int, default: 0] += range[1] - range[0] }
        }
        XCTAssertEqual(mapped, written, "bytes per mirror on the map")
        XCTAssertEqual(mapped.values.reduce(0, +), SyntheticTrace.fileSize, "the whole file, once")
        XCTAssertEqual(
            mapped, [0: 12 * SyntheticTrace.piece, 1: 12 * SyntheticTrace.piece, 2: 6 * SyntheticTrace.piece])
    }

    /// Bytes that are not UTF-8, in a string or anywhere: refused, naming where.
    func testATraceThatIsNotUTF8IsRefused() throws {
        let name = Data(#"{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": ""#.utf8)
        let cases: [(Data, String)] = [
            (name + Data([0xFF, 0xFE]) + Data(#""}}]}"#.utf8), "byte 81 is not UTF-8"),
            (Data([0xFF, 0xFE, 0x00, 0x7B]), "byte 0 is not UTF-8"),
            (Data(#"{"traceEvents": []}"#.utf8) + Data([0xC3]), "byte 19 is not UTF-8")
        ]
        for (data, expected) in cases {
            let run = try report(data).run
            XCTAssertEqual(run.status, 2, run.stderr)
            assertOneLine(run.stderr, contains: expected, for: "\(Array(data.prefix(8)))")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("trace.html")))
        }
    }

    func testTheDefaultPageNameAndStdout() throws {
        let trace = path("run.json")
        try SyntheticTrace.standard.data.write(to: URL(fileURLWithPath: trace))
        let run = try CLI.run(["report", trace], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path("run.html")), "TRACE.json makes TRACE.html")
        let piped = try CLI.run(["report", "-o", "-", trace], in: directory)
        XCTAssertEqual(piped.status, 0, piped.stderr)
        XCTAssertEqual(piped.stdout, try String(contentsOfFile: path("run.html"), encoding: .utf8))
        let same = try CLI.run(["report", "-o", trace, trace], in: directory)
        XCTAssertEqual(same.status, 2)
        XCTAssertTrue(same.stderr.contains("is the trace itself"), same.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: trace)), SyntheticTrace.standard.data, "untouched")
    }

    /// A trace with no transfers: a page that says there is nothing to
    /// draw, a note on stderr, exit 0 (the trace is valid; it is empty).
    func testAnEmptyTraceMakesAPageThatSaysThereIsNothingToDraw() throws {
        let named = #"{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "f"}}]}"#
        for text in [#"{"traceEvents": []}"#, named] {
            let (run, pagePath) = try report(Data(text.utf8))
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertTrue(run.stderr.contains("has no transfers"), run.stderr)
            let html = try String(contentsOfFile: pagePath, encoding: .utf8)
            XCTAssertTrue(html.contains("Nothing to draw"), html)
            XCTAssertEqual(try PageOutline(html).lanes, [])
        }
    }

    // MARK: - Hostile and broken traces

    /// What each file gets: exit 2 and one line on stderr naming what is wrong.
    func testAFileThatIsNotATraceIsRefusedInOneLine() throws {
        let event = #"{"ph": "X", "cat": "transfer", "name": "GET", "pid": 1, "tid": 5, "ts": 10, "dur": 5"#
        /// A trace of that one event, with `old` in it replaced by `new`.
        func changed(_ old: String, _ new: String) -> String {
            #"{"traceEvents": ["# + event.replacing(old, with: new) + "}]}"
        }
        /// A trace of that one event, with `args`.
        func with(args: String) -> String { #"{"traceEvents": ["# + event + #", "args": "# + args + "}]}" }
        /// A trace of the one event `text`.
        func only(_ text: String) -> String { #"{"traceEvents": ["# + text + "]}" }
        let rate = #"{"ph": "C", "name": "rate", "pid": 1, "ts": 1, "args": "#
        let cases: [(String, String)] = [
            ("", "not JSON"),
            ("hello", "not JSON"),
            (#"{"traceEvents": [{"ph": "X""#, "not JSON"),
            ("[1, 2]", "not an object with a \"traceEvents\" array"),
            (#"{"events": []}"#, "without a \"traceEvents\" array"),
            (#"{"traceEvents": 5}"#, "\"traceEvents\" is not an array"),
            (#"{"traceEvents": {"ph": "X"}}"#, "\"traceEvents\" is not an array"),
            (only("1"), "traceEvents[0] is not an object"),
            (only(#"{"pid": 1}"#), "traceEvents[0] has no \"ph\""),
            (only(#"{"ph": 5}"#), "traceEvents[0].ph is a number, not a string"),
            (only(#"{"ph": "X", "tid": 1, "ts": 1, "dur": 1}"#), "has no \"pid\""),
            (changed(#""ts": 10"#, #""ts": "10""#), "traceEvents[0].ts is a string"),
            (changed(#""ts": 10"#, #""ts": -1"#), "traceEvents[0].ts is -1.0"),
            (changed(#""ts": 10"#, #""ts": 1e300"#), "traceEvents[0].ts is 1e+300"),
            (changed(#""ts": 10"#, #""ts": 1e400"#), "is not a trace"),
            (changed(#""dur": 5"#, #""dur": -5"#), "traceEvents[0].dur"),
            (changed(#""dur": 5"#, #""dur": null"#), "has no \"dur\""),
            (changed(#""tid": 5"#, #""tid": 1.5"#), "traceEvents[0].tid is 1.5"),
            (changed(#""pid": 1"#, #""pid": true"#), "traceEvents[0].pid is true or false"),
            (with(args: "[1]"), "traceEvents[0].args is an array, not an object"),
            (with(args: #"{"written": [10, 5]}"#), "traceEvents[0].args.written starts at 10, past its end 5"),
            (with(args: #"{"written": [-1, 5]}"#), "traceEvents[0].args.written is not"),
            (with(args: #"{"written": [1, 2, 3]}"#), "traceEvents[0].args.written is not"),
            (with(args: #"{"range": "0-5"}"#), "traceEvents[0].args.range is a string"),
            (with(args: #"{"mirrorIndex": "1"}"#), "traceEvents[0].args.mirrorIndex is a string"),
            (with(args: #"{"bytes": -3}"#), "traceEvents[0].args.bytes is -3.0"),
            (with(args: #"{"mirror": {"url": 1}}"#), "traceEvents[0].args.mirror is an object"),
            (only(rate + #"{"total": "fast"}}"#), "args.total is a string"),
            (only(rate + #"{"mirror 0": -1}}"#), "args.mirror 0 is -1.0"),
            (only(#"{"ph": "M", "name": "thread_name", "pid": 1, "args": {"name": "x"}}"#), "has no \"tid\""),
            (only(#"{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": 7}}"#), "args.name is a number")
        ]
        for (text, expected) in cases {
            let run = try report(text)
            XCTAssertEqual(run.status, 2, "\(text): \(run.stderr)")
            assertOneLine(run.stderr, contains: expected, for: text)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("trace.html")), "no page for \(text)")
        }
    }

    private func assertOneLine(
        _ stderr: String, contains expected: String, for input: String, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        let lines = stderr.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 2, "one line for \(input.prefix(200)): \(stderr)", file: file, line: line)
        XCTAssertTrue(stderr.hasPrefix("rangeget: "), stderr, file: file, line: line)
        XCTAssertTrue(
            stderr.contains(expected), "\(input.prefix(200)): \(stderr) lacks \(expected)", file: file, line: line)
        XCTAssertLessThan(stderr.count, 400, "a short line: \(stderr)", file: file, line: line)
    }

    /// JSON nested far deeper than any trace: refused, not a stack overflow.
    func testDeeplyNestedJSONIsRefused() throws {
        let depth = 200_000
        let text =
            #"{"traceEvents": [{"ph": "X", "args": "# + String(repeating: "[", count: depth)
            + String(repeating: "]", count: depth) + "}]}"
        let run = try report(text)
        XCTAssertEqual(run.status, 2, run.stderr)
        assertOneLine(run.stderr, contains: "is not a trace", for: "nested arrays")
    }

    /// Control characters, bidi overrides and markup in every text: the page
    /// stays well-formed and shows none of them raw.
    func testTextFromTheTraceIsEscapedEverywhere() throws {
        let nasty = "a\u{1}b\u{202E}c</svg><script>alert(1)</script>&amp;\u{7F}\"'"
        var trace = SyntheticTrace.standard
        for index in trace.events.indices {
            if var args = trace.events[index]["args"] as? [String: Any] {
                for key in ["name", "mirror", "reason", "outcome", "http", "cause"] where args[key] is String {
                    args[key] = nasty
                }
                trace.events[index]["args"] = args
            }
            if trace.events[index]["cat"] as? String == "transfer" { trace.events[index]["name"] = nasty }
        }
        let (run, pagePath) = try report(trace.data)
        XCTAssertEqual(run.status, 0, run.stderr)
        let html = try String(contentsOfFile: pagePath, encoding: .utf8)
        let page = try PageOutline(html)
        XCTAssertEqual(Set(page.lanes), trace.transferLanes)
        XCTAssertFalse(html.contains("<script"))
        XCTAssertFalse(html.contains("</svg><"))
        XCTAssertFalse(html.unicodeScalars.contains { $0 == "\u{1}" || $0 == "\u{202E}" || $0 == "\u{7F}" })
        XCTAssertTrue(html.contains("&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;"))
        assertSelfContained(html)
    }

    /// 20,000 lanes: 512 drawn, and the page says how many were left out.
    func testLanesBeyondTheLimitAreLeftOutAndSaidSo() throws {
        var text = #"{"traceEvents": ["#
        let lanes = 20_000
        for lane in 1...lanes {
            if lane > 1 { text += "," }
            text += #"{"ph":"X","cat":"transfer","name":"GET","pid":1,"tid":\#(lane),"ts":\#(lane),"dur":10,"#
            text += #""args":{"connection":\#(lane),"mirrorIndex":\#(lane % 3),"#
            text += #""written":[\#(lane * 10),\#(lane * 10 + 10)]}}"#
        }
        text += "]}"
        let (run, pagePath) = try report(Data(text.utf8))
        XCTAssertEqual(run.status, 0, run.stderr)
        let html = try String(contentsOfFile: pagePath, encoding: .utf8)
        let page = try PageOutline(html)
        XCTAssertEqual(page.lanes.count, 512)
        XCTAssertEqual(page.lanes, Array(1...512), "the first 512 to start, in order")
        XCTAssertTrue(
            html.contains("19488 of 20000 lanes (and their 19488 transfers) are not drawn"), String(html.prefix(3000)))
        XCTAssertLessThan(html.utf8.count, 2 << 20, "the page stays small")
    }

    /// Many processes: 20 downloads drawn, the rest counted.
    func testDownloadsBeyondTheLimitAreCounted() throws {
        let events = (1...50).map { pid in
            #"{"ph":"X","cat":"transfer","name":"GET","pid":\#(pid),"tid":7,"ts":0,"dur":10,"#
                + #""args":{"written":[0,10]}}"#
        }
        let (run, pagePath) = try report(Data(("{\"traceEvents\": [" + events.joined(separator: ",") + "]}").utf8))
        XCTAssertEqual(run.status, 0, run.stderr)
        let html = try String(contentsOfFile: pagePath, encoding: .utf8)
        XCTAssertEqual(try PageOutline(html).lanes.count, 20)
        XCTAssertTrue(html.contains("30 more downloads in the trace are not drawn"))
    }

    /// A file over 256 MiB is refused from its size, before it is read.
    func testAFileOver256MiBIsRefusedBeforeItIsRead() throws {
        let trace = path("huge.json")
        XCTAssertTrue(FileManager.default.createFile(atPath: trace, contents: Data("{".utf8)))
        XCTAssertEqual(truncate(trace, (256 << 20) + 1), 0, "a sparse file: no disk used")
        let started = Date()
        let run = try CLI.run(["report", trace], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 2, run.stderr)
        assertOneLine(run.stderr, contains: "larger than 256 MiB", for: "a 256 MiB + 1 file")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "refused without reading it")
    }

    /// Exit 4: the trace cannot be read, or the page cannot be written.
    func testAFileThatCannotBeReadOrWrittenIsExit4() throws {
        let trace = path("t.json")
        try SyntheticTrace.standard.data.write(to: URL(fileURLWithPath: trace))
        let cases: [([String], String)] = [
            (["report", path("missing.json")], "cannot read"),
            (["report", "-o", path("x.html"), directory], "cannot read"),
            (["report", "-o", path("no/such/dir/x.html"), trace], "cannot write"),
            (["report", "-o", directory, trace], "cannot write")
        ]
        for (arguments, expected) in cases {
            let run = try CLI.run(arguments, in: directory)
            XCTAssertEqual(run.status, 4, "\(arguments): \(run.stderr)")
            assertOneLine(run.stderr, contains: expected, for: arguments.joined(separator: " "))
        }
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".rangeget-") }, [],
            "no half-written page left behind")
        let usage = try CLI.run(["report"], in: directory)
        XCTAssertEqual(usage.status, 2)
        assertOneLine(usage.stderr, contains: "report needs one TRACE file", for: "no operand")
    }
}

/// What a page holds, read as XML: its lanes in order, each timeline
/// marker's lane (0: the download's row), how many elements have each
/// class, and its text. Throws when the page is not well-formed.
struct PageOutline {
    var lanes: [Int] = []
    var markers: [String: [Int]] = [:]
    var classes: [String: Int] = [:]
    var text = ""

    struct NotWellFormed: Error, CustomStringConvertible {
        var description: String
    }

    init(_ html: String) throws {
        let reader = Reader()
        let parser = XMLParser(data: Data(html.utf8))
        parser.delegate = reader
        guard parser.parse() else {
            throw NotWellFormed(
                description: "the page is not well-formed XML at line \(parser.lineNumber): "
                    + "\(parser.parserError.map { "\($0)" } ?? "?")")
        }
        lanes = reader.lanes
        markers = reader.markers
        classes = reader.classes
        text = reader.text
    }

    func count(ofClass name: String) -> Int { classes[name] ?? 0 }

    private final class Reader: NSObject, XMLParserDelegate {
        var lanes: [Int] = []
        var markers: [String: [Int]] = [:]
        var classes: [String: Int] = [:]
        var text = ""
        /// Each open element's lane (0: none) and whether it is in the timeline, innermost last.
        private var stack: [(lane: Int, inTimeline: Bool)] = []

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let names = (attributes["class"] ?? "").split(separator: " ").map(String.init)
            var context = stack.last ?? (0, false)
            if element == "svg" { context.inTimeline = names.contains("timeline") }
            if let value = attributes["data-lane"], let id = Int(value) {
                lanes.append(id)
                context.lane = id
            }
            stack.append(context)
            for name in names { classes[name, default: 0] += 1 }
            if context.inTimeline, names.first == "marker", names.count > 1 {
                markers[names[1], default: []].append(context.lane)
            }
        }

        func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
            stack.removeLast()
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }
    }
}
