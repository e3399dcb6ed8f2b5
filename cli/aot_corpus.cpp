#include "cli/aot_corpus.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "compiler/bind.hpp"
#include "compiler/checked.hpp"
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

void add_unique(std::vector<KernelSignature>& kernels, const KernelSignature& k) {
    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
}

struct SymbolicDim {
    std::size_t operand, dim;
};

// ---- the sizes a line with `?` extents is planned at ---------------------------------------------------
//
// Its kernels follow from the rules, not from sizes picked at random. The GPU rules' size-dependent
// facts (a transpose long enough, whole vector words, many terms, a split, 64-bit counts) are taken every
// way for each plan by possible_kernels. The plan itself depends on the sizes only through
//   - whether each elementary axis is 0, 1 or longer: canonicalize drops modes of extent 1 and merges the
//     modes it leaves adjacent (the stride tests are equalities of products of extents, which hold or not
//     by which axes lie between, once none is 1); plan_reduce moves data instead over a length-1 set,
//     plan_einsum sums an operand's own axes unless they are all 1, makes a GEMM only over a summed
//     length above 1 and multiplies elementwise where M or N is 1; an empty nest has modes of its own
//     (canonicalize), and a length-0 axis reduces to an identity where a longer one would not;
//   - einsum: whether a lone dim of length 1 broadcasts against its axis in another operand (bind);
//   - the planner's choices that compare sizes - the order einsum contracts three or more operands in,
//     which operands a GEMM copies - which PlanChoices walks every way instead (plan.hpp);
//   - the gradient of a mean, whose kernel carries 1/n (refused over a `?` axis: no finite set serves).
// So each axis a `?` sizes takes 0, 1 and a prime of its own - distinct primes, so that no product of
// some axes equals one of others by accident - and each einsum dim that is such an axis alone also 1.

// The primes the free axes take for "longer than 1" (8: the most free axes the limit below allows).
constexpr std::int64_t free_axis_primes[] = {5, 7, 11, 13, 17, 19, 23, 29};
// At most 3^8 size classes a line: each free axis three ways, each einsum dim that may broadcast two.
constexpr std::size_t max_size_classes = 6561;
// At most this many plans a line (size classes times contiguous or not times the walks of PlanChoices):
// many-operand einsums with `?` have many orders.
constexpr std::size_t max_plans = 200000;

