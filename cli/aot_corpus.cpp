#include "cli/aot_corpus.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <sstream>

#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "compiler/gradient.hpp"
#include "compiler/layout.hpp"
#include "compiler/lower.hpp"
#include "compiler/schedule.hpp"

namespace einc::cli {
namespace {

// A word of a corpus line, and the byte offset in the line where its text starts (inside its quotes).
struct Word {
    std::string text;
    std::size_t column = 0;
};

struct LineError {
    std::string message;
    std::size_t column = 0, length = 1;
};

// The words of a line up to a `#` comment; patterns are quoted with "...".
std::vector<Word> words_of(std::string_view line) {
    std::vector<Word> words;
    std::size_t i = 0;
    while (i < line.size()) {
        if (line[i] == ' ' || line[i] == '\t') {
            ++i;
            continue;
        }
        if (line[i] == '#') break;
        Word word{"", i};
        bool quoted = false;
        std::size_t quote = 0;
        for (; i < line.size() && (quoted || (line[i] != ' ' && line[i] != '\t')); ++i) {
            if (line[i] == '"') {
                if (!quoted && word.text.empty()) word.column = i + 1;
                quoted = !quoted;
                quote = i;
            } else {
                word.text += line[i];
            }
        }
        if (quoted) throw LineError{"this quote is never closed", quote, 1};
        words.push_back(std::move(word));
    }
    return words;
}

// `?x16x?` -> "1x16x1" with the positions of the `?` dims; nothing if the word is no symbolic shape.
std::optional<std::pair<std::string, std::vector<std::size_t>>> symbolic_shape(const std::string& word) {
    if (word.find('?') == std::string::npos) return std::nullopt;
    if (word.find_first_not_of("0123456789?x") != std::string::npos) return std::nullopt;
    std::string concrete;
    std::vector<std::size_t> positions;
    std::size_t dim = 0;
    for (const char c : word) {
        if (c == 'x') ++dim;
        if (c == '?') positions.push_back(dim);
        concrete += c == '?' ? '1' : c;
    }
    return std::pair{concrete, positions};
}

// The plans a line can have: each `?` at 1 (a unit dim drops out of the loop nests, changing their ranks),
// at an odd size, and at multiples of many small factors (groups like `(h 2)`; up to lcm(1..15), so that
// any group of such factors fits) - small and large, so that the planner's choices that compare sizes (which
// operand a GEMM copies) go either way. For each plan, the schedule's rules give every kernel they can
// choose for any extents and any GPU (possible_kernels): those choices are derived, not sampled.
constexpr std::int64_t symbolic_samples[] = {1, 3, 48, 720, 360360};

void add_unique(std::vector<KernelSignature>& kernels, const KernelSignature& k) {
    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
}

struct SymbolicDim {
    std::size_t operand, dim;
};

// The sample combinations for `n` symbolic dims: all of them up to 256, else the diagonal (every dim the
// same size, which einsum's shared axes need) and random picks.
std::vector<std::vector<std::int64_t>> sample_combinations(std::size_t n) {
    constexpr std::size_t count = std::size(symbolic_samples), limit = 256;
    std::vector<std::vector<std::int64_t>> combinations;
    std::size_t total = 1;
    for (std::size_t i = 0; i < n && total <= limit; ++i) total *= count;
    if (total <= limit) {
        for (std::size_t c = 0; c < total; ++c) {
            std::vector<std::int64_t> sizes;
            for (std::size_t i = 0, rest = c; i < n; ++i, rest /= count)
                sizes.push_back(symbolic_samples[rest % count]);
            combinations.push_back(sizes);
        }
        return combinations;
    }
    for (const std::int64_t s : symbolic_samples) combinations.emplace_back(n, s);
    std::mt19937 rng(1);
    std::uniform_int_distribution<std::size_t> pick(0, count - 1);
    while (combinations.size() < limit) {
        std::vector<std::int64_t> sizes;
        for (std::size_t i = 0; i < n; ++i) sizes.push_back(symbolic_samples[pick(rng)]);
        combinations.push_back(sizes);
    }
    return combinations;
}

// Error `e` about `line`, located at its pattern (labels moved from the pattern into the line) or, when it
// carries no label, at `fallback` - the word it is about.
Error located(const Error& e, const std::string& location, const std::string& line, const Word& pattern,
              const Word& fallback) {
    Diagnostic d = e.diagnostic();
    const bool in_pattern = !d.labels.empty() && d.source == pattern.text;
    std::size_t column = fallback.column;
    if (in_pattern) {
        for (Label& label : d.labels) {
            label.span.begin += static_cast<std::uint32_t>(pattern.column);
            label.span.end += static_cast<std::uint32_t>(pattern.column);
        }
        column = d.labels.front().span.begin;
    } else if (d.labels.empty()) {
        d.labels.push_back(
            {syntax::Span{static_cast<std::uint32_t>(fallback.column),
                          static_cast<std::uint32_t>(fallback.column +
                                                     std::max<std::size_t>(fallback.text.size(), 1))},
             true});
    }
    if (in_pattern || d.source.empty()) d.source = line;
    d.location = fmt::format("{}:{}", location, column + 1);
    return Error(std::move(d));
}

// The word a usage message is about (`unknown option '--foo'`), else the first one.
const Word& word_named_in(const std::string& message, const std::vector<Word>& words) {
    for (const Word& w : words)
        if (!w.text.empty() && message.find("'" + w.text + "'") != std::string::npos) return w;
    return words.front();
}

// Plans one line in every dtype and every sample of its `?` sizes, collecting the kernels.
CorpusEntry plan_line(const std::string& location, const std::string& line) {
    std::vector<Word> words = words_of(line);
    CorpusEntry entry{location, line, {}};
    std::vector<std::string> args;
    std::vector<std::string> dtype_names;
    std::vector<std::vector<std::size_t>> symbolic_words;  // per arg: positions of `?` dims
    std::vector<Word> arg_words;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (words[i].text == "--dtype" && i + 1 < words.size()) {
            std::stringstream list(words[++i].text);
            std::size_t column = words[i].column;  // of each name in the list, for the caret
            for (std::string name; std::getline(list, name, ','); column += name.size() + 1) {
                try {
                    (void)parse_dtype(name);
                } catch (const UsageError& e) {
                    const Word bad{name, column};
                    throw located(Error(ErrorKind::usage, e.what()), location, line, bad, bad);
                }
                if (std::find(dtype_names.begin(), dtype_names.end(), name) == dtype_names.end())
                    dtype_names.push_back(name);
            }
            continue;
        }
        if (const auto symbolic = symbolic_shape(words[i].text)) {
            args.push_back(symbolic->first);
            symbolic_words.push_back(symbolic->second);
        } else {
            args.push_back(words[i].text);
            symbolic_words.emplace_back();
        }
        arg_words.push_back(words[i]);
    }
    if (dtype_names.empty()) dtype_names.push_back("f32");
    if (arg_words.empty())
        throw located(Error(ErrorKind::usage, "this line has options but no call")
                          .help("write the call as after `einc explain`: <op> \"<pattern>\" <shapes>"),
                      location, line, words.front(), words.front());

