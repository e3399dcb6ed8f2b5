#include "grammar/diagnostic.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace einc {
namespace {

// Length of the UTF-8 sequence starting at text[i], or 0 if it is not a valid, printable one.
std::size_t utf8_length(std::string_view text, std::size_t i) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = lead < 0x80           ? 1
                         : (lead >> 5) == 0x6  ? 2
                         : (lead >> 4) == 0xE  ? 3
                         : (lead >> 3) == 0x1E ? 4
                                               : 0;
    if (length == 0 || i + length > text.size()) return 0;
    for (std::size_t k = 1; k < length; ++k)
        if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return 0;
    if (length == 1 && (lead < 0x20 || lead == 0x7F)) return 0;  // control characters
    return length;
}

// The source as it will be shown, with two maps: source byte -> display column, and display column ->
// offset into the shown text. Control characters and invalid UTF-8 are shown escaped (`\x09`), so the
// caret line stays aligned with what the terminal prints.
struct DisplayLine {
    std::string text;
    std::vector<std::size_t> column;  // column[i] for source byte i; column[size] is the end column
    std::vector<std::size_t> offset;  // offset[c] into `text` for display column c; offset[end] = text.size()
};

DisplayLine display(std::string_view source) {
    DisplayLine line;
    line.column.resize(source.size() + 1);
    for (std::size_t i = 0; i < source.size();) {
        const std::size_t length = utf8_length(source, i);
        for (std::size_t k = 0; k < std::max<std::size_t>(length, 1); ++k)
            line.column[i + k] = line.offset.size();
        if (length == 0) {
            const std::string escaped = fmt::format("\\x{:02X}", static_cast<unsigned char>(source[i]));
            for (std::size_t k = 0; k < escaped.size(); ++k) line.offset.push_back(line.text.size() + k);
            line.text += escaped;
            i += 1;
        } else {
            line.offset.push_back(line.text.size());
            line.text.append(source.substr(i, length));
            i += length;
        }
    }
    line.column[source.size()] = line.offset.size();
    line.offset.push_back(line.text.size());
    return line;
}

constexpr std::size_t max_columns = 100;  // longer patterns are shown as a window around the error
constexpr std::size_t max_line = 600;     // longer messages, notes and helps (a megabyte-long name) are cut

// `text`, or its beginning and end around what was cut, never splitting a UTF-8 sequence.
std::string shorten(const std::string& text) {
    if (text.size() <= max_line) return text;
    const auto boundary = [&](std::size_t i) {
        while (i > 0 && i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
        return i;
    };
    const std::size_t head = boundary(max_line - 100), tail = boundary(text.size() - 80);
    return fmt::format("{} ... ({} bytes cut) ... {}", text.substr(0, head), tail - head, text.substr(tail));
}

}  // namespace

std::string render(const Diagnostic& d) {
    std::string out =
        fmt::format("{}error: {}\n", d.location.empty() ? "" : d.location + ": ", shorten(d.message));
    if (!d.source.empty() || !d.labels.empty()) {
        const DisplayLine line = display(d.source);
        std::string carets(line.column.back() + 1, ' ');
        std::size_t first = carets.size(), last = 0;
        // Secondary labels first, so a primary label drawn over the same columns wins.
        for (const bool primary : {false, true}) {
            for (const Label& label : d.labels) {
                if (label.primary != primary) continue;
                const std::size_t begin = std::min<std::size_t>(label.span.begin, d.source.size());
                const std::size_t end = std::clamp<std::size_t>(label.span.end, begin, d.source.size());
                const std::size_t from = line.column[begin];
                const std::size_t to = std::max(line.column[end], from + 1);
                for (std::size_t c = from; c < to && c < carets.size(); ++c) carets[c] = primary ? '^' : '~';
                first = std::min(first, from);
                last = std::max(last, to);
            }
        }
        std::string shown = line.text;
        std::size_t window_begin = 0;
        if (line.column.back() > max_columns && first < carets.size()) {
            // Centre the window on the labels, as far as they fit.
            window_begin = first > max_columns / 4 ? first - max_columns / 4 : 0;
            if (last > window_begin + max_columns && last - first < max_columns)
                window_begin = last - max_columns;
            const std::size_t b = line.offset[window_begin];
            const std::size_t e = line.offset[std::min(window_begin + max_columns, line.offset.size() - 1)];
            shown =
                (window_begin > 0 ? "..." : "") + shown.substr(b, e - b) + (e < shown.size() ? "..." : "");
            carets = std::string(window_begin > 0 ? 3 : 0, ' ') +
                     carets.substr(window_begin, std::min(max_columns, carets.size() - window_begin));
        }
        while (!carets.empty() && carets.back() == ' ') carets.pop_back();
        out += fmt::format("  {}\n", shown);
        if (!carets.empty()) out += fmt::format("  {}\n", carets);
    }
    for (const std::string& note : d.notes) out += fmt::format("  note: {}\n", shorten(note));
    if (!d.help.empty()) out += fmt::format("  help: {}\n", shorten(d.help));
    return out;
}

Error::Error(ErrorKind kind, std::string message) {
    diagnostic_.kind = kind;
    diagnostic_.message = std::move(message);
}

Error::Error(Diagnostic diagnostic) : diagnostic_(std::move(diagnostic)) {}

Error& Error::at(std::string_view source, syntax::Span primary) & {
    diagnostic_.source = std::string(source);
    diagnostic_.labels.push_back({primary, true});
    rendered_.clear();
    return *this;
}

Error& Error::also(syntax::Span secondary) & {
    diagnostic_.labels.push_back({secondary, false});
    rendered_.clear();
    return *this;
}

Error& Error::note(std::string text) & {
    diagnostic_.notes.push_back(std::move(text));
    rendered_.clear();
    return *this;
}

Error& Error::help(std::string text) & {
    diagnostic_.help = std::move(text);
    rendered_.clear();
    return *this;
}

Error& Error::subscripts(std::string written, std::string reading) & {
    subscripts_ = {std::move(written), std::move(reading)};
    return *this;
}

std::string counted(std::int64_t count, std::string_view noun) {
    return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

const char* Error::what() const noexcept {
    try {
        if (rendered_.empty()) rendered_ = render(diagnostic_);
        return rendered_.c_str();
    } catch (...) {
        return diagnostic_.message.c_str();
    }
}

void internal_error(const char* condition, const char* file, int line) {
    throw InternalError(
        fmt::format("einc internal error: {} failed at {}:{} (please report this)", condition, file, line));
}

}  // namespace einc
