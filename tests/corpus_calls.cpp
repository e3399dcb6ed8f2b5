#include "tests/corpus_calls.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "compiler/bind.hpp"
#include "compiler/layout.hpp"
#include "tests/reference/reference.hpp"

namespace einc::testing {

namespace {

// The words of a corpus command line (the corpus quotes patterns with "...").
std::vector<std::string> words_of(const std::string& line) {
    std::vector<std::string> words;
    std::string word;
    bool quoted = false, in_word = false;
    for (const char c : line) {
        if (c == '"') {
            quoted = !quoted;
            in_word = true;
        } else if (c == ' ' && !quoted) {
            if (in_word) words.push_back(std::exchange(word, {}));
            in_word = false;
        } else {
            word += c;
            in_word = true;
        }
    }
    if (in_word) words.push_back(word);
    return words;
}

}  // namespace

std::vector<CorpusCall> corpus_calls(const std::string& corpus_directory, DType dtype) {
    const std::string prefix = "$ einc explain ";
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(corpus_directory))
        if (entry.path().extension() == ".txt") files.push_back(entry.path());
    std::sort(files.begin(), files.end());  // the same order on every machine
    std::vector<CorpusCall> calls;
    for (const std::filesystem::path& file : files) {
        std::ifstream in(file);
        for (std::string line; std::getline(in, line);) {
            if (line.rfind(prefix, 0) != 0) continue;
            try {
                std::vector<std::string> args = words_of(line.substr(prefix.size()));
                args.insert(args.end(), {"--dtype", std::string(name_of(dtype))});
                const cli::CallArgs parsed = cli::parse_call_args(args);
                CorpusCall call{line.substr(2), parsed.call, cli::load_operands(parsed).specs};
                std::vector<Shape> shapes;
                for (const TensorSpec& spec : call.specs) shapes.push_back(spec.shape);
                (void)plan(bind(call.call, shapes), call.specs);  // throws for what einc rejects
                calls.push_back(std::move(call));
            } catch (const std::exception&) {
                // a line the corpus shows being rejected, or a dtype the operation does not take
            }
        }
    }
    return calls;
}

CorpusOperand filled(const TensorSpec& spec, std::mt19937& rng) {
    // A stride may be negative (numpy's reversed views): the view's origin, element (0, ...), is then not
    // the lowest address it reaches, so the storage spans offset_range and the origin sits -begin into it.
    const OffsetRange range = offset_range(make_layout(spec.shape, spec.strides));
    const std::int64_t span = std::max<std::int64_t>(range.end - range.begin, 1);
    std::uniform_int_distribution<int> value(spec.dtype == DType::boolean ? 0 : -1, 1);
    std::vector<double> values(static_cast<std::size_t>(span));
    for (double& v : values) v = value(rng);
    CorpusOperand operand{reference::make_tensor(spec.dtype, Shape{span}, values), {}};
    std::byte* origin = static_cast<std::byte*>(operand.storage.data()) -
                        range.begin * static_cast<std::int64_t>(size_of(spec.dtype));
    operand.view = TensorView{origin, spec.dtype, spec.shape, spec.strides};
    return operand;
}

}  // namespace einc::testing