    CallArgs call;
    try {
        call = parse_call_args(args);
    } catch (const UsageError& e) {
        throw located(Error(ErrorKind::usage, e.what()), location, line, arg_words.front(),
                      word_named_in(e.what(), arg_words));
    } catch (const Error& e) {
        throw located(e, location, line, arg_words.front(), word_named_in(e.diagnostic().message, arg_words));
    }
    const auto pattern_word = std::find_if(arg_words.begin(), arg_words.end(),
                                           [&](const Word& w) { return w.text == call.call.pattern; });
    const Word pattern = pattern_word != arg_words.end() ? *pattern_word : arg_words.front();

    // Which dims of which operand are `?`: operands are the positional args, in order.
    std::vector<SymbolicDim> symbolic;
    std::vector<Word> operand_words;
    for (std::size_t k = 0, cursor = 0; k < call.operands.size(); ++k) {
        if (call.operands[k].is_file)
            throw located(Error(ErrorKind::usage, "a corpus gives shapes, not .npy files"), location, line,
                          pattern, word_named_in("'" + call.operands[k].text + "'", arg_words));
        while (cursor < args.size() && args[cursor] != call.operands[k].text) ++cursor;
        if (cursor == args.size()) break;
        operand_words.push_back(arg_words[cursor]);
        for (const std::size_t dim : symbolic_words[cursor]) symbolic.push_back({k, dim});
        ++cursor;
    }
    if (!symbolic.empty())
        for (const OperandArg& operand : call.operands)
            if (operand.strides)
                throw located(
                    Error(ErrorKind::usage,
                          "`?` sizes go with row-major operands; give strides only with concrete shapes"),
                    location, line, pattern, word_named_in("'" + operand.text + "'", arg_words));

