// HTTP dates (RFC 9110 5.6.7): IMF-fixdate out; IMF-fixdate, RFC 850 and
// asctime in, as recipients must accept all three.
import FoundationEssentials

/// Formats and parses HTTP dates, in UTC, to the second.
enum HTTPDate {
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The seconds since 1970 an IMF-fixdate can write: years 0001 to 9999.
    private static let writable: ClosedRange<Double> = -62_135_596_800...253_402_300_799

    /// `Sun, 06 Nov 1994 08:49:37 GMT`; fractions of a second are dropped.
    /// A date outside years 0001 to 9999 (a file's mtime may be anything
    /// up to Int64.max seconds) is written as the nearest one inside.
    static func format(_ date: Date) -> String {
        let exact = date.timeIntervalSince1970.rounded(.down)
        let seconds = exact.isNaN ? 0 : Int64(min(max(exact, writable.lowerBound), writable.upperBound))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int((days % 7 + 11) % 7) // 1970-01-01 was a Thursday
        return "\(weekdays[weekday]), \(pad(day, 2)) \(months[month - 1]) \(pad(year, 4)) "
            + "\(pad(Int(secondOfDay / 3600), 2)):\(pad(Int(secondOfDay / 60 % 60), 2)):\(pad(Int(secondOfDay % 60), 2)) GMT"
    }

    /// The date in any of the three HTTP formats, or nil.
    static func parse(_ text: String) -> Date? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        var day = 0
        var month = 0
        var year = 0
        var time = ""
        switch fields.count {
        case 6: // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard fields[0].hasSuffix(","), weekdays.contains(String(fields[0].dropLast())), fields[5] == "GMT",
                fields[1].count == 2, fields[3].count == 4
            else { return nil }
            day = Int(fields[1]) ?? 0
            month = (months.firstIndex(of: fields[2]) ?? -1) + 1
            year = Int(fields[3]) ?? 0
            time = fields[4]
        case 4: // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let parts = fields[1].split(separator: "-").map(String.init)
            guard fields[0].hasSuffix(","), longWeekdays.contains(String(fields[0].dropLast())), fields[3] == "GMT",
                parts.count == 3, parts[0].count == 2, parts[2].count == 2, let shortYear = Int(parts[2])
            else { return nil }
            day = Int(parts[0]) ?? 0
            month = (months.firstIndex(of: parts[1]) ?? -1) + 1
            year = shortYear < 70 ? 2000 + shortYear : 1900 + shortYear
            time = fields[2]
        case 5: // asctime: Sun Nov  6 08:49:37 1994
            guard weekdays.contains(fields[0]), fields[4].count == 4 else { return nil }
            month = (months.firstIndex(of: fields[1]) ?? -1) + 1
            day = Int(fields[2]) ?? 0
            year = Int(fields[4]) ?? 0
            time = fields[3]
        default:
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
            (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second),
            (1...12).contains(month), (1...31).contains(day), year >= 1
        else { return nil }
        let days = days(fromCivil: year, month, day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Date(timeIntervalSince1970: Double(seconds))
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    private static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthIndex = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * monthIndex + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of `days(fromCivil:)`.
    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
