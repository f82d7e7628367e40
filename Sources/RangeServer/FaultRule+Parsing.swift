// The compact text form of fault rules, for the command line and benchmarks.
import FoundationEssentials
import SystemSupport

/// A fault rule spec that could not be read, and why.
public struct FaultSpecError: Error, Equatable, CustomStringConvertible {
    /// The spec as given.
    public var spec: String
    /// What is wrong with it.
    public var reason: String

    /// `invalid fault spec 'SPEC': REASON`.
    public var description: String { "invalid fault spec '\(spec)': \(reason)" }
}

extension FaultRule {
    /// The fault names with their arguments, e.g. `cut:BYTES`, in the order
    /// a help text should list them.
    public static let faultSynopses = [
        "ignore-range", "range-shift:BYTES", "range-total:BYTES", "range-inverted", "cut:BYTES",
        "cut-random:SEED", "stall:BYTES", "status:CODE[:RETRY_AFTER]", "head-status:CODE", "head-hang", "hang",
        "delay:MS", "head-no-length", "no-accept-ranges", "accept-ranges-none", "gzip", "multipart", "chunked",
        "change-content", "change-size:BYTES", "weak-etag", "redirect:LOCATION[:3XX]",
        "retry-after:CODE:VALUE", "claim-length:DIGITS", "overlong:BYTES", "header:NAME:VALUE"
    ]

    /// The triggers, for help texts.
    public static let triggerSynopses = [
        "always", "request=N", "from=N", "range-start=OFFSET", "p=P[,seed=S]", "method=METHOD"
    ]

    /// Reads a rule from its compact text form, `FAULT[:ARG[:ARG]][@TRIGGER]`.
    ///
    /// Faults: `ignore-range`, `range-shift:BYTES` (may be negative),
    /// `range-total:BYTES`, `range-inverted`, `cut:BYTES`, `cut-random:SEED`,
    /// `stall:BYTES`, `status:CODE[:RETRY_AFTER]`, `head-status:CODE`,
    /// `head-hang`, `hang` (any method), `delay:MS` (any method), `head-no-length`, `no-accept-ranges`,
    /// `accept-ranges-none`, `gzip`, `multipart`, `chunked`,
    /// `change-content`, `change-size:BYTES`, `weak-etag`,
    /// `redirect:LOCATION[:3XX]` (LOCATION may contain `:`; a last `:3XX`
    /// field is the status, 302 by default), `retry-after:CODE:VALUE`,
    /// `claim-length:DIGITS`, `overlong:BYTES`, `header:NAME:VALUE` (VALUE
    /// may contain `:`, and `%XX` escapes, e.g. `%1B` for ESC; CR and LF are
    /// refused).
    ///
    /// Triggers: `always` (the default), `request=N` (only the N-th request
    /// to the path, 1-based, HEAD included), `from=N`, `range-start=OFFSET`,
    /// `p=P[,seed=S]` (seeded, deterministic; seed 1 by default),
    /// `method=METHOD`.
    ///
    /// Examples: `stall:1048576@request=3`, `cut-random:7@p=0.3,seed=1`,
    /// `status:503:2@from=2`, `head-status:405`, `redirect:/other@request=1`.
    public init(parsing spec: String) throws(FaultSpecError) {
        let text = spec.trimmingSpaces()
        // The trigger follows the last '@', unless what follows does not look
        // like a trigger (an '@' inside a redirect URL).
        var faultText = Substring(text)
        var triggerText: String?
        if let at = text.lastIndex(of: "@"), Self.looksLikeTrigger(text[text.index(after: at)...]) {
            triggerText = String(text[text.index(after: at)...])
            faultText = text[..<at]
        }
        let fields = faultText.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let name = fields[0]
        do throws(ArgumentError) {
            guard let fault = try Self.fault(named: name, arguments: Array(fields.dropFirst())) else {
                let known = Self.faultSynopses.map { $0.prefix { $0 != ":" } }.joined(separator: ", ")
                throw .message(
                    name.isEmpty ? "missing fault name (known: \(known))" : "unknown fault '\(name)' (known: \(known))")
            }
            self.init(fault, when: try triggerText.map(Self.trigger) ?? .always)
        } catch {
            let reason: String
            switch error {
            case .arity:
                let synopsis = Self.faultSynopses.first { $0.prefix { $0 != ":" } == name } ?? name
                reason = synopsis == name ? "'\(name)' takes no arguments" : "expected \(synopsis)"
            case .invalid(let argument, let expected):
                reason = "'\(argument)' is not \(expected)"
            case .message(let message):
                reason = message
            }
            throw FaultSpecError(spec: spec, reason: reason)
        }
    }