    for (const std::string& dtype_name : dtype_names) {
        const DType dtype = parse_dtype(dtype_name);
        std::optional<Error> first_error;
        bool planned = false;
        for (const std::vector<std::int64_t>& sizes : sample_combinations(symbolic.size())) {
            std::vector<Shape> shapes;
            for (const OperandArg& operand : call.operands) shapes.push_back(operand.shape);
            for (std::size_t i = 0; i < symbolic.size(); ++i)
                shapes[symbolic[i].operand][symbolic[i].dim] = sizes[i];
            std::vector<TensorSpec> specs;
            for (std::size_t k = 0; k < shapes.size(); ++k)
                specs.push_back(TensorSpec{dtype, shapes[k],
                                           call.operands[k].strides.value_or(row_major_strides(shapes[k]))});
            try {
                const Lowered front = lower(call.call, specs, {.until = Stage::bound});
                for (const bool contiguous :
                     {false, true}) {  // views, and results written into given outputs
                    const Lowered planned =
                        lower(front, {.until = Stage::planned, .plan = {.contiguous = contiguous}});
                    for (const KernelSignature& k : possible_kernels(planned.plan, !symbolic.empty()))
                        add_unique(entry.kernels, k);
                }
                if (call.backward) {  // `--backward`: the kernels of its gradients too (row-major output
                                      // gradients)
                    const Plan forward = lower(front, {.until = Stage::planned}).plan;
                    for (const BackwardPlan& backward :
                         plan_backward(front.bound, specs, row_major_gradients(forward)))
                        for (const KernelSignature& k : possible_kernels(backward.plan, !symbolic.empty()))
                            add_unique(entry.kernels, k);
                }
                planned = true;
            } catch (const Error& e) {
                if (!first_error) first_error = e;
            }
        }
        if (!planned) {
            const Word& about = first_error->diagnostic().kind == ErrorKind::shape && !operand_words.empty()
                                    ? operand_words.front()
                                    : pattern;
            Error e = located(*first_error, location, line, pattern, about);
            if (!symbolic.empty())
                e.note(fmt::format("no size tried for the `?` extents fits (tried {})",
                                   fmt::join(symbolic_samples, ", ")));
            if (dtype_names.size() > 1) e.note(fmt::format("for --dtype {}", dtype_name));
            throw e;
        }
    }
    return entry;
}

}  // namespace

Corpus read_corpus_text(const std::string& text, const std::string& file_name) {
    Corpus corpus;
    std::istringstream in(text);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const std::string location = fmt::format("{}:{}", file_name, number);
        try {
            if (words_of(line).empty()) continue;
            corpus.entries.push_back(plan_line(location, line));
        } catch (const LineError& e) {
            Diagnostic d{ErrorKind::syntax, e.message, line, {}, {}, {}, {}};
            d.labels.push_back({syntax::Span{static_cast<std::uint32_t>(e.column),
                                             static_cast<std::uint32_t>(e.column + e.length)},
                                true});
            d.location = fmt::format("{}:{}", location, e.column + 1);
            corpus.errors.emplace_back(std::move(d));
        } catch (const Error& e) {
            corpus.errors.push_back(e);
        }
    }
    return corpus;
}

Corpus read_corpus(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw Error(ErrorKind::file, fmt::format("cannot read the corpus {}", file.string()))
            .help("give a text file, one call per line");
    std::stringstream text;
    text << in.rdbuf();
    return read_corpus_text(text.str(), file.string());
}

std::vector<KernelSignature> corpus_kernels(const Corpus& corpus) {
    std::vector<KernelSignature> kernels;
    for (const CorpusEntry& entry : corpus.entries)
        for (const KernelSignature& k : entry.kernels) add_unique(kernels, k);
    return kernels;
}

}  // namespace einc::cli