// The size classes of a line's `?` extents: per class, the `?` extents in the order of `symbolic`. It is
// bound once with every `?` at 0 (max and min read as sum,
// which has an empty set's value): the axes of length 0 are those the `?` extents size (free), the others
// in their dims are fixed (`(h 2)`'s 2), and a `?` then is the product of its dim's axes.
// Throws einc::Error where the line does not bind so (a `?` that another operand or -a fixes) or has too
// many classes.
std::vector<std::vector<std::int64_t>> size_classes(const CallArgs& call,
                                                    const std::vector<SymbolicDim>& symbolic) {
    std::vector<Shape> shapes;
    for (const OperandArg& operand : call.operands) shapes.push_back(operand.shape);
    for (const SymbolicDim& s : symbolic) shapes[s.operand][s.dim] = 0;
    Call probe_call = call.call;
    if (probe_call.reduction == Reduction::max || probe_call.reduction == Reduction::min)
        probe_call.reduction = Reduction::sum;
    const Bound probe = bind(probe_call, shapes);

    struct FreeAxis {
        AxisId axis;
        std::vector<std::size_t> lone_dims;  // einsum: the `?` dims that are this axis alone (may be 1)
        std::size_t dims = 0;                // the input dims that hold it
    };
    std::vector<FreeAxis> free;
    struct DimSizes {
        std::vector<std::size_t> free;  // indices into `free`
        std::int64_t fixed = 1;         // the product of its other axes
    };
    std::vector<DimSizes> dims;
    for (const SymbolicDim& s : symbolic) {
        DimSizes d;
        const BoundDim& dim = probe.inputs[s.operand].dims[s.dim];
        for (const AxisId a : dim.axes) {
            if (probe.size(a) != 0) {
                d.fixed = saturating_mul(d.fixed, probe.size(a));
                continue;
            }
            auto it = std::find_if(free.begin(), free.end(), [&](const FreeAxis& f) { return f.axis == a; });
            if (it == free.end()) it = free.insert(free.end(), FreeAxis{a, {}});
            d.free.push_back(static_cast<std::size_t>(it - free.begin()));
        }
        if (d.free.empty()) d.fixed = dim.extent;  // (pack's `*` dim: the sum of the parts)
        if (call.call.op == Op::einsum && dim.axes.size() == 1 && d.free.size() == 1)
            free[d.free[0]].lone_dims.push_back(dims.size());
        dims.push_back(std::move(d));
    }
    for (FreeAxis& f : free)
        for (const BoundOperand& input : probe.inputs)
            for (const BoundDim& dim : input.dims)
                f.dims += static_cast<std::size_t>(std::count(dim.axes.begin(), dim.axes.end(), f.axis) > 0);
    if (call.backward && call.call.op == Op::reduce && call.call.reduction == Reduction::mean)
        for (const FreeAxis& f : free)
            if (std::find(probe.reduced.begin(), probe.reduced.end(), f.axis) != probe.reduced.end())
                throw Error(ErrorKind::unsupported,
                            fmt::format("the gradient of mean scales by 1/n, a constant of its kernel: with "
                                        "'{}' a `?` extent, there is a kernel for every length",
                                        probe.axis(f.axis).name))
                    .at(probe.pattern.text, probe.axis(f.axis).span)
                    .help("give the reduced extents, or leave out --backward (the gradient's kernels are "
                          "then compiled at run time)");

    // Per free axis: its prime, 0, 1 - and at the prime and at 0, each subset of its lone einsum dims at 1
    // instead (a broadcast; not all of them where they are all it has: that is the axis at 1). The prime
    // with no broadcast first, so that an error every class shares reads as at ordinary sizes.
    std::vector<std::size_t> subsets;
    std::size_t classes = 1;
    for (const FreeAxis& f : free) {
        const std::size_t lone =
            f.dims > 1 ? std::min<std::size_t>(f.lone_dims.size(), 16) : 0;  // (16: past the limit anyway)
        subsets.push_back((std::size_t{1} << lone) - (lone > 0 && lone == f.dims ? 1 : 0));
        classes = classes > max_size_classes ? classes : classes * (2 * subsets.back() + 1);
    }
    if (classes > max_size_classes)
        throw Error(
            ErrorKind::usage,
            fmt::format("this line has {} size classes: einc aot plans each axis a `?` sizes at 0, "
                        "1 and longer ({} axes{}), and takes at most {}",
                        classes > max_size_classes * 64 ? "too many" : std::to_string(classes), free.size(),
                        call.call.op == Op::einsum ? ", each einsum dim of one of them also at 1" : "",
                        max_size_classes))
            .help("give some of the extents");

    std::vector<std::vector<std::int64_t>> result;
    std::set<std::vector<std::int64_t>> seen;
    for (std::size_t c = 0; c < classes; ++c) {
        std::vector<std::int64_t> axis_size(free.size());
        std::vector<bool> broadcast(dims.size(), false);
        for (std::size_t i = 0, rest = c; i < free.size(); rest /= 2 * subsets[i] + 1, ++i) {
            const std::size_t way = rest % (2 * subsets[i] + 1);
            axis_size[i] = way < subsets[i] ? free_axis_primes[i] : way < 2 * subsets[i] ? 0 : 1;
            const std::size_t mask = way < 2 * subsets[i] ? way % subsets[i] : 0;
            for (std::size_t b = 0; b < free[i].lone_dims.size(); ++b)
                if (mask >> b & 1u) broadcast[free[i].lone_dims[b]] = true;
        }
        std::vector<std::int64_t> sizes;
        bool fits = true;
        for (std::size_t k = 0; k < dims.size(); ++k) {
            std::optional<std::int64_t> extent = broadcast[k] ? 1 : dims[k].fixed;
            for (const std::size_t f : dims[k].free)
                if (!broadcast[k]) extent = extent ? checked_mul(*extent, axis_size[f]) : std::nullopt;
            fits = fits && extent.has_value();
            sizes.push_back(extent.value_or(0));
        }
        if (fits && seen.insert(sizes).second) result.push_back(std::move(sizes));
    }
    return result;
}

struct TooManyPlans {};  // (not an einc::Error: a line that has too many plans is refused, not skipped)

