#include "cli/arguments.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "grammar/diagnostic.hpp"

namespace einc::cli {
namespace {

// Which negative numbers a field takes: none (lengths), -1 alone (unpack's unknown length), any (strides).
enum class Negatives { none, minus_one, any };

std::int64_t parse_integer(std::string_view text, std::string_view what, Negatives negatives) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc::result_out_of_range)
        throw UsageError(fmt::format("{} {} is too large for a 64-bit length", what, text));
    if (error != std::errc{} || end != text.data() + text.size() || text.empty())
        throw UsageError(fmt::format(
            "'{}' is not {} {}", text,
            std::string_view("aeiou").find(what.front()) == std::string_view::npos ? "a" : "an", what));
    if (value < 0 && negatives != Negatives::any && !(negatives == Negatives::minus_one && value == -1))
        throw UsageError(fmt::format("{} {} is negative", what, text));
    return value;
}

double parse_number(const std::string& text, std::string_view what) {
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || text.empty() || !std::isfinite(value))
        throw UsageError(fmt::format("{} '{}' is not a finite number", what, text));
    return value;
}

Shape parse_list(std::string_view text, char separator, std::string_view what, Negatives negatives) {
    Shape values;
    if (text.empty()) return values;
    for (std::size_t begin = 0;;) {
        const std::size_t end = text.find(separator, begin);
        values.push_back(parse_integer(text.substr(begin, end - begin), what, negatives));
        if (end == std::string_view::npos) break;
        begin = end + 1;
    }
    return values;
}

// `(4,8):(1,4)` or `(4,8)`.
OperandArg parse_layout(const std::string& text) {
    const auto fail = [&] {
        return UsageError(fmt::format(
            "'{}' is not a layout: write `(4,8):(1,4)` for shape (4,8) with strides (1,4)", text));
    };
    const std::size_t close = text.find(')');
    if (text.front() != '(' || close == std::string::npos) throw fail();
    OperandArg operand{
        text, parse_list(std::string_view(text).substr(1, close - 1), ',', "length", Negatives::none),
        std::nullopt};
    const std::string_view rest = std::string_view(text).substr(close + 1);
    if (rest.empty()) return operand;
    if (rest.size() < 3 || rest.substr(0, 2) != ":(" || rest.back() != ')') throw fail();
    Shape strides;
    for (const std::int64_t s : parse_list(rest.substr(2, rest.size() - 3), ',', "stride", Negatives::any))
        strides.push_back(s);
    if (strides.size() != operand.shape.size())
        throw UsageError(fmt::format("layout '{}' has {} lengths but {} strides", text, operand.shape.size(),
                                     strides.size()));
    operand.strides = std::move(strides);
    return operand;
}

OperandArg parse_operand(const std::string& text) {
    if (text.ends_with(".npy")) return OperandArg{text, {}, std::nullopt, true};
    if (!text.empty() && text.front() == '(') return parse_layout(text);
    return OperandArg{text, parse_shape_literal(text), std::nullopt};
}

// An operand, or a usage error that guesses what was meant: an axis size without -a (`h=4`), a word of a
// pattern the shell split (`explain rearrange a b 2x3`: the pattern unquoted).
OperandArg parse_operand_or_hint(const std::string& text, const std::string& pattern) {
    const auto is_name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    const std::size_t equals = text.find('=');
    if (equals != std::string::npos && equals > 0 &&
        std::all_of(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(equals), is_name_char))
        throw UsageError(
            fmt::format("'{}' is not an operand: an axis size is given with -a, e.g. -a {}", text, text));
    try {
        return parse_operand(text);
    } catch (const UsageError&) {
        if (reduction_named(text))
            throw UsageError(fmt::format(
                "'{}' is not an operand: a reduction is given to reduce, after its pattern", text));
        const bool pattern_word = std::isalpha(static_cast<unsigned char>(text.front())) &&
                                  std::all_of(text.begin(), text.end(), [&](char c) {
                                      return is_name_char(c) || c == '(' || c == ')' || c == '.' ||
                                             c == '-' || c == '>' || c == ',';
                                  });
        if (!pattern_word) throw;
        throw UsageError(
            fmt::format("'{}' is not an operand (a shape such as 2x3, or a .npy file): if it "
                        "belongs to the pattern, quote the pattern as one argument, e.g. \"{} {} "
                        "...\"",
                        text, pattern, text));
    }
}

AxisSize parse_axis_size(const std::string& text) {
    const std::size_t equals = text.find('=');
    if (equals == std::string::npos || equals == 0)
        throw UsageError(fmt::format("'-a {}' is not an axis size: write -a name=size, e.g. -a h=4", text));
    return AxisSize{text.substr(0, equals),
                    parse_integer(std::string_view(text).substr(equals + 1), "axis size", Negatives::none)};
}

// `--print syntax,bound`: only those stages.
void set_stages(CallArgs& parsed, const std::string& list) {
    parsed.print_syntax = parsed.print_bound = parsed.print_plan = parsed.print_schedule = false;
    for (std::size_t begin = 0; begin <= list.size();) {
        const std::size_t end = std::min(list.find(',', begin), list.size());
        const std::string stage = list.substr(begin, end - begin);
        if (stage == "syntax")
            parsed.print_syntax = true;
        else if (stage == "bound")
            parsed.print_bound = true;
        else if (stage == "plan")
            parsed.print_plan = true;
        else if (stage == "schedule")
            parsed.print_schedule = true;
        else
            throw UsageError(
                fmt::format("unknown stage '{}' in --print (syntax, bound, plan, schedule)", stage));
        begin = end + 1;
    }
}

}  // namespace