    private static func fault(named name: String, arguments args: [String]) throws(ArgumentError) -> Fault? {
        switch name {
        case "ignore-range": return try none(args, .ignoreRange)
        case "range-shift": return .wrongContentRangeShift(try one(args, integer))
        case "range-total": return .wrongContentRangeTotal(try one(args, integer))
        case "range-inverted": return try none(args, .invertedContentRange)
        case "cut": return .cutAfter(try one(args, count))
        case "cut-random": return .cutAtRandom(seed: try one(args, seed))
        case "stall": return .stallAfter(try one(args, count))
        case "status":
            guard (1...2).contains(args.count) else { throw .arity }
            let retryAfter = args.count == 2 ? Int(clamping: try count(args[1])) : nil
            return .status(try status(args[0], 200...599), retryAfter: retryAfter)
        case "head-status": return .headStatus(try status(try one(args, { $0 }), 200...599))
        case "head-hang": return try none(args, .headHang)
        case "hang": return try none(args, .hang)
        case "delay": return .delay(milliseconds: Int(clamping: try one(args, count)))
        case "head-no-length": return try none(args, .headNoLength)
        case "no-accept-ranges": return try none(args, .noAcceptRanges)
        case "accept-ranges-none": return try none(args, .acceptRangesNone)
        case "gzip": return try none(args, .gzipEncoding)
        case "multipart": return try none(args, .multipart)
        case "chunked": return try none(args, .chunkedNoLength)
        case "change-content": return try none(args, .changeContent)
        case "change-size": return .changeSize(try one(args, count))
        case "weak-etag": return try none(args, .weakETag)
        case "redirect": return try redirect(args)
        case "retry-after":
            guard args.count >= 2 else { throw .arity }
            return .retryAfter(status: try status(args[0], 200...599), value: try fieldValue(args.dropFirst()))
        case "claim-length":
            let digits = try one(args, { $0 })
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw .invalid(digits, expected: "digits")
            }
            return .claimLength(digits)
        case "overlong": return .overlong(try one(args, count))
        case "header":
            guard args.count >= 2 else { throw .arity }
            let name = args[0]
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
                throw .invalid(name, expected: "a header name")
            }
            return .header(name: name, value: try fieldValue(args.dropFirst()))
        default: return nil
        }
    }

    private static func looksLikeTrigger(_ text: Substring) -> Bool {
        ["always", "request=", "from=", "range-start=", "p=", "seed=", "method="].contains { text.hasPrefix($0) }
    }

    private static func trigger(_ text: String) throws(ArgumentError) -> Trigger {
        if text == "always" { return .always }
        var pairs: [String: String] = [:]
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, pairs.updateValue(parts[1], forKey: parts[0]) == nil else {
                throw .message("malformed trigger '\(text)'")
            }
        }
        switch Set(pairs.keys) {
        case ["request"]:
            return .nthRequest(try positive(pairs["request"]!))
        case ["from"]:
            return .fromRequest(try positive(pairs["from"]!))
        case ["range-start"]:
            return .rangeStart(try count(pairs["range-start"]!))
        case ["p"], ["p", "seed"]:
            let text = pairs["p"]!
            guard let p = Double(text), (0...1).contains(p) else {
                throw .invalid(text, expected: "a probability between 0 and 1")
            }
            return .probability(p, seed: try pairs["seed"].map(seed) ?? 1)
        case ["method"]:
            let name = pairs["method"]!
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                throw .invalid(name, expected: "a method name")
            }
            return .method(name.uppercased())
        default:
            throw .message("unknown trigger '\(text)' (known: \(triggerSynopses.joined(separator: ", ")))")
        }
    }

    // MARK: Arguments

    private enum ArgumentError: Error {
        case arity
        case invalid(String, expected: String)
        case message(String)
    }

    private static func none(_ args: [String], _ fault: Fault) throws(ArgumentError) -> Fault {
        guard args.isEmpty else { throw .arity }
        return fault
    }

    private static func one<T>(_ args: [String], _ convert: (String) throws(ArgumentError) -> T) throws(ArgumentError)
        -> T
    {
        guard args.count == 1 else { throw .arity }
        return try convert(args[0])
    }

    private static func integer(_ text: String) throws(ArgumentError) -> Int64 {
        guard let value = Int64(text) else { throw .invalid(text, expected: "an integer") }
        return value
    }

    private static func count(_ text: String) throws(ArgumentError) -> Int64 {
        guard let value = Int64(text), value >= 0 else { throw .invalid(text, expected: "a non-negative integer") }
        return value
    }

    private static func positive(_ text: String) throws(ArgumentError) -> Int {
        guard let value = Int(text), value >= 1 else { throw .invalid(text, expected: "a positive integer") }
        return value
    }

    private static func seed(_ text: String) throws(ArgumentError) -> UInt64 {
        guard let value = UInt64(text) else { throw .invalid(text, expected: "a seed (a non-negative integer)") }
        return value
    }

    private static func status(_ text: String, _ allowed: ClosedRange<Int>) throws(ArgumentError) -> Int {
        guard let value = Int(text), allowed.contains(value) else {
            throw .invalid(text, expected: "a status code in \(allowed.lowerBound)...\(allowed.upperBound)")
        }
        return value
    }

    /// The fields of a header value joined again (it may contain ':'), with
    /// `%XX` escapes decoded; CR and LF would end the field, so they are refused.
    private static func fieldValue(_ fields: ArraySlice<String>) throws(ArgumentError) -> String {
        let text = fields.joined(separator: ":")
        guard let value = percentDecoded(Substring(text)) else {
            throw .invalid(text, expected: "a value with valid %XX escapes")
        }
        guard !value.contains(where: { $0.unicodeScalars.contains { $0 == "\r" || $0 == "\n" } }) else {
            throw .invalid(text, expected: "a value without CR or LF")
        }
        return value
    }

    /// `value` in the spec's text form: `%`, `@` and control characters as `%XX`.
    static func escaped(_ value: String) -> String {
        var bytes: [UInt8] = []
        for byte in value.utf8 {
            if byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "@") {
                let hex = Array(String(byte, radix: 16, uppercase: true).utf8)
                bytes += [UInt8(ascii: "%")] + (hex.count == 1 ? [UInt8(ascii: "0")] : []) + hex
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `LOCATION` or `LOCATION:3XX`; the location itself may contain ':'.
    private static func redirect(_ args: [String]) throws(ArgumentError) -> Fault {
        guard !args.joined().isEmpty else { throw .arity }
        if args.count > 1, let last = args.last, last.count == 3, let code = Int(last), (300...399).contains(code) {
            return .redirect(to: args.dropLast().joined(separator: ":"), status: code)
        }
        return .redirect(to: args.joined(separator: ":"))
    }
}