// Calls plan_once() until each of `choices` has walked every sequence (starting over while the others go on);
// once if there are none. Counts the plans into `plans`.
template <typename PlanFunction>
void walk_every_way(std::span<PlanChoices> choices, std::size_t& plans, const PlanFunction& plan_once) {
    std::vector<bool> walked(choices.size(), false);
    do {
        if (++plans > max_plans) throw TooManyPlans{};
        plan_once();
        for (std::size_t c = 0; c < choices.size(); ++c)
            if (!choices[c].next()) walked[c] = true;
    } while (std::find(walked.begin(), walked.end(), false) != walked.end());
}

// Adds the kernels a call can launch at these operands: of its plans - results as views, and results
// written into given outputs - and with --backward of its gradients' (row-major output gradients). With
// `?` extents (`symbolic`) the choices that compare sizes are walked every way; a concrete call's are made
// as at run time.
void collect_kernels(const CallArgs& call, std::span<const TensorSpec> specs, bool symbolic,
                     std::size_t& plans, std::vector<KernelSignature>& kernels) {
    const Lowered front = lower(call.call, specs, {.until = Stage::bound});
    for (const bool contiguous : {false, true}) {
        std::vector<PlanChoices> choices(symbolic ? 1 : 0);
        walk_every_way(choices, plans, [&] {
            const PlanOptions options{.contiguous = contiguous, .choices = symbolic ? &choices[0] : nullptr};
            const Lowered planned = lower(front, {.until = Stage::planned, .plan = options});
            for (const KernelSignature& k : possible_kernels(planned.plan, symbolic)) add_unique(kernels, k);
        });
    }
    if (!call.backward) return;
    const std::vector<TensorSpec> gradients =
        row_major_gradients(lower(front, {.until = Stage::planned}).plan);
    // A walk per backward call, side by side (plan_backward says why they can be).
    std::vector<PlanChoices> choices(symbolic ? backward_calls(front.bound, specs[0].dtype).size() : 0);
    walk_every_way(choices, plans, [&] {
        for (const BackwardPlan& backward :
             plan_backward(front.bound, front.inputs, gradients, {}, {}, choices))
            for (const KernelSignature& k : possible_kernels(backward.plan, symbolic)) add_unique(kernels, k);
    });
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

    const auto located_error = [&](const Error& e) {
        const Word& about = e.diagnostic().kind == ErrorKind::shape && !operand_words.empty()
                                ? operand_words.front()
                                : pattern;
        return located(e, location, line, pattern, about);
    };
    std::vector<std::vector<std::int64_t>> classes{{}};  // a line of concrete sizes: its own
    if (!symbolic.empty()) {
        try {
            classes = size_classes(call, symbolic);
        } catch (const Error& e) {
            Error located_e = located_error(e);
            if (e.kind() == ErrorKind::shape || e.kind() == ErrorKind::pattern)
                located_e.note("einc aot binds a line with every `?` at 0 to find the axes they size: a `?` "
                               "must be free to take any length its dim allows");
            throw located_e;
        }
    }

    try {
        for (const std::string& dtype_name : dtype_names) {
            const DType dtype = parse_dtype(dtype_name);
            std::optional<Error> first_error;
            bool planned = false;
            std::size_t plans = 0;
            for (const std::vector<std::int64_t>& sizes : classes) {
                std::vector<Shape> shapes;
                for (const OperandArg& operand : call.operands) shapes.push_back(operand.shape);
                for (std::size_t i = 0; i < symbolic.size(); ++i)
                    shapes[symbolic[i].operand][symbolic[i].dim] = sizes[i];
                std::vector<TensorSpec> specs;
                for (std::size_t k = 0; k < shapes.size(); ++k)
                    specs.push_back(TensorSpec{
                        dtype, shapes[k], call.operands[k].strides.value_or(row_major_strides(shapes[k]))});
                try {
                    collect_kernels(call, specs, !symbolic.empty(), plans, entry.kernels);
                    planned = true;
                } catch (const Error& e) {
                    if (!first_error) first_error = e;
                }
            }
            if (!planned) {
                Error e = located_error(*first_error);
                if (!symbolic.empty()) e.note("at every size the `?` extents can take");
                if (dtype_names.size() > 1) e.note(fmt::format("for --dtype {}", dtype_name));
                throw e;
            }
        }
    } catch (const TooManyPlans&) {
        throw located(
            Error(ErrorKind::usage,
                  fmt::format("this line has more than {} plans to walk: its `?` size classes times "
                              "the ways its einsums can contract",
                              max_plans))
                .help("give some of the extents, or split the einsum"),
            location, line, pattern, pattern);
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