Shape parse_shape_literal(const std::string& text, bool allow_unknown) {
    if (text == "scalar") return {};
    if (text.empty())
        throw UsageError("empty shape: write `2x3` for a 2-by-3 tensor, `scalar` for a 0-dim one");
    return parse_list(text, 'x', "shape length", allow_unknown ? Negatives::minus_one : Negatives::none);
}

CallArgs parse_call_args(std::span<const std::string> args) {
    CallArgs parsed;
    std::vector<std::string> positional;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        const auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(fmt::format("option {} needs a value", arg));
            return args[++i];
        };
        if (arg == "-a" || arg == "--axis")
            parsed.call.sizes.push_back(parse_axis_size(value()));
        else if (arg.starts_with("-a") && arg.size() > 2 && arg[2] != '-')
            parsed.call.sizes.push_back(parse_axis_size(arg.substr(2)));
        else if (arg == "--dtype") {
            parsed.dtype = value();
            parsed.dtype_given = true;
        } else if (arg == "--compact")
            parsed.call.compact = true;
        else if (arg == "--packed")
            parsed.call.packed_shapes.push_back(parse_shape_literal(value(), true));
        else if (arg == "--json")
            parsed.json = true;
        else if (arg == "--view")
            parsed.view = true;
        else if (arg == "--contiguous")
            parsed.contiguous = true;
        else if (arg == "--alpha")
            parsed.alpha = parse_number(value(), "--alpha");
        else if (arg == "--beta")
            parsed.beta = parse_number(value(), "--beta");
        else if (arg == "--max-intermediate") {
            parsed.max_intermediate_bytes =
                static_cast<std::size_t>(parse_integer(value(), "--max-intermediate bytes", Negatives::none));
            if (parsed.max_intermediate_bytes == 0)
                throw UsageError("--max-intermediate takes a number of bytes above 0");
        } else if (arg == "--backward") {  // run: with the output's gradient (a .npy file; once per output)
            parsed.backward = true;
            if (i + 1 < args.size() && args[i + 1].ends_with(".npy"))
                parsed.output_gradients.push_back(args[++i]);
        } else if (arg == "--device")
            parsed.device = value();
        else if (arg == "--backend")
            parsed.backend = value();
        else if (arg == "--ptx")
            parsed.ptx = true;
        else if (arg == "--arch")
            parsed.arch = static_cast<int>(parse_integer(value(), "GPU architecture", Negatives::none));
        else if (arg == "-o" || arg == "--output")
            parsed.outputs.push_back(value());
        else if (arg == "--print")
            set_stages(parsed, value());
        else if (arg == "--") {
            positional.insert(positional.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                              args.end());
            break;
        } else if (arg.size() > 1 && arg.front() == '-' &&
                   (std::isalpha(static_cast<unsigned char>(arg[1])) || arg[1] == '-'))
            throw UsageError(fmt::format("unknown option '{}'", arg));
        else
            positional.push_back(arg);
    }
    if (parsed.view && parsed.contiguous)
        throw UsageError(
            "--view asks for a result that is a view, --contiguous for one that is not: give one");
    if (positional.empty())
        throw UsageError(
            "missing the operation (rearrange, reduce, repeat, einsum, pack, unpack, parse_shape)");
    const auto op = op_named(positional[0]);
    if (!op) {
        std::string hint;
        for (const std::string_view name :
             {"rearrange", "reduce", "repeat", "einsum", "pack", "unpack", "parse_shape"})
            if (name.substr(0, 3) == std::string_view(positional[0]).substr(0, 3))
                hint = fmt::format(" (did you mean '{}'?)", name);
        throw UsageError(fmt::format("unknown operation '{}'{}", positional[0], hint));
    }
    parsed.call.op = *op;
    if (positional.size() < 2) throw UsageError(fmt::format("missing the pattern after '{}'", positional[0]));
    parsed.call.pattern = positional[1];
    std::size_t next = 2;
    if (*op == Op::reduce) {
        const bool looks_like_operand =
            positional.size() >= 3 &&
            (std::isdigit(static_cast<unsigned char>(positional[2].front())) ||
             positional[2].front() == '(' || positional[2] == "scalar" || positional[2].ends_with(".npy"));
        if (positional.size() < 3 || looks_like_operand)
            throw UsageError(
                "missing the reduction: reduce <pattern> <sum|mean|max|min|prod|any|all> <operand>");
        parsed.call.reduction = reduction_or_error(positional[2]);
        next = 3;
    }
    for (std::size_t i = next; i < positional.size(); ++i)
        parsed.operands.push_back(parse_operand_or_hint(positional[i], parsed.call.pattern));
    if (parsed.operands.empty())
        throw UsageError("missing the operands: give each tensor's shape (e.g. 2x3x224x224) or a .npy file");
    return parsed;
}

Options options_of(const CallArgs& args) {
    return Options{.contiguous = args.contiguous,
                   .require_view = args.view,
                   .alpha = args.alpha,
                   .beta = args.beta,
                   .max_intermediate_bytes = args.max_intermediate_bytes};
}

}  // namespace einc::cli
