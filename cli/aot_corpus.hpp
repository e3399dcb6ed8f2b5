// The corpus `einc aot` compiles (docs/aot.md): one call per line, written as after `einc explain`.
//
//   # attention, in the dtypes the model runs in
//   einsum "b h i d, b h j d -> b h i j" ?x16x?x128 ?x16x?x128 --dtype bf16,f16
//   rearrange "b s (h d) -> b h s d" ?x?x2048 -a h=16 --dtype bf16
//   reduce "b c (h 2) (w 2) -> b c h w" mean 8x64x224x224
//
// Two additions to the command line: `?` is an extent that may be anything (the kernels serve every size:
// extents and strides are passed at launch), and --dtype takes a list. Blank lines and `#` comments are
// skipped. A line einc rejects is an error naming the file, line and column, with a caret.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "compiler/call.hpp"
#include "compiler/kernel_abi.hpp"
#include "grammar/diagnostic.hpp"

namespace einc::cli {

struct CorpusEntry {
    std::string location;                  // "kernels.txt:3"
    std::string text;                      // the line, as written
    std::vector<KernelSignature> kernels;  // every kernel its schedules can choose, over its dtypes and sizes
};

struct Corpus {
    std::vector<CorpusEntry> entries;
    std::vector<Error> errors;  // one per bad line, located (file:line:column) with a caret
};

// Reads and plans every line; a missing or unreadable file throws einc::Error.
Corpus read_corpus(const std::filesystem::path& file);
Corpus read_corpus_text(const std::string& text, const std::string& file_name);

// The distinct kernels of all entries, in first-seen order.
std::vector<KernelSignature> corpus_kernels(const Corpus& corpus);

}  // namespace einc::cli
