import ArgumentParser
import FoundationEssentials
import Glibc

/// All terminal output goes through here so errors are one line and JSON
/// listings stay machine-readable.
enum Console {
    static func out(_ line: String) {
        StandardStream.write(line + "\n")
    }

    static func error(_ line: String) {
        StandardStream.write("keyshare: " + line + "\n", to: STDERR_FILENO)
    }

    static func progress(_ line: String) {
        guard isatty(STDERR_FILENO) == 1 else { return }
        StandardStream.write("\r\u{1B}[K" + line, to: STDERR_FILENO)
    }

    static func endProgress() {
        guard isatty(STDERR_FILENO) == 1 else { return }
        StandardStream.write("\r\u{1B}[K", to: STDERR_FILENO)
    }

    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        out(String(decoding: data, as: UTF8.self))
    }

    /// A command's result: the sentence for people, or with `--json` the
    /// same facts as one JSON object (issue 28: every command that prints
    /// something takes --json).
    static func report(_ json: Bool, _ line: @autoclosure () -> String, _ fields: [String: JSONField]) throws {
        if json { try Console.json(fields) } else { out(line()) }
    }

    /// One compact JSON object on one line (event streams such as `token watch --json`).
    static func jsonLine<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// A plain aligned table; columns are as wide as their widest cell. With
    /// `fit`, the columns in `shrink` (most expendable first, each down to its
    /// minimum) are cut, ending in "…", until every line fits in `fit` columns.
    static func table(_ header: [String], _ rows: [[String]], fit: Int? = nil, shrink: [(column: Int, min: Int)] = []) {
        var widths = header.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        if let fit {
            var excess = widths.reduce(0, +) + 2 * (widths.count - 1) - fit
            for (column, minimum) in shrink where excess > 0 && column < widths.count {
                let cut = min(excess, max(0, widths[column] - max(minimum, header[column].count)))
                widths[column] -= cut
                excess -= cut
            }
        }
        func cell(_ c: String, _ i: Int) -> String {
            c.count <= widths[i] ? c : String(c.prefix(widths[i] - 1)) + "…"
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in
                let text = i < widths.count ? cell(c, i) : c
                return i == cells.count - 1 ? text : text.padded(to: widths[i])
            }.joined(separator: "  ")
        }
        out(line(header))
        for row in rows { out(line(row)) }
    }
}

/// A value of a `Console.report` object.
enum JSONField: Encodable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    case string(String), int(Int), double(Double), bool(Bool), strings([String]), ints([Int]), null

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    static func optional(_ s: String?) -> JSONField { s.map(JSONField.string) ?? .null }

    func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let v): try c.encode(v)
        case .int(let v): try c.encode(v)
        case .double(let v): try c.encode(v)
        case .bool(let v): try c.encode(v)
        case .strings(let v): try c.encode(v)
        case .ints(let v): try c.encode(v)
        case .null: try c.encodeNil()
        }
    }
}

/// `--json` for commands that print a confirmation.
struct JSONOption: ParsableArguments {
    @Flag(help: "JSON output.") var json = false
}
